import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  FileStore,
  MemoryStore,
  SnapshotEngine,
  deleteStream,
  findIndexed,
  gc,
  listCheckpoints,
  listStreams,
  restore,
  verifyStream,
  type IndexedEntry,
} from 'statefold';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { roundStore } from '../support/round-store.js';

// findIndexed against a reference: the first retained checkpoint whose index key reaches the key
// sought. Index objects may be lost (a crash after a base), forged, stale (another life of the
// stream) or malformed: an answer may then be missing (the caller searches), never wrong.

const STREAM = 'agent/indexed';
const index = (meta: unknown): string | undefined => (meta as { k?: string } | undefined)?.k;
/** A key of fixed width, so that string order is number order. */
const key = (n: number): string => `k${n.toString().padStart(6, '0')}`;
const first = (entries: IndexedEntry[]): number[] => [entries[0]!.seq];

/** Writes `keys.length` checkpoints, checkpoint i with meta { k: keys[i] } and state { i }, re-opening as told. */
async function write(store: MemoryStore, keys: string[], baseEvery: number, reopenEvery = 0, spanEvery = 1) {
  const policy = { baseEvery, spanEvery, maxDeltaRatio: Infinity };
  let engine = await SnapshotEngine.open<{ i: number; text: string }>({ store, stream: STREAM, policy, index });
  for (const [i, k] of keys.entries()) {
    if (reopenEvery > 0 && i > 0 && i % reopenEvery === 0) {
      await engine.close();
      engine = await SnapshotEngine.open({ store, stream: STREAM, policy, index });
    }
    await engine.checkpoint({ i, text: `step ${i} `.repeat(3) }, { meta: { k } });
  }
  await engine.close();
}

/** The first retained committed seq whose key is at least `q`, from listCheckpoints. */
async function reference(store: MemoryStore, q: string): Promise<number | undefined> {
  for (const e of await listCheckpoints(store, STREAM)) if (!e.damaged && (index(e.meta) ?? '') >= q) return e.seq;
  return undefined;
}

