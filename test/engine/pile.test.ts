import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, isStatefoldError, listCheckpoints, restore, type Store } from 'statefold';
import { FaultStore } from 'statefold/testing';
import { MAX_PILED_FENCES } from '../../dist/engine/open/pile.js';
import { HookStore, type StoreOp } from '../support/hook-store.js';

/**
 * Opens that never commit (a process in a crash loop) pile their fences into the slot after the
 * newest checkpoint, and every open, restore and listing reads that slot. An open that finds more
 * than MAX_PILED_FENCES there commits a filler and a base of the same state past them.
 */

/** Counts the keys list calls returned. */
class ListCounter extends HookStore {
  listed = 0;
  protected override after(op: StoreOp, _key: string, result: unknown): void {
    if (op === 'list') this.listed += (result as string[]).length;
  }
}

const STREAM = 'crash loop';
/** The newest seq of stream(). */
const TOP = 22;

/** A stream of 20 checkpoints ({ n }), then one recorded effect (two checkpoints of the same state). */
async function stream(): Promise<MemoryStore> {
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open({ store, stream: STREAM, policy: { baseEvery: 8 } });
  for (let n = 1; n <= 20; n++) await engine.checkpoint({ n });
  await engine.effect('charge-1', async () => 'receipt-1');
  expect(engine.seq).toBe(TOP);
  await engine.close();
  return store;
}

/** Opens and closes `times` engines that commit nothing. */
async function idleOpens(store: Store, times: number): Promise<void> {
  for (let i = 0; i < times; i++) await (await SnapshotEngine.open({ store, stream: STREAM })).close();
}

/** A copy of every object of `store`. */
async function copyOf(store: MemoryStore): Promise<MemoryStore> {
  const copy = new MemoryStore();
  for (const key of await store.list('')) await copy.putIfAbsent(key, (await store.get(key))!);
  return copy;
}

/** Every retained seq restores: { n: seq } up to 20, the same state after, `last` at the newest. */
async function expectHistory(store: Store, last: unknown): Promise<void> {
  const listed = await listCheckpoints(store, STREAM);
  expect(listed.every((c) => !c.damaged)).toBe(true);
  const newest = listed[listed.length - 1]!.seq;
  for (const { seq } of listed) {
    const want = seq <= 20 ? { n: seq } : seq === newest ? last : { n: 20 };
    expect((await restore(store, STREAM, { seq })).state, `seq ${seq}`).toEqual(want);
  }
}

