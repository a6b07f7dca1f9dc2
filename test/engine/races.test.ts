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
import { HookStore, type StoreOp } from '../support/hook-store.js';

/**
 * Opens, forks and deletes racing a writer whose retention deletes behind it, step by step: each
 * scenario holds one store call at a chosen point while the others run (issue 28, items 1 to 3).
 */

function latch(): { p: Promise<void>; open: () => void } {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

/** A store that holds the first call matching `when` until `release`; `reached` opens when it is held. */
function holdOnce(inner: Store, when: (op: StoreOp, key: string) => boolean) {
  const reached = latch();
  const gate = latch();
  let held = false;
  const store = new HookStore(inner, async (op, key) => {
    if (!held && when(op, key)) {
      held = true;
      reached.open();
      await gate.p;
    }
  });
  return { store, reached: reached.p, release: gate.open };
}

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
      const jitter = (): Store =>
        new HookStore(inner, () => new Promise<void>((r) => setTimeout(r, Math.random() * 3)));
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
