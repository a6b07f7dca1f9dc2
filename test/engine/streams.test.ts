import { describe, expect, it } from 'vitest';
import { FileStore, MemoryStore, SnapshotEngine, StatefoldError, listCheckpoints, restore } from 'statefold';
import { tempDir } from '../support/stores.js';

const tricky = [
  '../x',
  'a/b',
  'a%2Fb',
  'a~2fb',
  'A',
  'a',
  '.',
  '..',
  'h.deadbeef',
  's.a',
  'ünïcødé',
  '日本語',
  '🙂',
  ' ',
  'a b',
  'x'.repeat(512),
  'é'.repeat(256),
  'CON',
  'nul',
];

describe('streams: ids', () => {
  it('keeps every tricky id in its own key space: distinct, contained, restorable', async () => {
    for (const store of [new MemoryStore(), new FileStore({ dir: await tempDir() })]) {
      for (const [i, stream] of tricky.entries()) {
        const engine = await SnapshotEngine.open({ store, stream });
        await engine.checkpoint({ i, stream });
        await engine.close();
      }
      for (const [i, stream] of tricky.entries()) {
        expect((await restore(store, stream)).state).toEqual({ i, stream });
        expect(await listCheckpoints(store, stream)).toHaveLength(1);
      }
      // Every key of every stream is under its own top-level segment, and no two streams share one.
      const keys = await store.list('');
      const roots = new Set(keys.map((k) => k.split('/')[0]));
      expect(roots.size).toBe(tricky.length);
      for (const key of keys)
        expect(key).toMatch(/^[a-z0-9._~-]+\/(log\/[0-9a-f]{16}(\.[0-9a-f]{16})?|hint\/[0-9a-f]{16})$/);
    }
  });

  it('rejects an empty, non-string, oversized or ill-formed id with INVALID_ARGUMENT', async () => {
    const store = new MemoryStore();
    for (const stream of ['', 'x'.repeat(513), 'é'.repeat(257), '\ud800', 42, null, undefined]) {
      const err = await SnapshotEngine.open({ store, stream: stream as string }).catch((e: unknown) => e);
      expect(err, String(stream).slice(0, 20)).toBeInstanceOf(StatefoldError);
      expect((err as StatefoldError).code).toBe('INVALID_ARGUMENT');
      await expect(restore(store, stream as string)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    expect(await store.list('')).toEqual([]);
  });

  it('restores NOT_FOUND for a stream with no checkpoint, even one that was opened', async () => {
    const store = new MemoryStore();
    await expect(restore(store, 'ghost')).rejects.toMatchObject({
      code: 'NOT_FOUND',
      stream: 'ghost',
      message: expect.stringContaining('"ghost"'),
    });
    const engine = await SnapshotEngine.open({ store, stream: 'opened-only' });
    await expect(restore(store, 'opened-only')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await listCheckpoints(store, 'opened-only')).toEqual([]);
    await engine.close();
  });
});
