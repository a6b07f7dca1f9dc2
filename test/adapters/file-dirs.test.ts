// FileStore's directories (storage-adapters/file/dirs.ts) and the create step its I/O threads
// report failing: internals the store's own tests cannot reach, read from the build.
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Dirs, syncDir } from '../../dist/storage-adapters/file/dirs.js';
import { ioPool } from '../../dist/storage-adapters/file/io-pool.js';

const made: string[] = [];
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'statefold-dirs-'));
  made.push(dir);
  return dir;
}
afterAll(async () => {
  await Promise.all(made.map((d) => rm(d, { recursive: true, force: true })));
});

/** A directory fsync that takes a while and records when each one finished. */
function slowSync(synced: string[]): (dir: string) => Promise<void> {
  return async (dir) => {
    await new Promise((r) => setTimeout(r, 15));
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
    await ioPool.delete({ file: path.join(dir, 'k'), dir, fsync: true }, 2);
    expect(await readdir(dir)).toEqual([]);
    await expect(ioPool.delete({ file: path.join(dir, 'k'), dir, fsync: true }, 2)).rejects.toMatchObject({
      code: 'ENOENT',
    });
  });
});
