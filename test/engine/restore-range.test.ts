import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  gc,
  isStatefoldError,
  listCheckpoints,
  restore,
  restoreRange,
  type Restored,
} from 'statefold';
import { flipByte } from '../support/damage.js';
import { HookStore } from '../support/hook-store.js';

/** Each seq as `restore({ seq })` gives it, for every retained committed seq from `from` to `to`. */
async function oneByOne(store: MemoryStore, from: number, to: number): Promise<Restored[]> {
  const out: Restored[] = [];
  for (const { seq } of await listCheckpoints(store, 'r', { ...(from > 1 && { after: from - 1 }), before: to + 1 }))
    out.push(await restore(store, 'r', { seq }));
  return out;
}

describe('restoreRange', () => {
  it('gives what restore({ seq }) gives for each committed seq of a range: bases, spans, fences, retention', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          n: fc.integer({ min: 1, max: 70 }),
          baseEvery: fc.integer({ min: 1, max: 12 }),
          spanEvery: fc.constantFrom(1, 1, 3),
          reopenEvery: fc.integer({ min: 0, max: 9 }),
          keepLast: fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }),
          from: fc.integer({ min: 1, max: 80 }),
          length: fc.integer({ min: 1, max: 64 }),
        }),
        async ({ n, baseEvery, spanEvery, reopenEvery, keepLast, from, length }) => {
          const store = new MemoryStore();
          const policy = { baseEvery, spanEvery, maxDeltaRatio: Infinity };
          let engine = await SnapshotEngine.open({ store, stream: 'r', policy });
          for (let i = 1; i <= n; i++) {
            await engine.checkpoint(
              { n: i, list: Array.from({ length: i % 7 }, (_, k) => `item ${k} of ${i}`), at: new Date(i) },
              { meta: { i } },
            );
            if (reopenEvery > 0 && i % reopenEvery === 0) {
              await engine.close();
              engine = await SnapshotEngine.open({ store, stream: 'r', policy });
            }
          }
          await engine.close();
          if (keepLast !== undefined) await gc(store, 'r', { keepLast, minAgeMs: 0 });
          const to = from + length - 1;
          const got = await restoreRange(store, 'r', { from, to });
          expect(got).toEqual(await oneByOne(store, from, to));
        },
      ),
      { numRuns: 120 },
    );
  });

  it('reads a chain once for the seqs it holds, and hands out states that are each its own', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store,
      stream: 'r',
      policy: { baseEvery: 16, maxDeltaRatio: Infinity },
    });
    for (let i = 1; i <= 40; i++)
      await engine.checkpoint({ n: i, items: Array.from({ length: i }, (_, k) => ({ k })) });
    await engine.close();
    const gets: string[] = [];
    const counted = new HookStore(store, (op, key) => void (op === 'get' && gets.push(key)));
    // Seqs 20 to 40: two chains (bases 17 and 33), each frame read once.
    const got = await restoreRange(counted, 'r', { from: 20, to: 40 });
    expect(got.map((r) => r.seq)).toEqual(Array.from({ length: 21 }, (_, i) => 20 + i));
    expect(new Set(gets).size).toBe(gets.length);
    expect(gets).toHaveLength(40 - 17 + 1);
    for (const [i, r] of got.entries()) expect(r).toEqual(await restore(store, 'r', { seq: 20 + i }));
    const states = got.map((r) => r.state as { n: number; items: { k: number }[] });
    states[0]!.items[0]!.k = -1;
    states[0]!.items.push({ k: 99 });
    expect(states[1]!.items[0]).toEqual({ k: 0 });
    expect(states[1]!.items).toHaveLength(21);
  });

  it('gives an empty list past the newest checkpoint or below what retention kept, and rejects bad ranges', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'r' });
    for (let i = 1; i <= 10; i++) await engine.checkpoint({ n: i });
    await engine.close();
    await gc(store, 'r', { keepLast: 4, minAgeMs: 0 });
    expect(await restoreRange(store, 'r', { from: 20, to: 30 })).toEqual([]);
    expect(await restoreRange(store, 'r', { from: 1, to: 5 })).toEqual([]);
    expect((await restoreRange(store, 'r', { from: 5, to: 12 })).map((r) => r.seq)).toEqual([7, 8, 9, 10]);
    expect(await restoreRange(store, 'unknown', { from: 1, to: 3 })).toEqual([]);
    expect(await restoreRange(store, 'r', { from: 1, to: 64 })).toHaveLength(4); // (64 seqs: the most)
    for (const [options, message] of [
      [{ from: 5, to: 4 }, 'to 4 is below from 5'],
      [{ from: 1, to: 65 }, '65 seqs from 1 to 65: at most 64'],
      [{ from: 0, to: 3 }, 'from 0 is not a positive integer'],
      [{ from: 1 }, 'to undefined is not a positive integer'],
    ] as const) {
      await expect(restoreRange(store, 'r', options as { from: number; to: number })).rejects.toSatisfy(
        (e) => isStatefoldError(e, 'INVALID_ARGUMENT') && (e as Error).message.includes(message),
      );
    }
  });

  it('rejects CORRUPT when a frame a seq of the range needs is damaged, as restore does', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'r', policy: { baseEvery: 8, maxDeltaRatio: Infinity } });
    for (let i = 1; i <= 20; i++) await engine.checkpoint({ n: i, text: `state ${i}` });
    await engine.close();
    const keys = await store.list('');
    await flipByte(
      store,
      keys.find((k) => k.endsWith('/log/0000000000000009'))!,
    );
    for (const [from, to] of [
      [9, 12],
      [12, 16],
      [5, 10],
    ]) {
      await expect(restoreRange(store, 'r', { from: from!, to: to! })).rejects.toSatisfy((e) =>
        isStatefoldError(e, 'CORRUPT'),
      );
    }
    // A range whose chains do not reach the damaged frame reads as before.
    expect((await restoreRange(store, 'r', { from: 17, to: 20 })).map((r) => r.seq)).toEqual([17, 18, 19, 20]);
  });
});
