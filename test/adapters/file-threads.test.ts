import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// FileStore's I/O threads are process-wide, so each case runs in a fresh Node process of its own
// and reports how many threads it started (ioPool.threads, read from the build).

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

function run(script: string, dir: string): Promise<{ threads: number; [k: string]: unknown }> {
  const code = `
    import { FileStore, SnapshotEngine, restore } from 'statefold';
    import { ioPool } from ${JSON.stringify(path.join(root, 'dist/storage-adapters/file/io-pool.js'))};
    const dir = ${JSON.stringify(dir)};
    const out = {};
    ${script}
    out.threads = ioPool.threads;
    console.log(JSON.stringify(out));`;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', code],
      { cwd: root, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop()!) as { threads: number });
      },
    );
  });
}

describe('FileStore I/O threads start only when the load needs them', () => {
  it('one agent commits, reopens and restores without starting a thread', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'statefold-threads-'));
    dirs.push(dir);
    const wrote = await run(
      `const store = new FileStore({ dir });
       const engine = await SnapshotEngine.open({ store, stream: 'a' });
       for (let i = 0; i < 20; i++) await engine.checkpoint({ step: i, text: 'x'.repeat(i * 100) });
       await engine.close();
       out.seq = engine.seq;`,
      dir,
    );
    expect(wrote).toEqual({ seq: 20, threads: 0 });
    // A fresh process: the resume reads the chain and writes its claim, on Node's own fs.
    const resumed = await run(
      `const store = new FileStore({ dir });
       const engine = await SnapshotEngine.open({ store, stream: 'a' });
       out.step = engine.state.step;
       out.restored = (await restore(store, 'a', { seq: 7 })).state.step;
       await engine.close();`,
      dir,
    );
    expect(resumed).toEqual({ step: 19, restored: 6, threads: 0 });
  });

  it('many writes in flight at once start threads, up to ioThreads', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'statefold-threads-'));
    dirs.push(dir);
    const result = await run(
      `const store = new FileStore({ dir, ioThreads: 3 });
       const made = await Promise.all(Array.from({ length: 64 }, (_, i) => store.putIfAbsent('k/' + i, new Uint8Array([i]))));
       out.made = made.filter(Boolean).length;
       out.read = (await store.get('k/5'))[0];`,
      dir,
    );
    expect(result.made).toBe(64);
    expect(result.read).toBe(5);
    expect(result.threads).toBeGreaterThan(0);
    expect(result.threads).toBeLessThanOrEqual(3);
  });
});
