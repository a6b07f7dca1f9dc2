import { uuid6 } from '@langchain/langgraph-checkpoint';
import { describe, expect, it } from 'vitest';
import { MemoryStore, migrateStreams, restore } from 'statefold';
import { StatefoldSaver, saverMigrations, type SaverSchema } from 'statefold/langgraph';
import { cfg, checkpointOf } from '../support/langgraph-saver.js';

// StatefoldSaver's schema (issue 34): a thread written by a graph whose state held `plan` as a
// string reads, in version 2, with `plan` a list of steps, pending writes included; ids, parents,
// metadata and the order of checkpoints are untouched; a newer thread fails closed.

const v2: SaverSchema = {
  version: 2,
  migrate: {
    1: (s) => ({
      channel_values: Object.fromEntries(
        Object.entries(s.channel_values).map(([k, v]) => [k, k === 'plan' && typeof v === 'string' ? v.split(';') : v]),
      ),
      pendingWrites: s.pendingWrites.map(([task, channel, value]) => [
        task,
        channel,
        channel === 'plan' && typeof value === 'string' ? value.split(';') : value,
      ]),
    }),
  },
};

/** Puts checkpoints of ids 0..n-1 on thread 't', channel values { plan, n }; a pending write to the last. */
async function writeV1(store: MemoryStore, n: number): Promise<string[]> {
  const saver = new StatefoldSaver({ store, policy: { baseEvery: 3 } });
  const ids = Array.from({ length: n }, (_, i) => uuid6(i));
  let config = cfg('t') as Record<string, any>;
  for (const [step, id] of ids.entries()) {
    const cp = checkpointOf(id, step, [`m${step}`]);
    cp.channel_values = { plan: `search;book ${step}`, n: step };
    cp.channel_versions = { plan: step + 1, n: step + 1 };
    config = await saver.put(config, cp, { source: 'loop', step, parents: {} }, { plan: step + 1, n: step + 1 });
  }
  await saver.putWrites(config, [['plan', 'a;b']], 'task-1');
  await saver.close();
  return ids;
}

describe('StatefoldSaver schema', () => {
  it('reads a version 1 thread upcast to version 2, writes on in version 2, and fails closed for older code', async () => {
    const store = new MemoryStore();
    const ids = await writeV1(store, 8);
    const old = new StatefoldSaver({ store });
    const saver = new StatefoldSaver({ store, schema: v2 });
    for (const [step, id] of ids.entries()) {
      const before = await old.getTuple(cfg('t', id));
      const tuple = await saver.getTuple(cfg('t', id));
      expect(tuple?.checkpoint.channel_values).toEqual({ plan: ['search', `book ${step}`], n: step });
      // Everything but the user state is as it was.
      expect(tuple?.checkpoint.id).toBe(id);
      expect(tuple?.parentConfig).toEqual(before?.parentConfig);
      expect(tuple?.metadata).toEqual(before?.metadata);
      expect(tuple?.checkpoint.channel_versions).toEqual(before?.checkpoint.channel_versions);
    }
    const latest = await saver.getTuple(cfg('t'));
    expect(latest?.pendingWrites).toEqual([['task-1', 'plan', ['a', 'b']]]);
    const listed = [];
    for await (const t of saver.list(cfg('t'))) listed.push(t.checkpoint.id);
    expect(listed).toEqual([...ids].reverse());
    // A write from the version 2 saver: the thread's newest checkpoint is stored in version 2.
    await saver.putWrites(cfg('t', ids.at(-1)!), [['n', 99]], 'task-2');
    await saver.close();
    const stored = await restore(store, 'langgraph/["t",""]', { schema: 'stored' });
    expect(stored.schemaVersion).toBe(2);
    // Code without the schema (version 1) refuses the newer thread instead of misreading it.
    await expect(new StatefoldSaver({ store }).getTuple(cfg('t'))).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
  });

  it('a migration that changes which channels exist, or throws, is MIGRATION_FAILED; nothing is written', async () => {
    const store = new MemoryStore();
    const ids = await writeV1(store, 3);
    const keys = await store.list('');
    const renames: SaverSchema = {
      version: 2,
      migrate: { 1: (s) => ({ ...s, channel_values: { steps: s.channel_values.plan, n: s.channel_values.n } }) },
    };
    const throws: SaverSchema = {
      version: 2,
      migrate: {
        1: () => {
          throw new Error('no');
        },
      },
    };
    const moves: SaverSchema = {
      version: 2,
      migrate: { 1: (s) => ({ ...s, pendingWrites: s.pendingWrites.map(([t, , v]) => [t, 'n', v]) }) },
    };
    for (const schema of [renames, throws, moves]) {
      const saver = new StatefoldSaver({ store, schema });
      await expect(saver.getTuple(cfg('t'))).rejects.toMatchObject({ code: 'MIGRATION_FAILED' });
      await expect(saver.putWrites(cfg('t', ids[2]!), [['n', 1]], 'task-3')).rejects.toMatchObject({
        code: 'MIGRATION_FAILED',
      });
      await saver.close();
    }
    expect((await store.list('')).filter((k) => !k.includes('/hint/'))).toEqual(
      keys.filter((k) => !k.includes('/hint/')),
    );
  });

  it('statefold migrate runs a saver schema over saver threads (saverMigrations)', async () => {
    const store = new MemoryStore();
    const ids = await writeV1(store, 5);
    const schema = saverMigrations(v2);
    const dry = await migrateStreams(store, { schema });
    expect(dry.streams).toEqual([{ stream: 'langgraph/["t",""]', status: 'migrates', from: 1 }]);
    const applied = await migrateStreams(store, { schema, apply: true });
    expect(applied.streams[0]).toMatchObject({ status: 'migrated', from: 1 });
    // The base it wrote holds the upcast state; the thread reads on, the same, in version 2.
    const saver = new StatefoldSaver({ store, schema: v2 });
    const tuple = await saver.getTuple(cfg('t'));
    expect(tuple?.checkpoint.id).toBe(ids.at(-1));
    expect(tuple?.checkpoint.channel_values).toEqual({ plan: ['search', 'book 4'], n: 4 });
    expect(tuple?.pendingWrites).toEqual([['task-1', 'plan', ['a', 'b']]]);
    await saver.close();
  });
});