describe('findIndexed', () => {
  it('finds the first checkpoint whose key reaches the one sought, or answers nothing; never a wrong one', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          steps: fc.array(fc.constantFrom(0, 1, 1, 1, 2, 5), { minLength: 1, maxLength: 90 }),
          baseEvery: fc.integer({ min: 1, max: 12 }),
          reopenEvery: fc.integer({ min: 0, max: 9 }),
          spanEvery: fc.constantFrom(1, 1, 1, 3),
          keepLast: fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }),
          drop: fc.array(fc.nat(), { maxLength: 4 }),
          forged: fc.array(fc.record({ k: fc.nat(500), p: fc.nat(100), b: fc.nat(100) }), { maxLength: 4 }),
          queries: fc.array(fc.nat(520), { minLength: 1, maxLength: 8 }),
        }),
        async ({ steps, baseEvery, reopenEvery, spanEvery, keepLast, drop, forged, queries }) => {
          const store = new MemoryStore();
          // Keys never decrease (a step of 0 repeats the last: ties across bases).
          let n = 0;
          const keys = steps.map((s) => key((n += s)));
          await write(store, keys, baseEvery, reopenEvery, spanEvery);
          if (keepLast !== undefined) await gc(store, STREAM, { keepLast, minAgeMs: 0 });
          const objects = (await store.list('')).filter((k) => k.includes('/idx/'));
          const root = (await store.list('')).find((k) => k.includes('/log/'))!.split('/')[0]!;
          for (const i of drop) if (objects.length > 0) await store.delete(objects[i % objects.length]!);
          const hex = (s: string) => Buffer.from(s).toString('hex');
          for (const f of forged) {
            const name = `${hex(key(f.k))}.${(f.p + 1).toString(16).padStart(16, '0')}.${(f.p + f.b + 2).toString(16).padStart(16, '0')}`;
            await store.putIfAbsent(`${root}/idx/${name}`, new Uint8Array(0));
          }
          await store.putIfAbsent(`${root}/idx/zz-not-an-index-object`, new Uint8Array(0));
          for (const q of queries) {
            const found = await findIndexed<{ i: number }>(store, STREAM, { key: key(q), index, select: first });
            if (found === undefined) continue;
            const expected = await reference(store, key(q));
            expect(found.restored[0]?.seq, `key ${key(q)}`).toBe(expected);
            expect(found.restored[0]!.state).toEqual((await restore(store, STREAM, { seq: expected! })).state);
            expect(found.entries[0]!.meta).toEqual({ k: keys[expected! - 1] });
          }
        },
      ),
      { numRuns: 120, seed: 30_0917 },
    );
  });

  it('answers every key of a clean stream, in two dependent rounds whatever its length', async () => {
    for (const length of [40, 400]) {
      const counted = roundStore(new MemoryStore(), true);
      const store = counted.store as MemoryStore;
      const keys = Array.from({ length }, (_, i) => key(2 * i + 2));
      await write(store, keys, 8);
      for (const at of [1, 2, 9, 16, 17, Math.floor(length / 2), length - 9, length - 1, length]) {
        counted.reset();
        const found = await findIndexed<{ i: number }>(store, STREAM, { key: key(2 * at), index, select: first });
        expect(found?.restored[0]?.seq, `seq ${at} of ${length}`).toBe(at);
        expect(found?.restored[0]?.state.i).toBe(at - 1);
        expect(counted.rounds, `seq ${at} of ${length}`).toBe(2);
        // A key between two checkpoints' keys: its transition is the later one.
        const between = await findIndexed(store, STREAM, { key: key(2 * at - 1), index, select: first });
        expect(between?.restored[0]?.seq).toBe(at);
      }
      // Above every key: no checkpoint reaches it.
      const above = await findIndexed(store, STREAM, { key: key(10 * length), index, select: first });
      expect(above).toBeUndefined();
    }
  });

  it('select picks what to restore, [] for absent, undefined for cannot tell', async () => {
    const store = new MemoryStore();
    await write(
      store,
      Array.from({ length: 30 }, (_, i) => key(i + 1)),
      4,
    );
    const two = await findIndexed<{ i: number }>(store, STREAM, {
      key: key(10),
      index,
      select: (entries) => [entries[0]!.seq, entries[1]!.seq],
    });
    expect(two?.restored.map((r) => [r.seq, r.state.i])).toEqual([
      [10, 9],
      [11, 10],
    ]);
    expect((await findIndexed(store, STREAM, { key: key(10), index, select: () => [] }))?.restored).toEqual([]);
    expect(await findIndexed(store, STREAM, { key: key(10), index, select: () => undefined })).toBeUndefined();
    await expect(findIndexed(store, STREAM, { key: key(10), index, select: () => [3] })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('rejects a bad key, and an index on an encrypted stream (its keys are in the clear)', async () => {
    const store = new MemoryStore();
    for (const bad of ['', 'x'.repeat(91), 'é', 'a\n', 7]) {
      await expect(findIndexed(store, STREAM, { key: bad as string, index, select: first })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    }
    const encryption = { keys: { k: new Uint8Array(32) }, current: 'k' };
    await expect(SnapshotEngine.open({ store, stream: STREAM, index, encryption })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(await store.list('')).toEqual([]);
  });

  it('gc deletes the objects of deleted chains, deleteStream those of the life it deletes; other readers ignore them', async () => {
    const store = new MemoryStore();
    await write(
      store,
      Array.from({ length: 40 }, (_, i) => key(i + 100)),
      4,
    );
    const idx = async () => (await store.list('')).filter((k) => k.includes('/idx/'));
    expect((await idx()).length).toBe(9); // one per base but the first (seqs 5, 9, ..., 37)
    const root = (await store.list(''))[0]!.split('/')[0]!;
    await store.putIfAbsent(`${root}/idx/not-an-object`, new Uint8Array(0));
    expect((await verifyStream(store, STREAM)).damaged).toEqual([]);
    expect(await listStreams(store)).toEqual([STREAM]);
    const report = await gc(store, STREAM, { keepLast: 10, minAgeMs: 0 });
    // The floor is base 29: the objects of bases 5 to 29 go (their chains are below it).
    expect(report.oldestRetained).toBe(29);
    const left = (await idx()).flatMap((k) => /\.([0-9a-f]{16})$/.exec(k)?.[1] ?? []);
    expect(left.map((b) => parseInt(b, 16))).toEqual([33, 37]);
    // A key whose checkpoint is deleted: its first retained seq that reaches it is the oldest one.
    expect((await findIndexed(store, STREAM, { key: key(110), index, select: first }))?.restored[0]?.seq).toBe(29);
    expect((await findIndexed(store, STREAM, { key: key(131), index, select: first }))?.restored[0]?.seq).toBe(32);
    await deleteStream(store, STREAM);
    expect(await idx()).toEqual([]);
    // A new life of the stream, with keys below the old life's: found in the new life only.
    await write(
      store,
      Array.from({ length: 20 }, (_, i) => key(i + 1)),
      4,
    );
    expect(
      (await findIndexed<{ i: number }>(store, STREAM, { key: key(7), index, select: first }))?.restored[0]?.state.i,
    ).toBe(6);
    expect(await findIndexed(store, STREAM, { key: key(130), index, select: first })).toBeUndefined();
  });

  it('the longest index key (90 characters) names an object the file store can create', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sf-idx-'));
    try {
      const store = new FileStore({ dir, ioThreads: 0 });
      const long = (n: number) => `${'~'.repeat(84)}${n.toString().padStart(6, '0')}`;
      const policy = { baseEvery: 2 };
      const engine = await SnapshotEngine.open({ store, stream: STREAM, policy, index });
      for (let n = 1; n <= 6; n++) await engine.checkpoint({ n }, { meta: { k: long(n) } });
      await engine.close();
      const names = (await store.list('')).filter((k) => k.includes('/idx/'));
      expect(names.length).toBeGreaterThan(0); // (a base at least every other checkpoint)
      expect(Math.max(...names.map((k) => k.slice(k.lastIndexOf('/') + 1).length))).toBe(2 * 90 + 34);
      const found = await findIndexed<{ n: number }>(store, STREAM, { key: long(2), index, select: first });
      expect(found?.restored[0]?.state.n).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
