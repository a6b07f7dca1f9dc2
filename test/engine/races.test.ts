import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  deleteStream,
  forkStream,
  gc,
  listCheckpoints,
  restore,
  type Store,
} from 'statefold';
import { HookStore, holdOnce, latch, type StoreOp } from '../support/hook-store.js';
import { verified } from '../support/checkpoints.js';

/**
 * Opens, forks and deletes racing a writer whose retention deletes behind it, step by step: each
 * scenario holds one store call at a chosen point while the others run (issue 28, items 1 to 3).
 */

/** Every listed seq restores, seqs are contiguous, and the newest state is `newest`. */
async function expectWhole(store: Store, stream: string, newest: unknown): Promise<number[]> {
  const entries = await listCheckpoints(store, stream);
  const seqs = entries.map((e) => e.seq);
  expect(seqs).toEqual(seqs.map((_, i) => seqs[0]! + i));
  for (const seq of seqs) await restore(store, stream, { seq });
  expect((await restore(store, stream)).state).toEqual(newest);
  return seqs;
}

const RETAIN = { keepLast: 2, minAgeMs: 0 };

describe('races: an open against a writer whose retention deletes behind it', () => {
  it('an open whose fence lands in a slot retention deleted does not fork: it opens after the newest checkpoint and fences the writer', async () => {
    const inner = new MemoryStore();
    const a = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 4 }, retention: RETAIN });
    for (let n = 1; n <= 10; n++) await a.checkpoint({ n });
    // B lists and reads the stream at seq 10; its fence (its first write) is held...
    const b = holdOnce(inner, (op) => op === 'putIfAbsent');
    const opening = SnapshotEngine.open<{ n: number | string }>({ store: b.store, stream: 's' });
    await b.reached;
    // ...while A commits 20 more and its retention deletes the slot B is about to fence.
    for (let n = 11; n <= 30; n++) await a.checkpoint({ n });
    await a.gc();
    expect((await listCheckpoints(inner, 's'))[0]!.seq).toBeGreaterThan(11);
    b.release();
    const engine = await opening;
    expect(engine.seq).toBe(30);
    expect(engine.state).toEqual({ n: 30 });
    for (let k = 1; k <= 5; k++) expect((await engine.checkpoint({ n: `b${k}` })).seq).toBe(30 + k);
    expect(engine.fenced).toBe(false);
    await expect(a.checkpoint({ n: 31 })).rejects.toMatchObject({ code: 'FENCED' });
    for (let k = 1; k <= 5; k++) expect((await restore(inner, 's', { seq: 30 + k })).state).toEqual({ n: `b${k}` });
    await engine.close();
    await expectWhole(inner, 's', { n: 'b5' });
  });

  it('the same with the default grace: a fence stalled past minAgeMs while gc deletes its slot', async () => {
    const inner = new MemoryStore();
    const a = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 4 } });
    for (let n = 1; n <= 10; n++) await a.checkpoint({ n });
    const b = holdOnce(inner, (op) => op === 'putIfAbsent');
    const opening = SnapshotEngine.open<{ n: number | string }>({ store: b.store, stream: 's' });
    await b.reached;
    for (let n = 11; n <= 30; n++) await a.checkpoint({ n });
    // A gc run 31.5 s later, with the default 30 s grace for readers.
    await gc(inner, 's', { keepLast: 2 }, { now: Date.now() + 31_500 });
    b.release();
    const engine = await opening;
    expect(engine.seq).toBe(30);
    expect((await engine.checkpoint({ n: 'b' })).seq).toBe(31);
    await expect(a.checkpoint({ n: 31 })).rejects.toMatchObject({ code: 'FENCED' });
    await engine.close();
    await expectWhole(inner, 's', { n: 'b' });
  });

  it('a jump-ahead fence that lands in a slot retention deleted does not fork either', async () => {
    const inner = new MemoryStore();
    const a = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 4 }, retention: RETAIN });
    for (let n = 1; n <= 10; n++) await a.checkpoint({ n });
    // B's first fence (slot 11) waits until A took slot 11, so B jumps ahead: that jump is held
    // while A commits past it and deletes behind.
    let puts = 0;
    const first = latch();
    const firstGo = latch();
    const second = latch();
    const secondGo = latch();
    const store = new HookStore(inner, async (op) => {
      if (op !== 'putIfAbsent') return;
      const n = ++puts;
      if (n === 1) {
        first.open();
        await firstGo.p;
      } else if (n === 2) {
        second.open();
        await secondGo.p;
      }
    });
    const opening = SnapshotEngine.open<{ n: number | string }>({ store, stream: 's' });
    await first.p;
    await a.checkpoint({ n: 11 });
    firstGo.open();
    await second.p;
    for (let n = 12; n <= 40; n++) await a.checkpoint({ n });
    await a.gc();
    secondGo.open();
    const engine = await opening;
    expect(engine.seq).toBe(40);
    expect(engine.state).toEqual({ n: 40 });
    await expect(a.checkpoint({ n: 41 })).rejects.toMatchObject({ code: 'FENCED' });
    expect((await engine.checkpoint({ n: 'b' })).seq).toBe(41);
    await engine.close();
    await expectWhole(inner, 's', { n: 'b' });
  });

  it('an open whose listed chain retention deletes before it is read lists again instead of failing NOT_FOUND', async () => {
    const inner = new MemoryStore();
    const a = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 4 }, retention: RETAIN });
    for (let n = 1; n <= 10; n++) await a.checkpoint({ n });
    const b = holdOnce(inner, (op, key) => op === 'get' && key.includes('/log/'));
    const opening = SnapshotEngine.open<{ n: number | string }>({ store: b.store, stream: 's' });
    await b.reached;
    for (let n = 11; n <= 30; n++) await a.checkpoint({ n });
    await a.gc();
    b.release();
    const engine = await opening;
    expect(engine.seq).toBe(30);
    expect(engine.state).toEqual({ n: 30 });
    await expect(a.checkpoint({ n: 31 })).rejects.toMatchObject({ code: 'FENCED' });
    await engine.close();
  });
});

