import { writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileStore, MemoryStore, SnapshotEngine, migrateStreams, restore, type Schema, type Store } from 'statefold';
import { cli } from '../support/cli.js';
import { tempDir } from '../support/stores.js';

// migrateStreams and `statefold migrate` (issue 34): a dry run over many streams reports exactly
// the streams whose migration throws; an apply writes one base per stream in the new version,
// leaves the failing ones as they were, and a rerun finds every migrated stream current.

type V1 = { n: number; poison?: boolean };
const schema: Schema = {
  version: 2,
  migrate: {
    1: (s: V1) => {
      if (s.poison) throw new Error(`cannot migrate agent ${s.n}`);
      return { data: s };
    },
  },
};

/** `count` streams at version 1, two checkpoints each; those in `poisoned` hold a state the migration refuses. */
async function streams(store: Store, count: number, poisoned: Set<number>): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const stream = `agents/${String(i).padStart(4, '0')}`;
    const engine = await SnapshotEngine.open<V1>({ store, stream });
    await engine.checkpoint({ n: i });
    await engine.checkpoint({ n: i, ...(poisoned.has(i) && { poison: true }) });
    await engine.close();
    ids.push(stream);
  }
  return ids;
}

/** Every key and byte under `prefix`, hints left out. */
async function contents(store: Store, prefix = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of await store.list(prefix))
    if (!key.includes('/hint/')) out.set(key, Buffer.from((await store.get(key))!).toString('hex'));
  return out;
}

describe('migrateStreams', () => {
  it('a dry run over 1,000 streams reports exactly those whose migration throws; apply migrates the rest', async () => {
    const store = new MemoryStore();
    const poisoned = new Set(Array.from({ length: 1000 }, (_, i) => i).filter((i) => (i * 7919) % 1000 < 31));
    const ids = await streams(store, 1000, poisoned);
    const before = await contents(store);
    const seen: number[] = [];
    const dry = await migrateStreams(store, { schema, onProgress: (p) => seen.push(p.done) });
    const expected = ids.filter((_, i) => poisoned.has(i));
    expect(new Set(dry.failed)).toEqual(new Set(expected));
    expect(dry.failed).toHaveLength(poisoned.size);
    expect(dry.streams.filter((s) => s.status === 'migrates')).toHaveLength(1000 - poisoned.size);
    const failure = dry.streams.find((s) => s.status === 'failed')!;
    expect(failure.error).toMatchObject({ code: 'MIGRATION_FAILED', seq: 2 });
    expect(failure.error!.message).toMatch(/cannot migrate agent/);
    expect(seen).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
    expect(await contents(store)).toEqual(before); // a dry run writes nothing

    const applied = await migrateStreams(store, { schema, apply: true, concurrency: 8 });
    expect(new Set(applied.failed)).toEqual(new Set(expected));
    expect(applied.streams.filter((s) => s.status === 'migrated')).toHaveLength(1000 - poisoned.size);
    for (const stream of expected.slice(0, 5)) {
      const prefix = (await store.list('')).find((k) => k.includes(stream.replace('/', '~2f')))!.split('/')[0]!;
      const was = new Map([...before].filter(([k]) => k.startsWith(`${prefix}/`)));
      expect(await contents(store, `${prefix}/`), stream).toEqual(was); // a failing stream is left as it was
    }
    const index = ids.findIndex((_, i) => !poisoned.has(i));
    const r = await restore(store, ids[index]!, { schema: 'stored' });
    expect([r.kind, r.schemaVersion, r.state, r.seq]).toEqual(['base', 2, { data: { n: index } }, 3]);
    // A rerun (after a stop) writes nothing: every migrated stream is current.
    const after = await contents(store);
    const rerun = await migrateStreams(store, { schema, apply: true });
    expect(rerun.streams.filter((s) => s.status === 'current')).toHaveLength(1000 - poisoned.size);
    expect(await contents(store)).toEqual(after);
    // --after resumes past a stream, and a bad option is INVALID_ARGUMENT before anything is read.
    const tail = await migrateStreams(store, { schema, after: ids[997]! });
    expect(tail.streams.map((s) => s.stream)).toEqual(ids.slice(998));
    await expect(migrateStreams(store, { schema, after: 'nope' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(migrateStreams(store, { schema: { version: 0 } })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  }, 120_000);

  it('statefold migrate: a schema module, --dry-run or --apply, failures reported with exit 1', async () => {
    const dir = await tempDir();
    const storeDir = path.join(dir, 'store');
    const store = new FileStore({ dir: storeDir, ioThreads: 0 });
    await streams(store, 4, new Set([2]));
    await writeFile(
      path.join(dir, 'statefold.schema.mjs'),
      `export const schema = { version: 2, migrate: { 1: (s) => { if (s.poison) throw new Error('poisoned ' + s.n); return { data: s }; } } };\n`,
    );
    expect(await cli(['migrate', storeDir], {}, dir)).toMatchObject({ code: 2 }); // neither --dry-run nor --apply
    expect((await cli(['migrate', storeDir, '--dry-run'])).stderr).toMatch(/no --schema MODULE given/);
    const dry = await cli(['migrate', storeDir, '--dry-run'], {}, dir);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toMatch(/FAILED "agents\/0002": MIGRATION_FAILED: .*poisoned 2/);
    expect(dry.stdout).toMatch(/4 streams: .*3 migrates.*1 failed|4 streams: .*1 failed.*3 migrates/);
    const one = await cli(['migrate', storeDir, 'agents/0001', '--apply', '--json'], {}, dir);
    expect(one.code).toBe(0);
    expect(JSON.parse(one.stdout).streams).toEqual([{ stream: 'agents/0001', status: 'migrated', from: 1, seq: 3 }]);
    const all = await cli(['migrate', storeDir, '--apply', '--schema', path.join(dir, 'statefold.schema.mjs')]);
    expect(all.code).toBe(1);
    expect(all.stdout).toMatch(/1 current/);
    expect(all.stdout).toMatch(/2 migrated/);
  }, 60_000);

  it('apply reports a stream too new for the code as failed, as the dry run does', async () => {
    const store = new MemoryStore();
    const w = await SnapshotEngine.open({
      store,
      stream: 'agents/new',
      schema: { version: 3, migrate: { 1: (s) => s, 2: (s) => s } },
    });
    await w.checkpoint({ n: 1 });
    await w.close();
    for (const apply of [false, true]) {
      const report = await migrateStreams(store, { schema, apply });
      expect(report.streams[0], `apply ${apply}`).toMatchObject({
        status: 'failed',
        error: { code: 'SCHEMA_TOO_NEW' },
      });
    }
  });
});
