import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  gc,
  listCheckpoints,
  restore,
  type ListOptions,
  type ListedCheckpoint,
  type Store,
} from 'statefold';
import { HookStore, type StoreOp } from '../support/hook-store.js';

/** Counts the keys every list call returned, so a test can tell how much history a call listed. */
class ListCounter extends HookStore {
  listed = 0;
  protected override after(op: StoreOp, _key: string, result: unknown): void {
    if (op === 'list') this.listed += (result as string[]).length;
  }
}

/** A store written before `limit` existed: it lists every key whatever the limit. */
class NoLimitStore extends HookStore {
  override list(prefix: string, options?: ListOptions): Promise<string[]> {
    const { limit: _ignored, ...rest } = options ?? {};
    return super.list(prefix, rest);
  }
}

/** Keeps what a listing entry says apart from its error object (compared by message). */
const plain = (list: ListedCheckpoint[]): unknown[] =>
  list.map((c) => (c.damaged ? { seq: c.seq, damaged: true, error: c.error.message } : c));

/**
 * A stream of `n` checkpoints of `{ n }` with bases every 8, reopened every `reopenEvery` (a fence
 * each time), retention applied at the end with `keepLast` when given.
 */
async function stream(n: number, reopenEvery = 0, keepLast?: number): Promise<MemoryStore> {
  const store = new MemoryStore();
  const policy = { baseEvery: 8, maxDeltaRatio: Infinity };
  let engine = await SnapshotEngine.open({ store, stream: 'r', policy });
  for (let i = 1; i <= n; i++) {
    await engine.checkpoint({ n: i, text: `state ${i}` });
    if (reopenEvery > 0 && i % reopenEvery === 0) {
      await engine.close();
      engine = await SnapshotEngine.open({ store, stream: 'r', policy });
    }
  }
  await engine.close();
  if (keepLast !== undefined) await gc(store, 'r', { keepLast, minAgeMs: 0 });
  return store;
}