describe('races: two forks to one target', () => {
  it('one fork resolves, the other rejects INVALID_ARGUMENT and deletes nothing', async () => {
    const inner = new MemoryStore();
    const src = await SnapshotEngine.open({ store: inner, stream: 'src' });
    await src.checkpoint({ n: 1 });
    await src.checkpoint({ n: 2 });
    await src.close();
    // Both forks find the target empty before either writes to it. Then the first fork writes
    // first; any later write of it waits until the second fork has settled.
    let checks = 0;
    const bothChecked = latch();
    const firstWent = latch();
    const secondSettled = latch();
    const onCheck = (op: StoreOp, key: string): void => {
      if (op === 'list' && key === 's.dst/' && ++checks === 2) bothChecked.open();
    };
    let firstPuts = 0;
    const first = new HookStore(inner, async (op, key) => {
      onCheck(op, key);
      if (op !== 'putIfAbsent' || !key.startsWith('s.dst/')) return;
      await bothChecked.p;
      if (++firstPuts === 2) {
        firstWent.open();
        await secondSettled.p;
      }
    });
    const second = new HookStore(inner, async (op, key) => {
      onCheck(op, key);
      if (op === 'putIfAbsent' && key.startsWith('s.dst/')) await firstWent.p;
    });
    const settle = <T>(p: Promise<T>): Promise<PromiseSettledResult<T>> =>
      p.then(
        (value) => ({ status: 'fulfilled' as const, value }),
        (reason: unknown) => ({ status: 'rejected' as const, reason }),
      );
    const one = settle(forkStream(first, 'src', 'dst', { seq: 1 })).finally(() => firstWent.open());
    const two = settle(forkStream(second, 'src', 'dst', { seq: 2 })).finally(() => secondSettled.open());
    const results = [await one, await two];
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect((lost[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'INVALID_ARGUMENT' });
    const info = (won[0] as PromiseFulfilledResult<{ seq: number; from: { seq: number } }>).value;
    expect(info.seq).toBe(1);
    const forked = await restore(inner, 'dst');
    expect(forked.seq).toBe(1);
    expect(forked.state).toEqual({ n: info.from.seq });
  });

  it('random races of two forks and an open: exactly one fork resolves and it restores', async () => {
    for (let round = 0; round < 60; round++) {
      const inner = new MemoryStore();
      const src = await SnapshotEngine.open({ store: inner, stream: 'src' });
      await src.checkpoint({ n: 1 });
      await src.close();
      const jitter = (): Store => new HookStore(inner, () => sleep(Math.random() * 3));
      const results = await Promise.allSettled([
        forkStream(jitter(), 'src', 'dst'),
        forkStream(jitter(), 'src', 'dst'),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won, `round ${round}`).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected') expect(r.reason, `round ${round}`).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((await restore(inner, 'dst')).state).toEqual({ n: 1 });
    }
  });
});

describe('races: an engine opened while deleteStream runs', () => {
  it('an engine opened after the delete fenced the stream starts a new stream, which the delete leaves whole', async () => {
    const inner = new MemoryStore();
    const old = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 4 } });
    for (let n = 1; n <= 6; n++) await old.checkpoint({ n });
    await old.close();
    // The delete has written its fence and its floor; its first delete is held.
    const d = holdOnce(inner, (op) => op === 'delete');
    const deleting = deleteStream(d.store, 's');
    await d.reached;
    const fresh = await SnapshotEngine.open<{ m: number }>({ store: inner, stream: 's' });
    expect(fresh.state).toBeUndefined();
    const first = await fresh.checkpoint({ m: 1 });
    d.release();
    await deleting;
    // What the new engine acknowledged is there, and it goes on writing without damage.
    expect((await restore(inner, 's', { seq: first.seq })).state).toEqual({ m: 1 });
    const second = await fresh.checkpoint({ m: 2 });
    expect(second.seq).toBe(first.seq + 1);
    await fresh.close();
    await expectWhole(inner, 's', { m: 2 });
    // Nothing of the deleted stream is left below it.
    expect((await listCheckpoints(inner, 's'))[0]!.seq).toBe(first.seq);
  });

  it('an engine that had the stream open and commits while the delete runs fails FENCED, and the stream is gone but for its tombstone', async () => {
    const inner = new MemoryStore();
    const w = await SnapshotEngine.open({ store: inner, stream: 's' });
    for (let n = 1; n <= 3; n++) await w.checkpoint({ n });
    const d = holdOnce(inner, (op) => op === 'delete');
    const deleting = deleteStream(d.store, 's');
    await d.reached;
    await expect(w.checkpoint({ n: 4 })).rejects.toMatchObject({ code: 'FENCED' });
    d.release();
    await deleting;
    expect(await inner.list('s.s/'), 'its tombstone alone: a floor and two fences').toHaveLength(3);
    await expect(restore(inner, 's')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // And it stays fenced after the delete: its tombstone holds its next key.
    await expect(w.checkpoint({ n: 5 })).rejects.toMatchObject({ code: 'FENCED' });
  });

  it('a reader whose hint vanishes under a delete finds the stream empty, never CORRUPT', async () => {
    const inner = new MemoryStore();
    const w = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 2 } });
    for (let n = 1; n <= 5; n++) await w.checkpoint({ n });
    await w.close();
    // The reader has listed the hint; the whole delete runs before it lists the log.
    const r = holdOnce(inner, (op, key) => op === 'list' && key.includes('/log/'));
    const reading = restore(r.store, 's').then(
      (x) => `seq ${x.seq}`,
      (err: { code?: string }) => err.code,
    );
    await r.reached;
    await deleteStream(inner, 's');
    r.release();
    expect(await reading).toBe('NOT_FOUND');
  });

  it('gc of a deleted stream changes nothing', async () => {
    const inner = new MemoryStore();
    const w = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 2 } });
    for (let n = 1; n <= 5; n++) await w.checkpoint({ n });
    await w.close();
    await deleteStream(inner, 's');
    const tombstone = await inner.list('s.s/');
    expect(await gc(inner, 's', RETAIN)).toMatchObject({ deleted: [] });
    expect(await inner.list('s.s/')).toEqual(tombstone);
  });
});

