import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  forkStream,
  listCheckpoints,
  restore,
  type Encryption,
  type Store,
} from 'statefold';

interface State {
  step: number;
  paid: boolean;
  log: string[];
}

/** An agent that checkpoints `steps` steps and charges once, at step 5 (recorded with effect()). */
async function run(
  store: Store,
  stream: string,
  steps: number,
  charges: string[],
  encryption?: Encryption,
): Promise<void> {
  const engine = await SnapshotEngine.open<State>({ store, stream, ...(encryption && { encryption }) });
  const state: State = { step: 0, paid: false, log: [] };
  for (let i = 1; i <= steps; i++) {
    state.step = i;
    state.log.push(`step ${i} `.repeat(20));
    if (i === 5) {
      await engine.effect('charge:order-1', async (token) => {
        charges.push(token);
        return { receipt: 'r-1' };
      });
      state.paid = true;
    }
    await engine.checkpoint(state, { meta: { step: i } });
  }
  await engine.close();
}

/** Resumes an agent on `stream` the way it would after a crash: the charge goes through effect(). */
async function resume(store: Store, stream: string, charges: string[], encryption?: Encryption): Promise<unknown> {
  const engine = await SnapshotEngine.open<State>({ store, stream, ...(encryption && { encryption }) });
  const receipt = await engine.effect('charge:order-1', async (token) => {
    charges.push(token);
    return { receipt: 'r-2' };
  });
  await engine.close();
  return receipt;
}

describe('forkStream', () => {
  it('forks at a seq after a charge: the fork never charges again; before it, the fork charges', async () => {
    const store = new MemoryStore();
    const charges: string[] = [];
    await run(store, 'agent', 12, charges);
    expect(charges).toHaveLength(1);
    const seqs = await listCheckpoints(store, 'agent');
    const afterCharge = seqs.find((c) => !c.damaged && c.effects.some((e) => e.status === 'done'))!.seq;

    const info = await forkStream(store, 'agent', 'agent/fork-late', { seq: afterCharge + 2 });
    expect(info).toEqual({
      stream: 'agent/fork-late',
      seq: 1,
      from: { stream: 'agent', seq: afterCharge + 2 },
      effects: 1,
    });
    expect(await resume(store, 'agent/fork-late', charges)).toEqual({ receipt: 'r-1' });
    expect(charges, 'the fork did not charge again').toHaveLength(1);

    await forkStream(store, 'agent', 'agent/fork-early', { seq: 2 });
    expect(await resume(store, 'agent/fork-early', charges)).toEqual({ receipt: 'r-2' });
    expect(charges, 'forked before the charge: the charge runs').toHaveLength(2);
  });

  it('is one base whatever the chain: the state, meta and ledger of the seq forked', async () => {
    const store = new MemoryStore();
    await run(store, 'long', 40, []);
    const newest = (await restore(store, 'long')).seq; // 40 steps, and the effect's intent and outcome
    const want = await restore(store, 'long', { seq: 30 });
    await forkStream(store, 'long', 'short', { seq: 30 });
    const listed = await listCheckpoints(store, 'short');
    expect(listed.map((c) => (c.damaged ? 'damaged' : c.kind))).toEqual(['base']);
    const got = await restore(store, 'short');
    expect(got.state).toEqual(want.state);
    expect(got.meta).toEqual(want.meta);
    expect(got.effects).toEqual(want.effects);
    // The original is only read.
    expect((await restore(store, 'long')).seq).toBe(newest);
    expect(newest).toBe(42);
  });

  it('carries a pending effect: the fork stops at it (EFFECT_PENDING) instead of running it', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open<State>({ store, stream: 'crashing' });
    await engine.checkpoint({ step: 1, paid: false, log: ['x'.repeat(500)] });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const charge = engine.effect('charge:order-1', async () => {
      await held; // the intent is committed; the outcome is not (a crash here leaves it pending)
      return 'late';
    });
    // Wait (bounded) until the intent's checkpoint has committed.
    for (let i = 0; i < 100 && (await restore(store, 'crashing')).effects.length === 0; i++) await sleep(10);
    expect((await restore(store, 'crashing')).effects.map((e) => e.status)).toEqual(['pending']);
    await forkStream(store, 'crashing', 'crashing/fork');
    const fork = await SnapshotEngine.open({ store, stream: 'crashing/fork' });
    await expect(fork.effect('charge:order-1', async () => 'again')).rejects.toMatchObject({ code: 'EFFECT_PENDING' });
    await fork.close();
    release();
    expect(await charge).toBe('late');
    await engine.close();
  });

  it('refuses a fork into a stream that exists, or into itself, and leaves it alone', async () => {
    const store = new MemoryStore();
    await run(store, 'a', 3, []);
    await run(store, 'b', 2, []);
    const before = (await store.list('')).sort();
    await expect(forkStream(store, 'a', 'b')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: /already exists/,
    });
    await expect(forkStream(store, 'a', 'a')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(forkStream(store, 'a', 'c', { seq: 9 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await store.list('')).sort()).toEqual(before);
  });

  it('forks an encrypted stream into an encrypted fork', async () => {
    const store = new MemoryStore();
    const encryption: Encryption = { keys: { k: randomBytes(32) }, current: 'k' };
    const charges: string[] = [];
    await run(store, 'secret', 8, charges, encryption);
    await forkStream(store, 'secret', 'secret/fork', { encryption });
    await expect(restore(store, 'secret/fork')).rejects.toMatchObject({ code: 'KEY_UNAVAILABLE' });
    expect(await resume(store, 'secret/fork', charges, encryption)).toEqual({ receipt: 'r-1' });
    expect(charges).toHaveLength(1);
  });
});