describe('ranged reads: restore({ seq }) and listCheckpoints cost their range, not the history', () => {
  it('restores an old seq of a 2,000-checkpoint stream listing a few dozen keys, not 2,000', async () => {
    const store = await stream(2000);
    const counter = new ListCounter(store);
    for (const seq of [1, 8, 9, 777, 1000, 1999, 2000]) {
      counter.listed = 0;
      const got = await restore(counter, 'r', { seq });
      expect(got.seq).toBe(seq);
      expect(got.state).toEqual({ n: seq, text: `state ${seq}` });
      // The range from the base (at most 7 deltas back with baseEvery 8), plus a page's slack.
      expect(counter.listed).toBeLessThanOrEqual(2 * 8 + 20);
    }
  });

  it('restores a seq whose base is among the slots below it listed in one listing, a farther base in two', async () => {
    for (const [baseEvery, listings] of [
      [8, 1],
      [64, 2],
    ] as const) {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open({ store, stream: 'r', policy: { baseEvery, maxDeltaRatio: Infinity } });
      for (let i = 1; i <= 200; i++) await engine.checkpoint({ n: i, text: `state ${i}` });
      await engine.close();
      // Seq 190: 5 deltas after its base with bases every 8; 61 with bases every 64 (past the slots listed first).
      const logListings: string[] = [];
      const counted = new HookStore(
        store,
        (op, key) => void (op === 'list' && key.endsWith('/log/') && logListings.push(key)),
      );
      expect((await restore(counted, 'r', { seq: 190 })).state).toEqual({ n: 190, text: 'state 190' });
      expect(logListings, `bases every ${baseEvery}`).toHaveLength(listings);
    }
  });

  it('lists the newest page, an old page and a page before a seq reading only their range', async () => {
    const store = await stream(2000);
    const counter = new ListCounter(store);
    const cases: [Parameters<typeof listCheckpoints>[2], number[]][] = [
      [{ limit: 10, reverse: true }, [2000, 1999, 1998, 1997, 1996, 1995, 1994, 1993, 1992, 1991]],
      [{ after: 1000, limit: 3 }, [1001, 1002, 1003]],
      [{ before: 500, limit: 3, reverse: true }, [499, 498, 497]],
      [{ after: 10, before: 14 }, [11, 12, 13]],
    ];
    for (const [options, seqs] of cases) {
      counter.listed = 0;
      const got = await listCheckpoints(counter, 'r', options);
      expect(got.map((c) => c.seq)).toEqual(seqs);
      for (const c of got) expect(c).toMatchObject({ damaged: false, kind: c.seq % 8 === 1 ? 'base' : 'delta' });
      expect(counter.listed).toBeLessThanOrEqual(60);
    }
  });

  it('pages through a slot that holds many fences (keys past one page), and through stores that ignore limit', async () => {
    const store = new MemoryStore();
    // 25 opens that never commit: 25 fences in slot 2, then checkpoint 2 after them.
    const first = await SnapshotEngine.open({ store, stream: 'r' });
    await first.checkpoint({ n: 1 });
    await first.close();
    for (let i = 0; i < 25; i++) await (await SnapshotEngine.open({ store, stream: 'r' })).close();
    const last = await SnapshotEngine.open({ store, stream: 'r' });
    for (let n = 2; n <= 300; n++) await last.checkpoint({ n });
    await last.close();
    // Slot 2's 26 keys take three pages of 10; nothing of the 300 seqs above it is listed.
    const counter = new ListCounter(store);
    expect((await restore(counter, 'r', { seq: 2 })).state).toEqual({ n: 2 });
    expect(counter.listed).toBeLessThanOrEqual(60);
    for (const s of [store, new NoLimitStore(store)]) {
      expect((await restore(s, 'r', { seq: 2 })).state).toEqual({ n: 2 });
      expect((await restore(s, 'r', { seq: 3 })).state).toEqual({ n: 3 });
      expect((await listCheckpoints(s, 'r', { after: 1, limit: 2 })).map((c) => c.seq)).toEqual([2, 3]);
      expect((await listCheckpoints(s, 'r', { before: 3, reverse: true })).map((c) => c.seq)).toEqual([2, 1]);
    }
  });

  it('answers exactly as the whole listing does, for any page, with fences and retention (fast-check)', async () => {
    const shapes = [await stream(90), await stream(90, 7), await stream(90, 11, 30), await stream(5, 2)];
    const whole = await Promise.all(shapes.map((s) => listCheckpoints(s, 'r')));
    await fc.assert(
      fc.asyncProperty(
        fc.nat(shapes.length - 1),
        fc.option(fc.integer({ min: 1, max: 100 }), { nil: undefined }),
        fc.option(fc.integer({ min: 1, max: 100 }), { nil: undefined }),
        fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }),
        fc.boolean(),
        fc.boolean(),
        async (which, after, before, limit, reverse, ignoreLimit) => {
          const store: Store = ignoreLimit ? new NoLimitStore(shapes[which]!) : shapes[which]!;
          const options = { after, before, limit, reverse };
          let expected = whole[which]!.filter(
            (c) => (after === undefined || c.seq > after) && (before === undefined || c.seq < before),
          );
          if (reverse) expected = [...expected].reverse();
          if (limit !== undefined) expected = expected.slice(0, limit);
          expect(plain(await listCheckpoints(store, 'r', options))).toEqual(plain(expected));
        },
      ),
      { numRuns: 300, seed: Number(process.env.STATEFOLD_TEST_SEED ?? 1) },
    );
  });

  it('restores every retained seq as the whole listing would, and refuses the rest as before', async () => {
    const store = await stream(90, 11, 30);
    const listed = await listCheckpoints(store, 'r');
    const oldest = listed[0]!.seq;
    for (const { seq } of listed) expect((await restore(store, 'r', { seq })).state).toMatchObject({ n: seq });
    await expect(restore(store, 'r', { seq: oldest - 1 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(restore(store, 'r', { seq: 91 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});