describe('races: taking over a writer much faster than the claim', () => {
  /** Commits `{ n }` back to back with 3 in flight until fenced; resolves the acknowledged seqs by n. */
  function busyWriter(engine: SnapshotEngine) {
    const acked = new Map<number, number>();
    let fenced = false;
    const done = (async () => {
      const inFlight = new Set<Promise<unknown>>();
      for (let n = 1; n <= 100_000 && !fenced; n++) {
        const p = engine.checkpoint({ n }).then(
          (info) => void acked.set(info.seq, n),
          (err: { code?: string }) => {
            if (err.code !== 'FENCED') throw err;
            fenced = true;
          },
        );
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p)).catch(() => undefined);
        if (inFlight.size >= 3) await Promise.race(inFlight);
      }
      await Promise.all(inFlight);
      return fenced;
    })();
    return { acked, done };
  }

  it('an open whose every store call takes 30x the writer’s converges, fences it and keeps every acknowledged seq', async () => {
    const inner = new MemoryStore();
    const delay = (ms: number) => () => sleep(ms);
    const writer = await SnapshotEngine.open({ store: new HookStore(inner, delay(1)), stream: 's' });
    const busy = busyWriter(writer);
    while (busy.acked.size < 20) await sleep(5);
    const fresh = await SnapshotEngine.open({ store: new HookStore(inner, delay(30)), stream: 's' });
    expect(await busy.done).toBe(true);
    const mine = await fresh.checkpoint({ n: 'new' });
    await fresh.close();
    const entries = verified(await listCheckpoints(inner, 's'));
    expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
    expect(entries[entries.length - 1]!.seq).toBe(mine.seq);
    for (const [seq, n] of busy.acked) expect((await restore(inner, 's', { seq })).state).toEqual({ n });
    for (const e of entries.filter((x) => x.filler)) expect(busy.acked.has(e.seq)).toBe(false);
  });
});

