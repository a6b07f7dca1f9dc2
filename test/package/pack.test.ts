import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The package as a user gets it: `npm pack`, then installed from the tarball into an empty folder
// with no AWS SDK, and imported from a plain node process outside the repository.

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
let work: string;
let tarball: string;
let files: string[];

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'statefold-pack-'));
  // --ignore-scripts: the suite has just built dist/ (pretest), and a second build would race other test files reading it.
  const { stdout } = await run(npm, ['pack', '--json', '--ignore-scripts', '--pack-destination', work], {
    cwd: root,
    timeout: 120_000,
  });
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  tarball = path.join(work, packed!.filename);
  files = packed!.files.map((f) => f.path);
  const app = path.join(work, 'app');
  await run('mkdir', ['-p', app]);
  await writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  await run(npm, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], {
    cwd: app,
    timeout: 240_000,
  });
}, 300_000);

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

async function node(script: string): Promise<string> {
  const file = path.join(work, 'app', 'probe.mjs');
  await writeFile(file, script);
  const { stdout } = await run(process.execPath, [file], { cwd: path.join(work, 'app'), timeout: 60_000 });
  return stdout.trim();
}

describe('package: npm pack, installed into an empty folder', () => {
  it('ships dist/ with types and source maps, LICENSE, README and package.json, and no sources or tests', () => {
    expect(files).toContain('dist/engine/index.js');
    expect(files).toContain('dist/engine/index.d.ts');
    expect(files).toContain('dist/storage-adapters/s3/index.d.ts');
    expect(files).toContain('dist/storage-adapters/testing/index.js');
    expect(files).toContain('dist/engine/engine.js.map');
    expect(files).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json']));
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => f.startsWith('test/') || f.startsWith('bench/') || f.startsWith('engine/'))).toEqual([]);
  });

  it('installs no AWS SDK, and checkpoints and restores on the FileStore', async () => {
    expect(await readdir(path.join(work, 'app', 'node_modules'))).not.toContain('@aws-sdk');
    const out = await node(`
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SnapshotEngine, FileStore, restore } from 'statefold';
const store = new FileStore({ dir: mkdtempSync(join(tmpdir(), 'statefold-pack-store-')) });
const engine = await SnapshotEngine.open({ store, stream: 'packed' });
await engine.checkpoint({ messages: ['hello'] });
await engine.checkpoint({ messages: ['hello', 'world'] });
await engine.close();
const r = await restore(store, 'packed');
console.log(JSON.stringify({ seq: r.seq, state: r.state }));
`);
    expect(JSON.parse(out)).toEqual({ seq: 2, state: { messages: ['hello', 'world'] } });
  });

  it('fails to import statefold/s3 with a message naming the missing peer', async () => {
    const out = await node(`
try { await import('statefold/s3'); console.log('loaded'); }
catch (e) { console.log(e.message); }
`);
    expect(out).toBe(
      'statefold/s3 needs the optional peer dependency @aws-sdk/client-s3, which is not installed: run npm install @aws-sdk/client-s3',
    );
  });

  it('resolves source maps to their inlined sources', async () => {
    const out = await node(`
import { readFileSync } from 'node:fs';
const map = JSON.parse(readFileSync(new URL('./node_modules/statefold/dist/engine/engine.js.map', import.meta.url), 'utf8'));
console.log(JSON.stringify({ sources: map.sources, inlined: map.sourcesContent?.[0]?.includes('class SnapshotEngine') ?? false }));
`);
    expect(JSON.parse(out)).toEqual({ sources: ['../../engine/engine.ts'], inlined: true });
  });
});
