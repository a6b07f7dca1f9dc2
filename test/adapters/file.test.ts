import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { FileStore, SnapshotEngine, gc, listCheckpoints, restore } from 'statefold';
import { describeStoreConformance } from 'statefold/testing';
import { churnKey, churnShard } from '../support/shard-churn.mjs';
// FileStore internals the store's own API cannot reach (its directories, the step an I/O thread
// reports failing), read from the build.
import { Dirs, Shards, syncDir } from '../../dist/storage-adapters/file/dirs.js';
import { ioPool } from '../../dist/storage-adapters/file/io-pool.js';

const dirs: string[] = [];
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'statefold-file-'));
  dirs.push(dir);
  return dir;
}
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describeStoreConformance({
  name: 'file',
  honoursListLimit: true,
  create: async () => new FileStore({ dir: await freshDir() }),
  // A dir under a regular file: every operation meets ENOTDIR.
  createFailing: async () => {
    const file = path.join(await freshDir(), 'not-a-dir');
    await writeFile(file, 'x');
    return new FileStore({ dir: path.join(file, 'store') });
  },
});

// The same contracts with writes on Node's own thread pool instead of the write threads.
describeStoreConformance({
  name: 'file, ioThreads 0',
  honoursListLimit: true,
  create: async () => new FileStore({ dir: await freshDir(), ioThreads: 0 }),
});

