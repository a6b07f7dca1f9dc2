import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll } from 'vitest';
import { FileStore, MemoryStore, type Store } from 'statefold';

/** The embedded stores every engine test runs on: memory, and file in a temp dir removed after the file's tests. */
export const engineStores: { name: string; create(): Promise<Store> }[] = [
  { name: 'memory', create: async () => new MemoryStore() },
  { name: 'file', create: async () => new FileStore({ dir: await tempDir() }) },
];

const dirs: string[] = [];
// Registered when a test file imports this module (file scope): a hook registered from inside a
// running test is never run.
afterAll(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

/** A fresh temp directory, removed when the test file ends. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'statefold-test-'));
  dirs.push(dir);
  return dir;
}
