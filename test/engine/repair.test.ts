import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, restore, verifyStream, type Store } from 'statefold';
import { flipByte } from '../support/damage.js';

/** 10 checkpoints, bases at 1, 5 and 9; an effect recorded at step 3. Returns the states and keys by seq. */
async function write(store: Store): Promise<{ states: Map<number, unknown>; keys: Map<number, string> }> {
  const engine = await SnapshotEngine.open({ store, stream: 's', policy: { baseEvery: 4, maxDeltaRatio: Infinity } });
  const states = new Map<number, unknown>();
  const keys = new Map<number, string>();
  const state = { n: 0, pad: 'r'.repeat(300) };
  for (let i = 1; engine.seq < 10; i++) {
    state.n = i;
    if (i === 3) await engine.effect('email:1', async () => 'sent');
    if (engine.seq >= 10) break;
    const info = await engine.checkpoint(state, { meta: { n: i } });
    states.set(info.seq, structuredClone(state));
    keys.set(info.seq, info.key);
  }
  await engine.close();
  return { states, keys };
}

describe('SnapshotEngine.open({ repair: true })', () => {
  it('a damaged delta in the newest chain: open rejects CORRUPT and says how to repair; repair starts a base after the newest intact', async () => {
    const store = new MemoryStore();
    const { states, keys } = await write(store);
    await flipByte(store, keys.get(10)!);
    await expect(SnapshotEngine.open({ store, stream: 's' })).rejects.toMatchObject({
      code: 'CORRUPT',
      seq: 10,
      message: expect.stringMatching(/repair: true/),
    });
    const engine = await SnapshotEngine.open<{ n: number; pad: string }>({ store, stream: 's', repair: true });
    expect(engine.repaired?.restoredSeq).toBe(9);
    expect(engine.repaired?.skipped).toEqual([10]);
    expect(engine.repaired?.damage[0]).toMatchObject({ code: 'CORRUPT', seq: 10 });
    expect(engine.seq, 'the head stays at the newest committed seq').toBe(10);
    expect(engine.state).toEqual(states.get(9));
    expect(engine.meta).toEqual({ n: (states.get(9) as { n: number }).n });
    const next = await engine.checkpoint({ ...engine.state!, n: 100 });
    expect(next).toMatchObject({ seq: 11, kind: 'base' });
    await engine.close();
    expect((await restore(store, 's')).state).toMatchObject({ n: 100 });
    const report = await verifyStream(store, 's');
    expect(report.damaged.map((d) => d.seq)).toEqual([10]);
    expect(report.newestIntact).toBe(11);
  });

  it('a damaged base of the newest chain: repair goes back to the chain before it, effects as of that seq', async () => {
    const store = new MemoryStore();
    const { states, keys } = await write(store);
    await flipByte(store, keys.get(9)!);
    const engine = await SnapshotEngine.open({ store, stream: 's', repair: true });
    expect(engine.repaired).toMatchObject({ restoredSeq: 8, skipped: [9, 10] });
    expect(engine.state).toEqual(states.get(8));
    expect(engine.effects.map((e) => `${e.token}:${e.status}`)).toEqual(['email:1:done']);
    // The effect is not run again from the repaired engine.
    expect(await engine.effect('email:1', async () => 'again')).toBe('sent');
    await engine.close();
  });

  it('on an intact stream, repair changes nothing', async () => {
    const store = new MemoryStore();
    await write(store);
    const engine = await SnapshotEngine.open({
      store,
      stream: 's',
      repair: true,
      policy: { baseEvery: 4, maxDeltaRatio: Infinity },
    });
    expect(engine.repaired).toBeUndefined();
    expect(engine.seq).toBe(10);
    expect((await engine.checkpoint({ n: 11, pad: 'r'.repeat(300) })).kind).toBe('delta');
    await engine.close();
  });

  it('repairs again after a repairing engine closed without committing (its fence stands above the damage)', async () => {
    const store = new MemoryStore();
    const { states, keys } = await write(store);
    await flipByte(store, keys.get(10)!);
    const idle = await SnapshotEngine.open({ store, stream: 's', repair: true });
    await idle.close(); // its fence is in slot 11 now
    const engine = await SnapshotEngine.open<{ n: number; pad: string }>({ store, stream: 's', repair: true });
    expect(engine.repaired).toMatchObject({ restoredSeq: 9, skipped: [10] });
    expect(await engine.checkpoint({ ...engine.state!, n: 7 })).toMatchObject({ seq: 11, kind: 'base' });
    await engine.close();
    expect((await restore(store, 's')).state).toEqual({ ...(states.get(9) as object), n: 7 });
  });
});
