import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, gc, listCheckpoints, restore, type Store } from 'statefold';
import { verified } from '../support/checkpoints.js';

async function stream(store: Store, n: number, baseEvery: number, name = 'ret'): Promise<Map<number, unknown>> {
  const engine = await SnapshotEngine.open({ store, stream: name, policy: { baseEvery, maxDeltaRatio: Infinity } });
  const states = new Map<number, unknown>();
  const state = { n: 0, items: [] as number[] };
  for (let i = 1; i <= n; i++) {
    state.n = i;
    state.items.push(i);
    await engine.checkpoint(state);
    states.set(i, structuredClone(state));
  }
  await engine.close();
  return states;
}

describe('retention: gc deletes only behind a retained base', () => {
  it('keeps the last N checkpoints and the base they need; every kept seq restores', async () => {
    const store = new MemoryStore();
    const states = await stream(store, 20, 4);
    // Bases at 1, 5, 9, 13, 17. The last 6 are 15..20; 15 needs base 13.
    const report = await gc(store, 'ret', { keepLast: 6, minAgeMs: 0 });
    expect(report.oldestRetained).toBe(13);
    expect(report.deleted).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    const list = await listCheckpoints(store, 'ret');
    expect(list.map((c) => c.seq)).toEqual([13, 14, 15, 16, 17, 18, 19, 20]);
    for (const c of list) expect((await restore(store, 'ret', { seq: c.seq })).state).toEqual(states.get(c.seq));
    await expect(restore(store, 'ret', { seq: 12 })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      seq: 12,
      message: expect.stringContaining('removed by retention'),
    });
    // Running it again deletes nothing more.
    expect((await gc(store, 'ret', { keepLast: 6, minAgeMs: 0 })).deleted).toEqual([]);
  });

  it('keeps checkpoints younger than keepForMs, and by count those older', async () => {
    const store = new MemoryStore();
    await stream(store, 10, 3);
    const list = verified(await listCheckpoints(store, 'ret'));
    const newest = list[list.length - 1]!.createdAt;
    // Everything was captured within the last hour: nothing goes.
    expect(
      (await gc(store, 'ret', { keepLast: 1, keepForMs: 3_600_000, minAgeMs: 0 }, { now: newest + 1000 })).deleted,
    ).toEqual([]);
    // A day later, only keepLast holds: seq 10 is a base (bases at 1, 4, 7, 10), so 1..9 go.
    const report = await gc(
      store,
      'ret',
      { keepLast: 1, keepForMs: 3_600_000, minAgeMs: 0 },
      { now: newest + 86_400_000 },
    );
    expect(report).toMatchObject({ oldestRetained: 10, deleted: [1, 2, 3, 4, 5, 6, 7, 8, 9] });
    expect((await restore(store, 'ret')).seq).toBe(10);
  });

  it('runs in the background after each base when the engine has a retention, while writing', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store,
      stream: 'auto',
      retention: { keepLast: 3, minAgeMs: 0 },
      policy: { baseEvery: 5, maxDeltaRatio: Infinity },
    });
    const state = { n: 0 };
    for (let i = 1; i <= 40; i++) {
      state.n = i;
      await engine.checkpoint(state);
    }
    await engine.close();
    expect(engine.gcError).toBeUndefined();
    const seqs = (await listCheckpoints(store, 'auto')).map((c) => c.seq);
    expect(seqs[seqs.length - 1]).toBe(40);
    // gc runs after each base, so history lags by up to two chains past keepLast.
    expect(seqs.length).toBeLessThanOrEqual(3 + 2 * 5);
    expect(seqs.length).toBeLessThan(40);
    for (const seq of seqs) expect((await restore(store, 'auto', { seq })).state).toEqual({ n: seq });
    // The stream reopens fine after its history was trimmed.
    const again = await SnapshotEngine.open({ store, stream: 'auto' });
    expect(again.state).toEqual({ n: 40 });
    await again.close();
  });

  it('keeps, by default for 30 s, every checkpoint that was the newest, so that readers can finish', async () => {
    const store = new MemoryStore();
    await stream(store, 12, 3);
    // Written just now: with the default grace nothing may go, whatever keepLast says.
    expect((await gc(store, 'ret', { keepLast: 1 })).deleted).toEqual([]);
    const list = verified(await listCheckpoints(store, 'ret'));
    // 30 s after the last one: only what keepLast holds (seq 12, whose base is 10).
    const later = list[list.length - 1]!.createdAt + 30_001;
    expect(await gc(store, 'ret', { keepLast: 1 }, { now: later })).toMatchObject({ oldestRetained: 10 });
  });

  it('rejects a malformed retention with INVALID_ARGUMENT', async () => {
    const store = new MemoryStore();
    await expect(gc(store, 'x', { keepLast: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(gc(store, 'x', {})).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(SnapshotEngine.open({ store, stream: 'x', retention: { keepForMs: -1 } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });
});

describe('restore with skipDamaged: the newest intact checkpoint before the damage', () => {
  it('restores the checkpoint before a damaged delta and reports what it skipped', async () => {
    const store = new MemoryStore();
    const states = await stream(store, 10, 4);
    const list = verified(await listCheckpoints(store, 'ret'));
    const key7 = (await store.list('')).find((k) => k.endsWith('0000000000000007'))!;
    const bad = Buffer.from((await store.get(key7))!);
    bad[bad.length - 10]! ^= 0xff;
    await store.delete(key7);
    await store.putIfAbsent(key7, bad);
    // Bases at 1, 5, 9: seq 8's chain holds the damaged 7, seq 10's does not.
    expect(list.filter((c) => c.kind === 'base').map((c) => c.seq)).toEqual([1, 5, 9]);
    await expect(restore(store, 'ret', { seq: 8 })).rejects.toMatchObject({ code: 'CORRUPT', seq: 7 });
    const r = await restore(store, 'ret', { seq: 8, skipDamaged: true });
    expect(r.seq).toBe(6);
    expect(r.state).toEqual(states.get(6));
    expect(r.skipped).toEqual([7, 8]);
    expect(r.damage.map((d) => d.seq)).toEqual([7]);
    const latest = await restore(store, 'ret', { skipDamaged: true });
    expect(latest).toMatchObject({ seq: 10, skipped: [], damage: [] });
  });

  it('passes over a damaged base to the chain before it, and a damaged newest object', async () => {
    const store = new MemoryStore();
    const states = await stream(store, 10, 4);
    for (const suffix of ['0000000000000005', '000000000000000a']) {
      const key = (await store.list('')).find((k) => k.endsWith(suffix))!;
      await store.delete(key);
      await store.putIfAbsent(key, Buffer.from('garbage'));
    }
    // The newest object is unreadable: seq 9 (a base) is the newest intact.
    const newest = await restore(store, 'ret', { skipDamaged: true });
    expect(newest).toMatchObject({ seq: 9, skipped: [10] });
    expect(newest.damage.map((d) => d.seq)).toEqual([10]);
    // Seq 8 needs base 5, which is damaged: the chain before it ends at 4.
    const r = await restore(store, 'ret', { seq: 8, skipDamaged: true });
    expect(r.seq).toBe(4);
    expect(r.state).toEqual(states.get(4));
    expect(r.skipped).toEqual([5, 6, 7, 8]);
    expect(r.damage.map((d) => d.seq)).toEqual([10, 5]);
  });
});