describe('piled fences: opens that never commit', () => {
  it(`list a bounded number of keys: past ${MAX_PILED_FENCES} fences an open commits a filler and a base beyond them`, async () => {
    const store = await stream();
    await idleOpens(store, 3 * MAX_PILED_FENCES);
    const counter = new ListCounter(store);
    const engine = await SnapshotEngine.open({ store: counter, stream: STREAM });
    const openListed = counter.listed;
    counter.listed = 0;
    expect((await restore(counter, STREAM)).state).toEqual({ n: 20 });
    // Without the fillers: ~2 x 192 keys for the open and ~192 for the restore.
    expect(openListed).toBeLessThan(2 * (MAX_PILED_FENCES + 12));
    expect(counter.listed).toBeLessThan(MAX_PILED_FENCES + 12);
    // Two checkpoints (filler, base) per pile settled, each with the same state.
    expect(engine.seq).toBeGreaterThan(TOP);
    expect((engine.seq - TOP) % 2).toBe(0);
    expect(engine.state).toEqual({ n: 20 });
    // The effect ledger went through the base: the effect is not run again.
    expect(await engine.effect('charge-1', async () => 'charged twice')).toBe('receipt-1');
    await engine.checkpoint({ n: 21 });
    await engine.close();
    await expectHistory(store, { n: 21 });
  });

  it(`leave ${MAX_PILED_FENCES} fences alone: no checkpoint is written`, async () => {
    const store = await stream();
    await idleOpens(store, MAX_PILED_FENCES);
    const engine = await SnapshotEngine.open({ store, stream: STREAM });
    expect(engine.seq).toBe(TOP);
    await engine.close();
  });

  it('keep an engine fenced by the pile fenced: its checkpoint lands nowhere', async () => {
    const store = await stream();
    const zombie = await SnapshotEngine.open({ store, stream: STREAM });
    await idleOpens(store, MAX_PILED_FENCES + 1);
    const engine = await SnapshotEngine.open({ store, stream: STREAM });
    expect(engine.seq).toBe(TOP + 2);
    await expect(zombie.checkpoint({ n: 99 })).rejects.toMatchObject({ code: 'FENCED' });
    await zombie.close();
    await engine.checkpoint({ n: 21 });
    await engine.close();
    await expectHistory(store, { n: 21 });
  });

  it('survive a crash at any store operation of the settling open: the state never changes, the next open goes on', async () => {
    const piled = await stream();
    await idleOpens(piled, MAX_PILED_FENCES + 1);
    // The settling open's operations, counted on a clean run.
    const clean = new FaultStore(await copyOf(piled));
    const settled = await SnapshotEngine.open({ store: clean, stream: STREAM });
    expect(settled.seq).toBe(TOP + 2);
    await settled.close();
    const ops = clean.count;
    // Listings, reads, the fence, the filler, the base and its hint.
    expect(clean.log.filter((r) => r.op === 'putIfAbsent').length).toBeGreaterThanOrEqual(4);
    for (let at = 0; at < ops; at++) {
      for (const landed of [false, true]) {
        const inner = await copyOf(piled);
        const faults = new FaultStore(inner).crashAt(at, { landed });
        // The process dies at operation `at`: open fails, or returns and its writes fail.
        await SnapshotEngine.open({ store: faults, stream: STREAM }).catch((err: unknown) => {
          if (!isStatefoldError(err)) throw err;
        });
        const label = `crash at ${at} of ${ops} (${landed ? 'landed' : 'lost'}): ${faults.log[at]?.op} ${faults.log[at]?.key}`;
        expect((await restore(inner, STREAM)).state, label).toEqual({ n: 20 });
        const next = await SnapshotEngine.open({ store: inner, stream: STREAM });
        expect(next.state, label).toEqual({ n: 20 });
        await next.checkpoint({ n: 21 });
        await next.close();
        await expectHistory(inner, { n: 21 });
      }
    }
  });

  it('settle an encrypted stream with spans and retention the same way', async () => {
    const key = new Uint8Array(32).fill(7);
    const options = {
      stream: STREAM,
      encryption: { keys: { k1: key }, current: 'k1' },
      policy: { baseEvery: 16, spanEvery: 4 },
      retention: { keepLast: 1, minAgeMs: 0 },
    };
    const store = new MemoryStore();
    const writer = await SnapshotEngine.open({ store, ...options });
    for (let n = 1; n <= 10; n++) await writer.checkpoint({ n });
    await writer.close();
    for (let i = 0; i <= MAX_PILED_FENCES; i++) await (await SnapshotEngine.open({ store, ...options })).close();
    const engine = await SnapshotEngine.open({ store, ...options });
    expect(engine.seq).toBe(12);
    expect(engine.state).toEqual({ n: 10 });
    await engine.gc();
    await engine.close();
    // The settling checkpoints count toward retention like any other: keepLast 1 keeps the base.
    const listed = await listCheckpoints(store, STREAM, { encryption: options.encryption });
    expect(listed.map((c) => [c.seq, !c.damaged && c.kind])).toEqual([[12, 'base']]);
    expect((await restore(store, STREAM, { encryption: options.encryption })).state).toEqual({ n: 10 });
  });

  it('settle once when two opens race on the same pile: the loser is fenced, nothing forks', async () => {
    const store = await stream();
    await idleOpens(store, MAX_PILED_FENCES + 1);
    const [a, b] = await Promise.all([
      SnapshotEngine.open({ store, stream: STREAM }),
      SnapshotEngine.open({ store, stream: STREAM }),
    ]);
    expect([a.state, b.state]).toEqual([{ n: 20 }, { n: 20 }]);
    // Exactly one of them holds the stream; the other was fenced, during its settle or after it.
    const results = await Promise.allSettled([a.checkpoint({ n: 21 }), b.checkpoint({ n: 21 })]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const lost = results.find((r) => r.status === 'rejected');
    expect(lost?.reason).toMatchObject({ code: 'FENCED' });
    await Promise.all([a.close(), b.close()]);
    await expectHistory(store, { n: 21 });
  });
});
