import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  StatefoldError,
  listCheckpoints,
  restore,
  type PendingPolicy,
  type Store,
} from 'statefold';
import { FaultStore } from 'statefold/testing';
import { verified } from '../support/checkpoints.js';

/** A payment service that honours idempotency keys and counts what it was asked and what it did. */
class PaymentService {
  readonly requests = new Map<string, number>();
  readonly charges = new Map<string, { id: string; amount: number }>();
  charge(key: string, amount: number): { id: string; amount: number } {
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    let charge = this.charges.get(key);
    if (!charge) this.charges.set(key, (charge = { id: `ch_${this.charges.size + 1}`, amount }));
    return charge;
  }
}

const ORDERS = ['o1', 'o2', 'o3'];
type OrderState = { paid: Record<string, string> };

/** The agent: pays every unpaid order through an effect, then records it in its state. */
async function agent(store: Store, service: PaymentService, onPendingEffect: PendingPolicy): Promise<OrderState> {
  const engine = await SnapshotEngine.open<OrderState>({ store, stream: 'orders', onPendingEffect });
  const state: OrderState = engine.state ?? { paid: {} };
  if (engine.seq === 0) await engine.checkpoint(state);
  for (const order of ORDERS) {
    if (state.paid[order]) continue;
    const receipt = await engine.effect(`charge-${order}`, (token) => service.charge(token, 10));
    state.paid[order] = receipt.id;
    await engine.checkpoint(state);
  }
  await engine.close();
  return state;
}

async function opsOfCleanRun(): Promise<number> {
  const faults = new FaultStore(new MemoryStore());
  await agent(faults, new PaymentService(), 'throw');
  return faults.count;
}

describe('effects: crash at every point around an effect', () => {
  it('with the retry policy and a key-honouring service, applies every effect exactly once', async () => {
    const total = await opsOfCleanRun();
    let cases = 0;
    for (const landed of [false, true]) {
      for (let at = 0; at <= total; at++) {
        const inner = new MemoryStore();
        const service = new PaymentService();
        const faults = new FaultStore(inner).crashAt(at, { landed });
        await agent(faults, service, 'retry').catch(() => undefined);
        const finalState = await agent(inner, service, 'retry');
        const where = `crash at op ${at}${landed ? ' (landed)' : ''}`;
        expect(Object.keys(finalState.paid).sort(), where).toEqual(ORDERS);
        expect(service.charges.size, where).toBe(ORDERS.length);
        for (const order of ORDERS) {
          // Applied once; asked at most twice (once more only if the crash hid its outcome).
          expect(service.requests.get(`charge-${order}`), where).toBeLessThanOrEqual(2);
          expect(finalState.paid[order], where).toBe(service.charges.get(`charge-${order}`)!.id);
        }
        const restored = await restore<OrderState>(inner, 'orders');
        expect(restored.state, where).toEqual(finalState);
        expect(
          restored.effects.map((e) => e.status),
          where,
        ).toEqual(['done', 'done', 'done']);
        cases++;
      }
    }
    expect(cases).toBeGreaterThan(20);
  });

  it('with the throw policy, reports the pending token and never calls fn for it again', async () => {
    const total = await opsOfCleanRun();
    let pendingSeen = 0;
    for (let at = 0; at <= total; at++) {
      const inner = new MemoryStore();
      const service = new PaymentService();
      await agent(new FaultStore(inner).crashAt(at), service, 'throw').catch(() => undefined);
      const before = new Map(service.requests);
      const probe = await SnapshotEngine.open({ store: inner, stream: 'orders' });
      const pending = probe.pendingEffects().map((e) => e.token);
      await probe.close();
      const result = await agent(inner, service, 'throw').then(
        () => undefined,
        (err: unknown) => err,
      );
      if (pending.length > 0) {
        pendingSeen++;
        expect(pending).toHaveLength(1);
        expect(result).toBeInstanceOf(StatefoldError);
        expect(result).toMatchObject({ code: 'EFFECT_PENDING', message: expect.stringContaining(pending[0]!) });
        // fn was not called again for the pending token.
        expect(service.requests.get(pending[0]!)).toBe(before.get(pending[0]!));
        // restore shows the operator which one.
        expect(
          (await restore(inner, 'orders')).effects.filter((e) => e.status === 'pending').map((e) => e.token),
        ).toEqual(pending);
      } else {
        expect(result, `crash at op ${at}`).toBeUndefined();
      }
    }
    expect(pendingSeen).toBeGreaterThan(0);
  });
});