describe('file store: native behaviour', () => {
  it('stores each key as a file under dir, long last segments in shards, and leaves no temp file behind', async () => {
    const dir = await freshDir();
    const store = new FileStore({ dir });
    await store.putIfAbsent('s/0000000000000001', Uint8Array.of(1));
    await store.putIfAbsent('s/0000000000000001', Uint8Array.of(2));
    await store.putIfAbsent('s/short', Uint8Array.of(3));
    expect((await readdir(dir)).sort()).toEqual(['@layout', 's']);
    expect((await readdir(path.join(dir, 's'))).sort()).toEqual(['00000000000000@', 'short']);
    expect(await readdir(path.join(dir, 's', '00000000000000@'))).toEqual(['0000000000000001']);
    expect(Array.from((await store.get('s/0000000000000001'))!)).toEqual([1]);
  });

  it('lists from a seq reading only the shards from there on, and pages across shards', async () => {
    const dir = await freshDir();
    const store = new FileStore({ dir, fsync: false });
    const key = (n: number): string => `l/${n.toString(16).padStart(16, '0')}`;
    for (let n = 0; n < 700; n++) await store.putIfAbsent(key(n), Uint8Array.of(n & 0xff));
    // 700 seqs take three shards of 256.
    expect((await readdir(path.join(dir, 'l'))).length).toBe(3);
    expect(await store.list('l/', { startAfter: key(600), limit: 3 })).toEqual([key(601), key(602), key(603)]);
    expect(await store.list('l/', { startAfter: key(254), limit: 3 })).toEqual([key(255), key(256), key(257)]);
    expect(await store.list('l/', { startAfter: key(698) })).toEqual([key(699)]);
    const all = await store.list('l/');
    expect(all).toEqual(Array.from({ length: 700 }, (_, n) => key(n)));
    // A shard that cannot hold a key after startAfter is not read: make it unreadable and list past it.
    await rm(path.join(dir, 'l', '00000000000000@'), { recursive: true });
    expect(await store.list('l/', { startAfter: key(300), limit: 2 })).toEqual([key(301), key(302)]);
  });

  it('keeps reading and writing a directory written before layouts (flat), and never mixes the two', async () => {
    const dir = await freshDir();
    // A store from before: objects at <dir>/<key>, no marker.
    await mkdir(path.join(dir, 's'), { recursive: true });
    await writeFile(path.join(dir, 's', '0000000000000001'), Uint8Array.of(9));
    const store = new FileStore({ dir });
    expect(Array.from((await store.get('s/0000000000000001'))!)).toEqual([9]);
    expect(await store.putIfAbsent('s/0000000000000001', Uint8Array.of(1))).toBe(false);
    expect(await store.putIfAbsent('s/0000000000000002', Uint8Array.of(2))).toBe(true);
    expect((await readdir(path.join(dir, 's'))).sort()).toEqual(['0000000000000001', '0000000000000002']);
    expect(await readdir(dir)).toEqual(['s']);
    expect(await store.list('s/', { startAfter: 's/0000000000000001' })).toEqual(['s/0000000000000002']);
  });

  it('refuses a directory whose marker names a layout it does not know, with STORAGE', async () => {
    const dir = await freshDir();
    await writeFile(path.join(dir, '@layout'), 'statefold file layout: something newer 2\n');
    const store = new FileStore({ dir });
    await expect(store.putIfAbsent('a/b', Uint8Array.of(1))).rejects.toMatchObject({ code: 'STORAGE' });
    await expect(store.get('a/b')).rejects.toMatchObject({ code: 'STORAGE' });
  });

  it.each([{ ioThreads: 0 }, {}])('leaves no temp file behind when a write fails (%o)', async (options) => {
    const dir = await freshDir();
    const store = new FileStore({ dir, ...options });
    await store.putIfAbsent('f/a', Uint8Array.of(1));
    // A body that cannot be written: a detached buffer makes writeFile throw after the temp file
    // exists (on Node's fs), or the copy handed to an I/O thread throw before anything is written.
    const body = new Uint8Array(new ArrayBuffer(8));
    structuredClone(body.buffer, { transfer: [body.buffer] });
    await expect(store.putIfAbsent('f/k', body)).rejects.toMatchObject({ code: 'STORAGE', key: 'f/k' });
    expect(await readdir(path.join(dir, 'f'))).toEqual(['a']);
    expect(await store.list('f/')).toEqual(['f/a']);
  });

  it('sees objects written by another FileStore on the same dir (another process)', async () => {
    const dir = await freshDir();
    const a = new FileStore({ dir });
    const b = new FileStore({ dir });
    expect(await a.putIfAbsent('x/1', Uint8Array.of(7))).toBe(true);
    expect(await b.putIfAbsent('x/1', Uint8Array.of(8))).toBe(false);
    expect(Array.from((await b.get('x/1'))!)).toEqual([7]);
  });

  it('lists nothing under a prefix that runs through an object, but rejects STORAGE when dir is not a directory', async () => {
    const dir = await freshDir();
    const store = new FileStore({ dir });
    await store.putIfAbsent('obj', Uint8Array.of(1));
    expect(await store.list('obj/')).toEqual([]);
    expect(await store.list('obj/x/')).toEqual([]);
    const inside = new FileStore({ dir: path.join(dir, 'obj', 'store') });
    for (const prefix of ['', 'a/', 'a/b/']) {
      const err = await inside.list(prefix).catch((e: unknown) => e);
      expect(err, prefix).toMatchObject({ code: 'STORAGE', cause: expect.objectContaining({ code: 'ENOTDIR' }) });
    }
  });

  for (const ioThreads of [16, 0]) {
    it(`creates each key once across two stores racing on many keys, and writes again into a directory removed behind its back (ioThreads ${ioThreads})`, async () => {
      const dir = await freshDir();
      const a = new FileStore({ dir, ioThreads });
      const b = new FileStore({ dir, ioThreads });
      const keys = Array.from({ length: 40 }, (_, i) => `race/s${i % 8}/${String(i).padStart(16, '0')}`);
      const results = await Promise.all(
        keys.flatMap((key, i) => [a.putIfAbsent(key, Uint8Array.of(1, i)), b.putIfAbsent(key, Uint8Array.of(2, i))]),
      );
      for (let i = 0; i < keys.length; i++) {
        expect([results[2 * i], results[2 * i + 1]].filter(Boolean), keys[i]).toHaveLength(1);
        expect(Array.from((await a.get(keys[i]!))!), keys[i]).toEqual([results[2 * i] ? 1 : 2, i]);
      }
      expect((await a.list('race/')).length).toBe(keys.length);
      // Another process removed a stream's directory: a's cached knowledge of it is stale.
      await rm(path.join(dir, 'race', 's3'), { recursive: true });
      const again = `race/s3/${'9'.padStart(16, '0')}`;
      expect(await a.putIfAbsent(again, Uint8Array.of(9))).toBe(true);
      expect(Array.from((await b.get(again))!)).toEqual([9]);
    });
  }

  it('rejects a ioThreads that is not a whole number of 0 or more with INVALID_ARGUMENT', () => {
    for (const [i, ioThreads] of ([-1, 1.5, Number.NaN, '4', 4n, Object.create(null)] as number[]).entries())
      expect(() => new FileStore({ dir: 'x', ioThreads }), `value ${i}`).toThrowError(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('ioThreads') }),
      );
  });

  it('rejects a missing dir option with INVALID_ARGUMENT', () => {
    expect(() => new FileStore({} as never)).toThrowError(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

/** The directories under `root` (relative paths, sorted), and those of them that hold nothing. */
async function dirsUnder(root: string): Promise<{ all: string[]; empty: string[] }> {
  const all: string[] = [];
  const empty: string[] = [];
  const visit = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    if (entries.length === 0) empty.push(path.relative(root, dir));
    for (const entry of entries) {
      if (!entry.isDirectory()) continue;
      all.push(path.relative(root, path.join(dir, entry.name)));
      await visit(path.join(dir, entry.name));
    }
  };
  await visit(root);
  return { all: all.sort(), empty: empty.sort() };
}

/** Churns a shard from another process (see the race below). */
const SHARD_CHILD = fileURLToPath(new URL('../support/shard-child.mjs', import.meta.url));

describe('file store: emptied shards', () => {
  const retention = { keepLast: 10, minAgeMs: 0 };

  it('removes the shards that retention empties: a stream kept to its last 10 checkpoints keeps a few directories, whatever its history', async () => {
    const dir = await freshDir();
    const store = new FileStore({ dir, fsync: false });
    const engine = await SnapshotEngine.open({ store, stream: 'agent', retention });
    // 1,000 seqs span 4 shards of 256 under each of log/, gc/ (floors) and hint/.
    for (let n = 1; n <= 1000; n++) await engine.checkpoint({ n, recent: [n - 1, n] });
    await engine.close();
    await gc(store, 'agent', retention);
    const { all, empty } = await dirsUnder(path.join(dir, 's.agent'));
    expect(empty).toEqual([]);
    // Left: log/, gc/ and hint/; in log/, the shard of seq 1 (the open's fence stays, see gc) and
    // the newest seqs' (one, or two across a shard's end); one floor's shard and one hint's.
    expect(all.length, all.join(' ')).toBeLessThanOrEqual(3 + 3 + 2);
    // Listing and restoring read what is left.
    const listed = (await listCheckpoints(store, 'agent')).map((c) => c.seq);
    expect(listed.at(-1)).toBe(1000);
    expect(listed[0]).toBeLessThanOrEqual(991);
    expect((await restore(store, 'agent')).state).toEqual({ n: 1000, recent: [999, 1000] });
    expect((await restore(store, 'agent', { seq: listed[0]! })).state).toEqual({
      n: listed[0],
      recent: [listed[0]! - 1, listed[0]],
    });
  });

  it('keeps the shards that hold the fences of earlier opens, and only those', async () => {
    const dir = await freshDir();
    const store = new FileStore({ dir, fsync: false });
    // Four opens, 300 checkpoints each: each open's fence (seqs 1, 301, 601, 901) stays in its shard.
    for (let open = 0; open < 4; open++) {
      const engine = await SnapshotEngine.open({ store, stream: 'agent', retention });
      for (let i = 1; i <= 300; i++) await engine.checkpoint({ n: open * 300 + i });
      await engine.close();
    }
    await gc(store, 'agent', retention);
    const { all, empty } = await dirsUnder(path.join(dir, 's.agent'));
    expect(empty).toEqual([]);
    // The four fences' shards (seq 901 is 0x385: shard 03) and the newest seqs' (1,200 is 0x4b0).
    const shard = (n: number): string => `log/${n.toString(16).padStart(14, '0')}@`;
    expect(all.filter((d) => d.startsWith('log/'))).toEqual([0, 1, 2, 3, 4].map(shard));
    expect((await restore(store, 'agent')).state).toEqual({ n: 1200 });
  });

  it.each([{ ioThreads: 0 }, {}])(
    'leaves a shard emptied while a create of the process is on its way into it, and removes it later (%o)',
    async (options) => {
      const dir = await freshDir();
      const store = new FileStore({ dir, ...options });
      const shard = path.join(dir, 'l', '00000000000001@');
      await store.putIfAbsent('l/0000000000000100', Uint8Array.of(1));
      // A create held before it opens its temp file (the shard is known: nothing to wait for).
      let release!: () => void;
      const before = vi
        .spyOn(Dirs.prototype, 'before')
        .mockImplementation(() => new Promise<void>((resolve) => (release = resolve)));
      let created: Promise<boolean>;
      try {
        created = store.putIfAbsent('l/0000000000000101', Uint8Array.of(2));
        await vi.waitFor(() => expect(before).toHaveBeenCalledWith(shard));
      } finally {
        before.mockRestore();
      }
      // The delete empties the shard, and leaves it: the create would otherwise find it gone.
      await store.delete('l/0000000000000100');
      expect(await readdir(shard)).toEqual([]);
      release();
      expect(await created).toBe(true);
      expect(await store.list('l/')).toEqual(['l/0000000000000101']);
      await store.delete('l/0000000000000101');
      expect(await readdir(path.join(dir, 'l'))).toEqual([]);
    },
  );

  it('never loses a create into a shard that deletes empty and remove meanwhile, in this process or another', async () => {
    const dir = await freshDir();
    // Another process churns the same shard: its removals meet this process's creates between
    // their mkdir and their temp file, which this process's own bookkeeping cannot prevent.
    const child = spawn(process.execPath, [SHARD_CHILD, dir, 'c', '2', '150'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (data: Buffer) => {
        out += data.toString();
        if (out.includes('ready\n')) resolve();
      });
      child.on('exit', () => reject(new Error(`shard child exited: ${out}`)));
    });
    child.stdin.end('go\n');
    // Two stores of this process, each with its own knowledge of which directories exist, one
    // writing on the I/O threads and one on Node's fs.
    const a = new FileStore({ dir });
    const b = new FileStore({ dir, ioThreads: 0 });
    // Every create resolved true and read back before its delete (churnShard rejects otherwise).
    expect(await Promise.all([churnShard(a, 'a', 2, 150), churnShard(b, 'b', 2, 150)])).toEqual([300, 300]);
    expect(await exited, out).toBe(0);
    expect(out).toContain('done 300');
    // And a create after the churn lands where a listing and another store find it.
    const key = churnKey('a', 9, 0);
    expect(await a.putIfAbsent(key, Uint8Array.of(1))).toBe(true);
    expect(await b.list('r/')).toEqual([key]);
    await a.delete(key);
    // The last delete left the shard empty, and removed it.
    expect(await readdir(path.join(dir, 'r'))).toEqual([]);
  });
});

/** A directory fsync that takes a while and records when each one finished. */
function slowSync(synced: string[]): (dir: string) => Promise<void> {
  return async (dir) => {
    await sleep(15);
    await syncDir(dir);
    synced.push(dir);
  };
}

describe('file store: directories', () => {
  it('resolves no caller before the parents of every directory it needed are fsynced', async () => {
    const root = await freshDir();
    const synced: string[] = [];
    const dirs = new Dirs(root, true, slowSync(synced));
    const a = path.join(root, 'a');
    const targets = ['b', 'c', 'd', 'b'].map((n) => path.join(a, n));
    // Each caller records which fsyncs had finished when it resolved.
    const seen = await Promise.all(targets.map((t) => dirs.ensure(t).then(() => [...synced])));
    for (const [i, done] of seen.entries()) {
      expect(done).toContain(root); // a's entry
      expect(done).toContain(a); // the entry of targets[i]
      expect((await stat(targets[i]!)).isDirectory()).toBe(true);
    }
    // a was made once, and its parent fsynced once; each new directory's parent once per directory.
    expect(synced.filter((d) => d === root)).toHaveLength(1);
    expect(synced.filter((d) => d === a)).toHaveLength(3);
  });

  it('makes a directory again, parents included, after it was removed behind its back', async () => {
    const root = await freshDir();
    const dirs = new Dirs(root, true);
    const deep = path.join(root, 'x', 'y', 'z');
    await dirs.ensure(deep);
    await rm(path.join(root, 'x'), { recursive: true });
    dirs.forget(deep);
    await dirs.ensure(deep);
    expect((await stat(deep)).isDirectory()).toBe(true);
  });

  it('lets a create into an existing directory go ahead, and holds one that raced a make of its directory', async () => {
    const root = await freshDir();
    const synced: string[] = [];
    const dirs = new Dirs(root, true, slowSync(synced));
    await mkdir(path.join(root, 'old'));
    // Made before this store: nothing to wait for, no mkdir, known once a create found it.
    expect(dirs.before(path.join(root, 'old'))).toBeUndefined();
    expect(dirs.found(path.join(root, 'old'))).toBeUndefined();
    expect(synced).toEqual([]);
    // A create found 'new' missing and makes it; another create linked into it meanwhile.
    const fresh = path.join(root, 'new');
    const making = dirs.ensure(fresh);
    expect(dirs.before(fresh)).toBeInstanceOf(Promise);
    const held = dirs.found(fresh);
    expect(held).toBeInstanceOf(Promise);
    await held;
    expect(synced).toContain(root); // the new directory's entry was durable before it resolved
    await making;
    expect(dirs.before(fresh)).toBeUndefined();
  });

  it('runs the fsyncs again for a directory it made whose parent fsync failed, never taking it as made', async () => {
    const root = await freshDir();
    const synced: string[] = [];
    let failNext = true;
    const dirs = new Dirs(root, true, async (dir) => {
      if (failNext) {
        failNext = false;
        throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
      }
      await syncDir(dir);
      synced.push(dir);
    });
    await dirs.ensure(root);
    failNext = true;
    const fresh = path.join(root, 'new');
    await expect(dirs.ensure(fresh)).rejects.toMatchObject({ code: 'EIO' });
    expect((await stat(fresh)).isDirectory()).toBe(true); // made, but its entry not durable
    // A create that linked into it, or one about to, waits for the fsync again.
    const held = dirs.found(fresh);
    expect(held).toBeInstanceOf(Promise);
    expect(dirs.before(path.join(fresh, 'below'))).toBeInstanceOf(Promise);
    await held;
    expect(synced).toEqual([root]);
    expect(dirs.found(fresh)).toBeUndefined();
  });

  it.each([{ ioThreads: 0 }, {}])(
    'holds a create until Dirs.found says its directory is durable (%o)',
    async (options) => {
      const dir = await freshDir();
      const store = new FileStore({ dir, ...options });
      await store.putIfAbsent('old/a', Uint8Array.of(1));
      // A new store on the same directory: 'old' exists, unknown to it.
      const again = new FileStore({ dir, ...options });
      let release!: () => void;
      const found = vi
        .spyOn(Dirs.prototype, 'found')
        .mockImplementation(() => new Promise<void>((resolve) => (release = resolve)));
      try {
        let settled = false;
        const created = again.putIfAbsent('old/k', Uint8Array.of(2)).finally(() => (settled = true));
        await vi.waitFor(() => expect(found).toHaveBeenCalledWith(path.join(dir, 'old')));
        await sleep(30);
        expect(settled).toBe(false);
        release();
        expect(await created).toBe(true);
      } finally {
        found.mockRestore();
      }
    },
  );

  it('lets a delete remove a shard only when no create of the process writes there, and a create wait for those that may', async () => {
    const shards = new Shards();
    const shard = path.join(await freshDir(), '00000000000001@');
    // A create is writing into it: a delete started now may not remove it.
    shards.enter(shard);
    expect(await shards.delete(shard, async (mayRemove) => mayRemove)).toBe(false);
    shards.leave(shard);
    // None is: it may, and a create that finds the shard gone waits for it to be over.
    let finish!: () => void;
    const deleting = shards.delete(shard, (mayRemove) => new Promise<boolean>((r) => (finish = () => r(mayRemove))));
    let waited = false;
    const waiting = shards.removals(shard).then(() => (waited = true));
    await sleep(20);
    expect(waited).toBe(false);
    finish();
    expect(await deleting).toBe(true);
    await waiting;
    // A delete that failed is over too.
    await expect(shards.delete(shard, () => Promise.reject(new Error('EIO')))).rejects.toThrow('EIO');
    await shards.removals(shard);
  });

  it('makes the root and what is missing above it', async () => {
    const base = await freshDir();
    const root = path.join(base, 'p', 'q');
    const synced: string[] = [];
    const dirs = new Dirs(root, true, slowSync(synced));
    await dirs.ensure(path.join(root, 's'));
    expect(await readdir(root)).toEqual(['s']);
    expect(synced).toEqual(expect.arrayContaining([base, path.join(base, 'p'), root]));
  });
});

describe('file store: I/O thread create errors', () => {
  it('says whether a create failed at the open of its temp file, before anything was written', async () => {
    const dir = await freshDir();
    const body = Uint8Array.of(1, 2, 3);
    // The temp file's directory is missing: the open fails.
    const missing = path.join(dir, 'gone');
    const atOpen = await ioPool
      .create(
        { temp: path.join(missing, 't#1.tmp'), file: path.join(missing, 'k'), dir: missing, body, fsync: true },
        2,
      )
      .catch((e: unknown) => e);
    expect(atOpen).toMatchObject({ code: 'ENOENT', atOpen: true });
    // The temp file opens, the link into a missing directory fails: not at the open.
    const atLink = await ioPool
      .create({ temp: path.join(dir, 't#2.tmp'), file: path.join(missing, 'k'), dir: missing, body, fsync: true }, 2)
      .catch((e: unknown) => e);
    expect(atLink).toMatchObject({ code: 'ENOENT', atOpen: false });
    // And the thread removed its temp file.
    expect(await readdir(dir)).toEqual([]);
    await writeFile(path.join(dir, 'k'), 'x');
    expect(
      await ioPool.create({ temp: path.join(dir, 't#3.tmp'), file: path.join(dir, 'k'), dir, body, fsync: true }, 2),
    ).toBe(false);
  });
});

describe('file store: I/O thread deletes', () => {
  it('unlinks the file, and rejects ENOENT for one that is not there', async () => {
    const dir = await freshDir();
    await writeFile(path.join(dir, 'k'), 'x');
    expect(await ioPool.delete({ file: path.join(dir, 'k'), dir, removeDir: false, fsync: true }, 2)).toBe(false);
    expect(await readdir(dir)).toEqual([]);
    await expect(
      ioPool.delete({ file: path.join(dir, 'k'), dir, removeDir: false, fsync: true }, 2),
    ).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('removes the directory when asked, once the file was its last', async () => {
    const shard = path.join(await freshDir(), '00000000000001@');
    await mkdir(shard);
    await writeFile(path.join(shard, 'a'), 'x');
    await writeFile(path.join(shard, 'b'), 'x');
    const job = (name: string): Parameters<typeof ioPool.delete>[0] => ({
      file: path.join(shard, name),
      dir: shard,
      removeDir: true,
      fsync: true,
    });
    expect(await ioPool.delete(job('a'), 2)).toBe(false);
    expect(await readdir(shard)).toEqual(['b']);
    expect(await ioPool.delete(job('b'), 2)).toBe(true);
    await expect(stat(shard)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('file store: I/O thread batches', () => {
  it('settles each job of one turn with its own outcome, whatever the others came to', async () => {
    const dir = await freshDir();
    const missing = path.join(dir, 'gone');
    await writeFile(path.join(dir, 'taken'), 'x');
    for (let i = 0; i < 8; i++) await writeFile(path.join(dir, `r${i}`), `body ${i}`);
    const create = (name: string, at = dir): Promise<unknown> =>
      ioPool
        .create(
          {
            temp: path.join(at, `${name}#t.tmp`),
            file: path.join(at, name),
            dir: at,
            body: Uint8Array.of(7),
            fsync: true,
          },
          4,
        )
        .catch((e: unknown) => e);
    const read = (name: string): Promise<unknown> =>
      ioPool.read(path.join(dir, name), 4).then((b) => (b === undefined ? b : Buffer.from(b).toString()));
    // All sent in this turn: reads, creates that win, lose and fail, and a delete, interleaved.
    const outcomes = await Promise.all([
      read('r0'),
      create('c0'),
      read('none'),
      create('taken'),
      read('r1'),
      create('c1', missing),
      ioPool.delete({ file: path.join(dir, 'r7'), dir, removeDir: false, fsync: true }, 4).then(() => 'deleted'),
      ...Array.from({ length: 5 }, (_, i) => read(`r${i + 2}`)),
      create('c2'),
    ]);
    expect(outcomes).toEqual([
      'body 0',
      true,
      undefined,
      false,
      'body 1',
      expect.objectContaining({ code: 'ENOENT', atOpen: true }),
      'deleted',
      'body 2',
      'body 3',
      'body 4',
      'body 5',
      'body 6',
      true,
    ]);
    expect((await readdir(dir)).sort()).toEqual(['c0', 'c2', 'r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'taken']);
  });
});
