import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// pg (node-postgres) is an optional peer dependency: an install without it must still load statefold,
// and `statefold/postgres` must say what to install. This installs the built package in a temp
// node_modules holding every dependency but pg, and imports it from a plain node process.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'statefold-nopg-'));
  const pkg = path.join(dir, 'node_modules', 'statefold');
  await mkdir(pkg, { recursive: true });
  await cp(path.join(root, 'package.json'), path.join(pkg, 'package.json'));
  await cp(path.join(root, 'dist'), path.join(pkg, 'dist'), { recursive: true });
  for (const name of await readdir(path.join(root, 'node_modules'))) {
    if (name === 'pg' || name.startsWith('.')) continue;
    await symlink(path.join(root, 'node_modules', name), path.join(dir, 'node_modules', name));
  }
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function run(script: string): Promise<unknown> {
  const file = path.join(dir, 'probe.mjs');
  await writeFile(file, `${script}\nconsole.log(JSON.stringify(out));\n`);
  const { stdout } = await promisify(execFile)(process.execPath, [file], { cwd: dir });
  return JSON.parse(stdout);
}

describe('postgres store: pg is an optional peer', () => {
  it('loads statefold without pg installed', async () => {
    const out = await run(
      `const sf = await import('statefold'); const out = [typeof sf.SnapshotEngine, typeof sf.FileStore, typeof sf.MemoryStore];`,
    );
    expect(out).toEqual(['function', 'function', 'function']);
  });

  it('fails to import statefold/postgres with a message that says what to install, the original error as cause', async () => {
    const out = await run(`let out;
try { await import('statefold/postgres'); out = 'loaded'; }
catch (e) { out = { error: e instanceof Error, message: e.message, causeCode: e.cause?.code, causeMessage: e.cause?.message }; }`);
    expect(out).toEqual({
      error: true,
      message: 'statefold/postgres needs the optional peer dependency pg, which is not installed: run npm install pg',
      causeCode: 'ERR_MODULE_NOT_FOUND',
      causeMessage: expect.stringContaining("'pg'"),
    });
  });
});