describe('effects: ledger', () => {
  it('returns the recorded result of a done token without calling fn, across engines', async () => {
    const store = new MemoryStore();
    const a = await SnapshotEngine.open({ store, stream: 'e' });
    await a.checkpoint({ step: 1 });
    let calls = 0;
    const fn = async (token: string) => ({ token, n: ++calls, at: new Date(5), v: new Float32Array([1]) });
    const first = await a.effect('t1', fn);
    expect(await a.effect('t1', fn)).toEqual(first);
    await a.close();
    const b = await SnapshotEngine.open({ store, stream: 'e' });
    expect(await b.effect('t1', fn)).toEqual(first);
    expect(calls).toBe(1);
    expect(b.effects).toEqual([expect.objectContaining({ token: 't1', status: 'done' })]);
    await b.close();
  });

  it('records a failure and does not run the effect again', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'f' });
    await engine.checkpoint({});
    let calls = 0;
    const boom = async () => {
      calls++;
      throw Object.assign(new Error('card declined'), { code: 'card_declined' });
    };
    await expect(engine.effect('pay', boom)).rejects.toThrow('card declined');
    await expect(engine.effect('pay', boom)).rejects.toMatchObject({
      code: 'EFFECT_FAILED',
      message: expect.stringContaining('card declined'),
    });
    expect(calls).toBe(1);
    await engine.close();
    const rec = (await restore(store, 'f')).effects[0]!;
    expect(rec).toMatchObject({
      token: 'pay',
      status: 'failed',
      error: { name: 'Error', message: 'card declined', code: 'card_declined' },
    });
  });

  it('calls a reconcile function for a pending token and records its answer', async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const a = await SnapshotEngine.open({ store: faults, stream: 'r' });
    await a.checkpoint({});
    // The process dies while fn runs: the intent is durable, the outcome never is.
    const crashed = a.effect('send-email', async () => {
      faults.crash();
      return 'sent';
    });
    await expect(crashed).rejects.toBeInstanceOf(StatefoldError);
    const b = await SnapshotEngine.open({ store: inner, stream: 'r' });
    expect(b.pendingEffects().map((e) => e.token)).toEqual(['send-email']);
    let called = false;
    const result = await b.effect('send-email', () => ((called = true), 'again'), {
      onPending: async (token) => `reconciled ${token}`,
    });
    expect(result).toBe('reconciled send-email');
    expect(called).toBe(false);
    expect(b.pendingEffects()).toEqual([]);
    await b.close();
    expect((await restore(inner, 'r')).effects).toEqual([
      expect.objectContaining({ token: 'send-email', status: 'done', result: 'reconciled send-email' }),
    ]);
  });

  it('commits the intent with the state given, atomically', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open<{ n: number }>({ store, stream: 'atomic' });
    await engine.checkpoint({ n: 0 });
    let calls = 0;
    await engine.effect(
      'x',
      async () => {
        calls++;
        const during = await restore(store, 'atomic');
        expect(during.state).toEqual({ n: 1 });
        expect(during.effects).toEqual([expect.objectContaining({ token: 'x', status: 'pending' })]);
        return 1;
      },
      { state: { n: 1 } },
    );
    // The checks above ran: fn was called, once.
    expect(calls).toBe(1);
    await engine.close();
    const list = verified(await listCheckpoints(store, 'atomic'));
    expect(list.map((c) => c.effects.map((e) => `${e.token}:${e.status}`))).toEqual([[], ['x:pending'], ['x:done']]);
  });

  it('rejects an outcome that cannot be encoded with INVALID_STATE and keeps the ledger consistent', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'u' });
    await engine.checkpoint({});
    let calls = 0;
    const fn = async () => (calls++, { handle: () => 1 });
    await expect(engine.effect('h', fn)).rejects.toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringContaining('result.handle'),
    });
    // Done (it ran), so it never runs again, and asking again says why there is no result.
    await expect(engine.effect('h', fn)).rejects.toMatchObject({ code: 'INVALID_STATE' });
    expect(calls).toBe(1);
    await engine.close();
    expect((await restore(store, 'u')).effects).toEqual([expect.objectContaining({ token: 'h', status: 'done' })]);
  });

  it('expires settled tokens by count and age but never pending ones', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'exp', effectRetention: { keepLast: 2 } });
    await engine.checkpoint({});
    for (const t of ['a', 'b', 'c', 'd']) await engine.effect(t, async () => t);
    // Expiry runs at most once a second, at a checkpoint.
    await sleep(1100);
    await engine.checkpoint({});
    expect(engine.effects.map((e) => e.token).sort()).toEqual(['c', 'd']);
    await engine.close();
    expect((await restore(store, 'exp')).effects.map((e) => e.token).sort()).toEqual(['c', 'd']);
  });

  it('repeats the last meta in the checkpoints that record an effect, and names the stream without a state', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'meta-fx' });
    await expect(engine.effect('early', async () => 1)).rejects.toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringContaining('"meta-fx"'),
    });
    await engine.checkpoint({ x: 1 }, { meta: { step: 17 } });
    await engine.effect('pay', async () => 'ok');
    expect(engine.seq).toBe(3); // intent and outcome are checkpoints of their own
    expect(engine.meta).toEqual({ step: 17 });
    await engine.close();
    expect(verified(await listCheckpoints(store, 'meta-fx')).map((c) => c.meta)).toEqual([
      { step: 17 },
      { step: 17 },
      { step: 17 },
    ]);
    const again = await SnapshotEngine.open({ store, stream: 'meta-fx' });
    await again.effect('pay-2', async () => 'ok');
    await again.close();
    expect((await restore(store, 'meta-fx')).meta).toEqual({ step: 17 });
  });

  it('rejects a bad token with INVALID_ARGUMENT', async () => {
    const engine = await SnapshotEngine.open({ store: new MemoryStore(), stream: 'bad' });
    await engine.checkpoint({});
    await expect(engine.effect('', async () => 1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.effect(42 as never, async () => 1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await engine.close();
  });
});
