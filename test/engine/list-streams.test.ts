import { describe, expect, it } from 'vitest';
import { FileStore, MemoryStore, SnapshotEngine, listStreams, type Store } from 'statefold';
import { HookStore } from '../support/hook-store.js';
import { flipByte } from '../support/damage.js';
import { engineStores, tempDir } from '../support/stores.js';

const LONG = `tenant-z/${'x'.repeat(200)}`; // too long for a readable key segment: stored under a hash

/** Opens `stream` and takes `n` checkpoints (a base every 4). */
async function write(store: Store, stream: string, n: number): Promise<void> {
  const engine = await SnapshotEngine.open({ store, stream, policy: { baseEvery: 4 } });
  for (let i = 0; i < n; i++) await engine.checkpoint({ stream, i, pad: 'p'.repeat(300) });
  await engine.close();
}

describe('listStreams', () => {
  for (const { name, create } of engineStores) {
    it(`${name}: lists every stream by its id as given, hashed ids included, and filters by prefix`, async () => {
      const store = await create();
      const ids = ['a', 'b/c', 'Tenant-A/run 1', 'tenant-a/run-2', 'tenant-a/über', LONG, 'tenant-a', 'a0'];
      for (const id of ids) await write(store, id, 3);
      expect((await listStreams(store)).sort()).toEqual([...ids].sort());
      expect((await listStreams(store, { prefix: 'tenant-' })).sort()).toEqual(
        ['tenant-a/run-2', 'tenant-a/über', 'tenant-a', LONG].sort(),
      );
      expect(await listStreams(store, { prefix: 'tenant-a/' })).toEqual(['tenant-a/run-2', 'tenant-a/über']);
      expect(await listStreams(store, { prefix: 'nobody' })).toEqual([]);
    });
  }

  for (const kind of ['memory', 'file'] as const) {
    it(`${kind}: skips the history of each stream: requests grow with streams, not checkpoints`, async () => {
      const inner: Store =
        kind === 'memory' ? new MemoryStore() : new FileStore({ dir: await tempDir(), fsync: false });
      for (const id of ['one', 'two', 'three']) await write(inner, id, 2_500); // 2,500 keys each: 8 pages listed whole
      let lists = 0;
      const store = new HookStore(inner, (op) => void (op === 'list' && lists++));
      expect((await listStreams(store)).sort()).toEqual(['one', 'three', 'two']);
      expect(lists, 'list requests for 3 streams of 2,500 checkpoints').toBeLessThanOrEqual(5);
    }, 60_000);
  }

  it('an empty store has no streams; a bad prefix is INVALID_ARGUMENT', async () => {
    expect(await listStreams(new MemoryStore())).toEqual([]);
    await expect(listStreams(new MemoryStore(), { prefix: 7 as unknown as string })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('a hashed stream whose first object is damaged is still listed (its id read from the next one)', async () => {
    const store = new MemoryStore();
    await write(store, LONG, 3);
    const [first] = await store.list('h.');
    await flipByte(store, first!, undefined, 1);
    expect(await listStreams(store)).toEqual([LONG]);
  });
});
