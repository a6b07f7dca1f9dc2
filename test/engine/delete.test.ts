import { writeFile } from 'node:fs/promises';
import { readdir } from 'node:fs/promises';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FileStore,
  MemoryStore,
  SnapshotEngine,
  deleteStream,
  gc,
  listCheckpoints,
  listStreams,
  restore,
  type Store,
} from 'statefold';
import { HookStore } from '../support/hook-store.js';
import { flipByte } from '../support/damage.js';
import { engineStores } from '../support/stores.js';

/** A stream with history, fences from several opens, hints and a retention floor. */
async function busyStream(store: Store, stream: string): Promise<void> {
  for (let open = 0; open < 3; open++) {
    const engine = await SnapshotEngine.open({ store, stream, policy: { baseEvery: 4, maxDeltaRatio: Infinity } });
    for (let i = 0; i < 10; i++) await engine.checkpoint({ stream, open, i, pad: 'z'.repeat(300) });
    await engine.close();
  }
  await gc(store, stream, { keepLast: 5, minAgeMs: 0 });
}

/** The keys of `stream` once deleted: its tombstone alone, a floor and two fences below it. */
async function expectTombstone(store: Store, segment: string): Promise<void> {
  const left = await store.list(`${segment}/`);
  expect(left, 'a floor and two fences').toHaveLength(3);
  expect(left.filter((k) => k.startsWith(`${segment}/gc/`))).toHaveLength(1);
  expect(left.filter((k) => k.startsWith(`${segment}/log/`))).toHaveLength(2);
}

describe('deleteStream', () => {
  for (const { name, create } of engineStores) {
    it(`${name}: removes every object of the stream, fences and floors included, leaves a tombstone, and nothing of others`, async () => {
      const store = await create();
      await busyStream(store, 'doomed');
      await busyStream(store, 'kept');
      const keptKeys = (await store.list('')).filter((k) => !k.startsWith('s.doomed/')).sort();
      expect((await store.list('s.doomed/')).some((k) => k.includes('/gc/'))).toBe(true);
      const before = (await store.list('s.doomed/')).length;
      const report = await deleteStream(store, 'doomed');
      expect(report.deletedKeys, 'every key it had, and the first floor it wrote').toBe(before + 1);
      await expectTombstone(store, 's.doomed');
      expect((await store.list('')).filter((k) => !k.startsWith('s.doomed/')).sort()).toEqual(keptKeys);
      expect(await listStreams(store)).toEqual(['kept']);
      await expect(restore(store, 'doomed')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      expect(await listCheckpoints(store, 'doomed')).toEqual([]);
      expect((await restore(store, 'kept')).seq).toBe(30);
      // Deleting it again, or a stream that never was, does nothing.
      expect(await deleteStream(store, 'doomed')).toEqual({ deletedKeys: 0 });
      expect(await deleteStream(store, 'nobody')).toEqual({ deletedKeys: 0 });
      // The id can be used again: a new stream, from the seq after the tombstone.
      const again = await SnapshotEngine.open({ store, stream: 'doomed' });
      const first = await again.checkpoint({ fresh: true });
      expect(first.seq).toBeGreaterThan(30);
      await again.close();
      expect(await listStreams(store)).toEqual(['doomed', 'kept']);
      expect((await listCheckpoints(store, 'doomed')).map((c) => c.seq)).toEqual([first.seq]);
    });
  }

  it('file: temp files of crashed writes and the emptied directories go too', async () => {
    const store = (await engineStores[1]!.create()) as FileStore;
    await busyStream(store, 'doomed');
    await writeFile(path.join(store.dir, 's.doomed', 'log', '0000000000000099#abcdef.tmp'), 'half a frame');
    await deleteStream(store, 'doomed');
    const files: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const e of await readdir(dir, { withFileTypes: true }))
        if (e.isDirectory()) await walk(path.join(dir, e.name));
        else files.push(path.relative(store.dir, path.join(dir, e.name)));
    };
    await walk(path.join(store.dir, 's.doomed'));
    expect(files, 'the tombstone, no temp file').toHaveLength(3);
    expect(files.some((f) => f.includes('.tmp'))).toBe(false);
  });

  it('fences a live writer first: its next checkpoint during the delete fails FENCED', async () => {
    const inner = new MemoryStore();
    const writer = await SnapshotEngine.open({ store: inner, stream: 'live', policy: { maxDeltaRatio: Infinity } });
    await writer.checkpoint({ n: 0, pad: 'w'.repeat(300) });
    let tried: unknown = 'not tried';
    // When the delete starts deleting, the writer commits: it must find its next key fenced.
    const store = new HookStore(inner, async (op) => {
      if (op === 'delete' && tried === 'not tried') {
        tried = await writer.checkpoint({ n: 1, pad: 'w'.repeat(300) }).then(
          () => 'committed',
          (err: { code?: string }) => err.code,
        );
      }
    });
    await deleteStream(store, 'live');
    expect(tried).toBe('FENCED');
    await expectTombstone(inner, 's.live');
    await writer.close().catch(() => undefined);
  });

  it('an interrupted delete leaves a stream that reads as empty, and a new engine starts above its floor', async () => {
    for (const stopAt of [1, 5, 10]) {
      const inner = new MemoryStore();
      await busyStream(inner, 'cut');
      let deletes = 0;
      const store = new HookStore(inner, (op) => {
        if (op === 'delete' && ++deletes === stopAt) throw new Error('power cut');
      });
      await expect(deleteStream(store, 'cut'), `stopped at delete ${stopAt}`).rejects.toThrow();
      await expect(restore(inner, 'cut')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      const engine = await SnapshotEngine.open({ store: inner, stream: 'cut' });
      const info = await engine.checkpoint({ again: stopAt });
      await engine.close();
      const back = await restore(inner, 'cut');
      expect(back.state, `stopped at delete ${stopAt}`).toEqual({ again: stopAt });
      expect(back.seq).toBe(info.seq);
      await deleteStream(inner, 'cut');
      await expectTombstone(inner, 's.cut');
    }
  });

  it('deletes a stream whose newest object is damaged', async () => {
    const store = new MemoryStore();
    await busyStream(store, 'broken');
    const keys = await store.list('s.broken/log/');
    const newest = keys[keys.length - 1]!;
    await flipByte(store, newest, undefined, 1);
    await expect(restore(store, 'broken')).rejects.toMatchObject({ code: 'CORRUPT' });
    await deleteStream(store, 'broken');
    await expectTombstone(store, 's.broken');
  });
});