describe('races: an engine open through a whole deleteStream', () => {
  it('an idle engine that commits after the delete fails FENCED, and a stream started anew is left alone', async () => {
    const inner = new MemoryStore();
    const idle = await SnapshotEngine.open({ store: inner, stream: 's', policy: { baseEvery: 3 } });
    for (let n = 1; n <= 5; n++) await idle.checkpoint({ n });
    await deleteStream(inner, 's');
    const fresh = await SnapshotEngine.open<{ m: number }>({ store: inner, stream: 's' });
    const first = await fresh.checkpoint({ m: 1 });
    expect(first.seq).toBeGreaterThan(5);
    // The engine that was open all along wakes up: its next key is the delete's tombstone fence.
    await expect(idle.checkpoint({ n: 6 })).rejects.toMatchObject({ code: 'FENCED' });
    await fresh.checkpoint({ m: 2 });
    await fresh.close();
    await expectWhole(inner, 's', { m: 2 });
  });

  it('a write held in the store through the whole delete lands below its floor, where no reader sees it', async () => {
    const inner = new MemoryStore();
    let hold = false;
    const reached = latch();
    const gate = latch();
    const store = new HookStore(inner, async (op) => {
      if (hold && op === 'putIfAbsent') {
        hold = false;
        reached.open();
        await gate.p;
      }
    });
    const w = await SnapshotEngine.open({ store, stream: 's', policy: { baseEvery: 3 } });
    for (let n = 1; n <= 4; n++) await w.checkpoint({ n });
    // w's next commit is held in the store while the whole delete runs.
    hold = true;
    const landing = w.checkpoint({ n: 5 }).then(
      (i) => `acked ${i.seq}`,
      (e: { code?: string }) => e.code,
    );
    await reached.p;
    await deleteStream(inner, 's');
    gate.open();
    expect(await landing).toBe('FENCED');
    // The stream reads as deleted, and a new stream starts above the floor.
    await expect(restore(inner, 's')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const fresh = await SnapshotEngine.open<{ m: number }>({ store: inner, stream: 's' });
    expect(fresh.state).toBeUndefined();
    await fresh.checkpoint({ m: 1 });
    await fresh.close();
    await expectWhole(inner, 's', { m: 1 });
    await expect(w.checkpoint({ n: 6 })).rejects.toMatchObject({ code: 'FENCED' });
  });
});
