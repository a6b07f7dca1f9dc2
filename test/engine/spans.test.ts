import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  listCheckpoints,
  restore,
  verifyStream,
  type Policy,
  type Store,
} from 'statefold';
import { flipByte } from '../support/damage.js';
import { checkpointKey } from '../support/forge-frame.js';
import { HookStore, type StoreOp } from '../support/hook-store.js';
import { firstDifference } from '../support/same.js';
import { verified } from '../support/checkpoints.js';

/**
 * Span deltas (policy.spanEvery): every k-th delta after a base also carries the operations of the
 * deltas since the span delta before it, so a restore reads the base, the span deltas and at most
 * k - 1 plain deltas. These tests check that every seq still restores to what was captured, that
 * restores read that many frames and no more, and what happens across reopens, policy changes,
 * claims that leave fillers, and damage.
 */

const STREAM = 'agent/spans';
const LONG: Policy = { baseEvery: 1_000, maxDeltaRatio: Infinity };

/** Counts GETs of checkpoint objects (keys under the stream's log). */
class GetCounter extends HookStore {
  frames = 0;
  constructor(inner: Store) {
    super(inner);
  }
  protected override before(op: StoreOp, key: string): void {
    if (op === 'get' && key.includes('/log/')) this.frames++;
  }
}

/** A state that grows, shrinks, edits in place and appends to a string, so deltas hold every kind of operation. */
function evolve(state: { log: string[]; notes: string; n: number; tags: Record<string, number> }, i: number): void {
  state.log.push(`step ${i}: ${'tool output '.repeat(1 + (i % 5))}`);
  if (i % 4 === 0) state.log.splice(0, 1);
  if (i % 3 === 0) state.log[0] = `edited at ${i}`;
  state.notes += ` and then step ${i} happened`;
  state.n = i;
  if (i % 5 === 0) delete state.tags[`t${i - 5}`];
  state.tags[`t${i}`] = i;
}

type S = { log: string[]; notes: string; n: number; tags: Record<string, number> };

/** Writes `count` checkpoints with `engine`, returning the state captured at each seq. */
async function write(engine: SnapshotEngine<S>, count: number, from: number, seen: Map<number, S>): Promise<S> {
  const state: S = structuredClone(engine.state ?? { log: [], notes: 'a note that keeps growing', n: 0, tags: {} });
  for (let i = from; i < from + count; i++) {
    evolve(state, i);
    const info = await engine.checkpoint(state, { meta: { i } });
    seen.set(info.seq, structuredClone(state));
  }
  return state;
}

async function expectEverySeq(store: Store, seen: Map<number, S>): Promise<void> {
  for (const [seq, state] of seen) {
    const r = await restore<S>(store, STREAM, { seq });
    expect(firstDifference(r.state, state), `seq ${seq}`).toBeUndefined();
    expect(r.seq).toBe(seq);
  }
}

