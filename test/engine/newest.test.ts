import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, isStatefoldError, listCheckpoints, newestCheckpoint, restore } from 'statefold';
import { flipByte } from '../support/damage.js';
import { roundStore } from '../support/round-store.js';

// newestCheckpoint: the newest entry, as listCheckpoints gives it, and a restore of it from what
// that read brought: on a store that scans, no round more.

async function stream(store: MemoryStore | ReturnType<typeof roundStore>['store'], n: number, baseEvery = 4) {
  const engine = await SnapshotEngine.open({ store, stream: 's', policy: { baseEvery } });
  const state = { step: 0, log: [] as string[] };
  for (let i = 1; i <= n; i++) {
    state.step = i;
    state.log.push(`step ${i} `.repeat(10));
    await engine.checkpoint(state, { meta: { step: i } });
  }
  await engine.close();
  return state;
}

describe('newestCheckpoint', () => {
  it('gives the entry listCheckpoints gives and the state restore gives, wherever the newest base lies', async () => {
    for (const n of [1, 4, 5, 6, 7, 8]) {
      const store = new MemoryStore();
      const state = await stream(store, n);
      const found = await newestCheckpoint(store, 's');
      expect(found?.entry).toEqual((await listCheckpoints(store, 's', { reverse: true, limit: 1 }))[0]);
      expect(await found!.restore()).toEqual(await restore(store, 's', { seq: n }));
      expect((await found!.restore()).state).toEqual(state);
    }
    expect(await newestCheckpoint(new MemoryStore(), 'none')).toBeUndefined();
  });

  it('restores the newest in no round more than its entry took on a store that scans, at most one more without', async () => {
    for (const scans of [true, false])
      for (const n of [8, 9, 10, 11]) {
        const counted = roundStore(new MemoryStore(), scans);
        await stream(counted.store, n);
        counted.reset();
        const found = (await newestCheckpoint(counted.store, 's'))!;
        const entryRounds = counted.rounds;
        expect((await found.restore()).seq).toBe(n);
        // The hint, then the log from it (with its frames on a store that scans; without, a round of gets).
        expect(entryRounds, `scan: ${scans}, ${n}`).toBe(scans ? 2 : 3);
        // On a store that scans, the chain's bytes came with the listing; without, at most one round of gets.
        expect(counted.rounds - entryRounds, `scan: ${scans}, ${n}`).toBeLessThanOrEqual(scans ? 0 : 1);
      }
  });

  it('rejects CORRUPT for a damaged newest checkpoint, and a restore of a chain damaged below it CORRUPT', async () => {
    const store = new MemoryStore();
    await stream(store, 6);
    const keys = (await store.list('')).filter((k) => k.includes('/log/')).sort();
    await flipByte(store, keys[keys.length - 2]!); // seq 5, a delta of the chain of seq 6
    const found = (await newestCheckpoint(store, 's'))!;
    expect(found.entry.seq).toBe(6);
    const err = await found.restore().catch((e: unknown) => e);
    expect(isStatefoldError(err, 'CORRUPT')).toBe(true);
    await flipByte(store, keys[keys.length - 1]!);
    const top = await newestCheckpoint(store, 's').catch((e: unknown) => e);
    expect(top).toMatchObject({ code: 'CORRUPT', seq: 6 });
  });
});
