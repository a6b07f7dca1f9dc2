import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileStore } from 'statefold';
import { describeStoreConformance } from 'statefold/testing';

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

describe('file store: native behaviour', () => {
  it('stores each key as a file under dir and leaves no temp file behind', async () => {
    const dir = await freshDir();
    const store = new FileStore({ dir });
    await store.putIfAbsent('s/0000000000000001', Uint8Array.of(1));
    await store.putIfAbsent('s/0000000000000001', Uint8Array.of(2));
    expect(await readdir(path.join(dir, 's'))).toEqual(['0000000000000001']);
  });

  it('leaves no temp file behind when a write fails', async () => {
    const dir = await freshDir();
    const store = new FileStore({ dir });
    // A body that cannot be written: a detached buffer makes writeFile throw after the temp file exists.
    const body = new Uint8Array(new ArrayBuffer(8));
    structuredClone(body.buffer, { transfer: [body.buffer] });
    await expect(store.putIfAbsent('f/k', body)).rejects.toMatchObject({ code: 'STORAGE', key: 'f/k' });
    expect(await readdir(path.join(dir, 'f'))).toEqual([]);
    expect(await store.list('f/')).toEqual([]);
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

  it('rejects a missing dir option with INVALID_ARGUMENT', () => {
    expect(() => new FileStore({} as never)).toThrowError(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});