describe('span deltas', () => {
  for (const updates of ['copy', 'immutable'] as const) {
    it(`restores every seq as captured, reading base + span deltas + the deltas after the last (${updates})`, async () => {
      const store = new MemoryStore();
      const every = 4;
      const engine = await SnapshotEngine.open<S>({
        store,
        stream: STREAM,
        updates,
        policy: { ...LONG, spanEvery: every },
      });
      const seen = new Map<number, S>();
      if (updates === 'copy') await write(engine, 41, 1, seen);
      else {
        // Immutable updates: a new object along each changed path.
        let state: S = { log: [], notes: 'a note that keeps growing', n: 0, tags: {} };
        for (let i = 1; i <= 41; i++) {
          const next = structuredClone(state);
          evolve(next, i);
          state = Object.freeze(next);
          const info = await engine.checkpoint(state, { meta: { i } });
          seen.set(info.seq, structuredClone(state));
        }
      }
      await engine.close();
      await expectEverySeq(store, seen);
      const list = verified(await listCheckpoints(store, STREAM));
      expect(list.filter((c) => c.kind === 'base').map((c) => c.seq)).toEqual([1]);
      const counter = new GetCounter(store);
      for (const seq of [1, 2, 4, 5, 6, 9, 23, 40, 41]) {
        counter.frames = 0;
        await restore(counter, STREAM, { seq });
        const deltas = seq - 1;
        // The base, one span delta per 4 deltas, and the deltas after the last span delta.
        const expected = 1 + Math.floor(deltas / every) + (deltas % every);
        expect(counter.frames, `frames read for seq ${seq}`).toBe(expected);
      }
      const report = await verifyStream(store, STREAM);
      expect(report.damaged).toEqual([]);
      expect(report.intact).toHaveLength(41);
    });
  }

  it('stores the same states as a stream without spans, and reads far fewer frames for a long chain', async () => {
    const plain = new MemoryStore();
    const spanned = new MemoryStore();
    const seen = new Map<number, S>();
    const a = await SnapshotEngine.open<S>({ store: plain, stream: STREAM, policy: LONG });
    const b = await SnapshotEngine.open<S>({ store: spanned, stream: STREAM, policy: { ...LONG, spanEvery: 8 } });
    const state: S = { log: [], notes: 'x'.repeat(40), n: 0, tags: {} };
    for (let i = 1; i <= 101; i++) {
      evolve(state, i);
      const [ia, ib] = await Promise.all([a.checkpoint(state), b.checkpoint(state)]);
      expect(ib.seq).toBe(ia.seq);
      seen.set(ia.seq, structuredClone(state));
    }
    await Promise.all([a.close(), b.close()]);
    await expectEverySeq(spanned, seen);
    const [pc, sc] = [new GetCounter(plain), new GetCounter(spanned)];
    await restore(pc, STREAM);
    await restore(sc, STREAM);
    expect(pc.frames).toBe(101);
    expect(sc.frames).toBe(1 + 12 + 4);
    // The price: each delta's operations stored about twice.
    const bytes = async (s: Store): Promise<number> =>
      verified(await listCheckpoints(s, STREAM)).reduce((n, c) => n + c.bytes, 0);
    const [pb, sb] = [await bytes(plain), await bytes(spanned)];
    expect(sb).toBeGreaterThan(pb);
    expect(sb).toBeLessThan(pb * 2.5);
  });

  it('carries effects recorded between span deltas across a restore that jumps over them', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open<S>({ store, stream: STREAM, policy: { ...LONG, spanEvery: 3 } });
    const seen = new Map<number, S>();
    await write(engine, 1, 1, seen);
    // Seqs 2 and 3 record effects, seq 4 (a span delta from the base) carries their ledger changes.
    let calls = 0;
    await engine.effect('charge:1', async () => (calls++, 'receipt-1'));
    await engine.effect('email:1', async () => (calls++, 'sent-1'));
    await write(engine, 3, 2, seen);
    await engine.close();
    const counter = new GetCounter(store);
    const r = await restore(counter, STREAM);
    expect(r.effects.map((e) => [e.token, e.status, e.result])).toEqual([
      ['charge:1', 'done', 'receipt-1'],
      ['email:1', 'done', 'sent-1'],
    ]);
    const reopened = await SnapshotEngine.open<S>({ store, stream: STREAM, policy: { ...LONG, spanEvery: 3 } });
    expect(await reopened.effect('charge:1', async () => (calls++, 'again'))).toBe('receipt-1');
    expect(calls).toBe(2);
    await reopened.close();
    expect(counter.frames).toBeLessThan(r.seq);
  });

  it('goes on with the span of a chain after a reopen in the middle of it, and starts a base when spanEvery changes', async () => {
    const store = new MemoryStore();
    const seen = new Map<number, S>();
    const open = (spanEvery: number) =>
      SnapshotEngine.open<S>({ store, stream: STREAM, policy: { ...LONG, spanEvery } });
    let engine = await open(4);
    await write(engine, 6, 1, seen); // base 1, deltas 2-6 (5 a span delta)
    await engine.close();
    engine = await open(4);
    await write(engine, 7, 7, seen); // 9 and 13 span deltas, built from what the reopen read
    await engine.close();
    const counter = new GetCounter(store);
    await restore(counter, STREAM);
    expect(counter.frames).toBe(4); // 1, 5, 9, 13
    engine = await open(3);
    const first = await engine.checkpoint({ ...structuredClone(engine.state!), n: -1 });
    seen.set(first.seq, { ...structuredClone(engine.state!) });
    expect(first.kind, 'a new span length starts a new chain').toBe('base');
    await write(engine, 4, 20, seen);
    await engine.close();
    // Spans turned off: plain deltas go on in the same chain, read one by one.
    engine = await open(1);
    const next = await engine.checkpoint({ ...structuredClone(engine.state!), n: -2 });
    seen.set(next.seq, structuredClone(engine.state!));
    expect(next.kind).toBe('delta');
    await engine.close();
    await expectEverySeq(store, seen);
    expect((await verifyStream(store, STREAM)).damaged).toEqual([]);
  });

  it('reads the deltas before a span position one by one when a claim left a filler there', async () => {
    const store = new MemoryStore();
    const seen = new Map<number, S>();
    const policy = { ...LONG, spanEvery: 4 };
    const old = await SnapshotEngine.open<S>({ store, stream: STREAM, policy });
    const state = await write(old, 3, 1, seen); // base 1, deltas 2-3
    // A new engine claims while the old one commits: the old engine's seq 4 lands just before the
    // claim's fence would, so the claim jumps ahead (fence in slot 8) and fills 5-7 with fillers.
    let raced = false;
    const racing = new HookStore(store, async (op, key) => {
      if (op !== 'putIfAbsent' || key !== checkpointKey(STREAM, 4) || raced) return;
      raced = true;
      evolve(state, 4);
      seen.set((await old.checkpoint(state)).seq, structuredClone(state));
    });
    const fresh = await SnapshotEngine.open<S>({ store: racing, stream: STREAM, policy });
    expect(raced).toBe(true);
    expect(fresh.seq).toBe(7);
    const fillers = verified(await listCheckpoints(store, STREAM))
      .filter((c) => c.filler)
      .map((c) => c.seq);
    expect(fillers).toEqual([5, 6, 7]);
    for (const seq of fillers) seen.set(seq, structuredClone(seen.get(4)!));
    await write(fresh, 3, 8, seen); // 8, then 9: a span delta from the filler at 5
    await fresh.close();
    await expect(old.checkpoint(state)).rejects.toMatchObject({ code: 'FENCED' });
    await old.close().catch(() => undefined);
    await expectEverySeq(store, seen);
    const counter = new GetCounter(store);
    await restore(counter, STREAM, { seq: 9 });
    // 1, then 2-4 one by one up to the filler at 5 (not a span delta), then 9's jump from 5.
    expect(counter.frames).toBe(6);
    expect((await verifyStream(store, STREAM)).damaged).toEqual([]);
  });

  it('passes over a damaged delta that a later restore jumps over, and verifyStream reports what restore does', async () => {
    const store = new MemoryStore();
    const seen = new Map<number, S>();
    const engine = await SnapshotEngine.open<S>({ store, stream: STREAM, policy: { ...LONG, spanEvery: 4 } });
    await write(engine, 9, 1, seen);
    await engine.close();
    await flipByte(store, checkpointKey(STREAM, 3));
    // Seq 9 reads the base and the span deltas 5 and 9, seq 7 the base, 5, 6 and 7: neither reads 3.
    for (const seq of [9, 7, 5])
      expect(
        firstDifference((await restore<S>(store, STREAM, { seq })).state, seen.get(seq)),
        `seq ${seq}`,
      ).toBeUndefined();
    await expect(restore(store, STREAM, { seq: 3 })).rejects.toMatchObject({ code: 'CORRUPT', seq: 3 });
    await expect(restore(store, STREAM, { seq: 4 })).rejects.toMatchObject({ code: 'CORRUPT', seq: 3 });
    // verifyStream agrees with restore: only the seqs that need seq 3 are damaged; the span delta 5
    // jumps over it, and the chain goes on from there.
    const report = await verifyStream(store, STREAM);
    expect(report.damaged.map((d) => d.seq)).toEqual([3, 4]);
    expect(report.intact).toEqual([1, 2, 5, 6, 7, 8, 9]);
    expect(report.newestIntact).toBe(9);
    for (const seq of report.intact) await expect(restore(store, STREAM, { seq })).resolves.toMatchObject({ seq });
  });

  it('rejects a damaged span delta as CORRUPT naming it, and a swapped one by its jump checksum', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open<S>({ store, stream: STREAM, policy: { ...LONG, spanEvery: 2 } });
    await write(engine, 5, 1, new Map());
    await engine.close();
    const damaged = new MemoryStore();
    for (const key of await store.list('')) await damaged.putIfAbsent(key, (await store.get(key))!);
    await flipByte(damaged, checkpointKey(STREAM, 5));
    await expect(restore(damaged, STREAM)).rejects.toMatchObject({ code: 'CORRUPT', seq: 5 });
    // Seq 3 (a span delta from 1) replaced by another stream's seq 3 of the same shape: its
    // checksum differs, so seq 5's jump from 3 no longer applies.
    const other = new MemoryStore();
    const o = await SnapshotEngine.open<S>({ store: other, stream: STREAM, policy: { ...LONG, spanEvery: 2 } });
    await write(o, 3, 100, new Map());
    await o.close();
    const key = checkpointKey(STREAM, 3);
    await store.delete(key);
    await store.putIfAbsent(key, (await other.get(key))!);
    await expect(restore(store, STREAM)).rejects.toMatchObject({ code: 'CORRUPT' });
    const report = await verifyStream(store, STREAM);
    expect(report.intact).not.toContain(5);
  });

  it('stores span deltas as format version 4, deltas only, and rejects what that version does not allow', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open<S>({ store, stream: STREAM, policy: { ...LONG, spanEvery: 2 } });
    await write(engine, 3, 1, new Map());
    await engine.close();
    const versions = [];
    for (const seq of [1, 2, 3])
      versions.push((await store.get((await store.list(checkpointKey(STREAM, seq))).at(-1)!))![4]);
    expect(versions).toEqual([1, 2, 4]); // 2: a delta that appends to a string
    const forged = async (seq: number, edit: (frame: Buffer) => void): Promise<MemoryStore> => {
      const copy = new MemoryStore();
      for (const key of await store.list('')) await copy.putIfAbsent(key, (await store.get(key))!);
      // The checkpoint is the slot's last key (seq 1's follows the first engine's fence).
      const key = (await copy.list(checkpointKey(STREAM, seq))).at(-1)!;
      const frame = Buffer.from((await copy.get(key))!);
      edit(frame);
      frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
      await copy.delete(key);
      await copy.putIfAbsent(key, frame);
      return copy;
    };
    const cases: [number, (f: Buffer) => void, RegExp, string][] = [
      [1, (f) => (f[4] = 4), /a base frame in format version 4/, 'CORRUPT'],
      // (Intact, in a version past this statefold's: a newer statefold's frame, not damage.)
      [3, (f) => (f[4] = 6), /format version 6 is not supported/, 'UNSUPPORTED'],
      [3, (f) => (f[7] = 2), /flags 2 are not valid in format version 4/, 'CORRUPT'],
      // A span delta read as a plain one: its payload is not a list of operations.
      [3, (f) => (f[4] = 1), /jump fields in a format version 1 frame/, 'CORRUPT'],
    ];
    for (const [seq, edit, why, code] of cases) {
      const err = await restore(await forged(seq, edit), STREAM).catch((e: unknown) => e);
      expect(err).toMatchObject({ code, seq });
      expect((err as Error).message).toMatch(why);
    }
  });

  it('is off by default on every store (older statefold cannot read span deltas), and rejects a bad spanEvery', async () => {
    const local = new MemoryStore();
    const engine = await SnapshotEngine.open<S>({ store: local, stream: STREAM, policy: LONG });
    expect(engine.policy.spanEvery).toBe(1);
    await write(engine, 20, 1, new Map());
    await engine.close();
    // No span delta, no span length in any header, nothing but versions 1 and 2.
    for (const key of await local.list('')) {
      const bytes = (await local.get(key))!;
      if (bytes.byteLength >= 20 && Buffer.from(bytes).toString('latin1', 0, 4) === 'SFLD')
        expect([1, 2], key).toContain(bytes[4]);
    }
    expect((await local.list('')).some((k) => k.split('/hint/')[1]?.includes('.'))).toBe(false);
    await expect(SnapshotEngine.open({ store: local, stream: STREAM, policy: { spanEvery: 0 } })).rejects.toMatchObject(
      { code: 'INVALID_ARGUMENT', message: expect.stringContaining('policy.spanEvery') },
    );
    await expect(
      SnapshotEngine.open({ store: local, stream: STREAM, policy: { spanEvery: 2.5 } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
