import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const demo = fileURLToPath(new URL('../../demo/demo.mjs', import.meta.url));

describe('demo: npm run demo in short mode', () => {
  it('survives its kills, charges each order exactly once and ends in the uninterrupted state', async () => {
    // The embedded default (SQLite) in a temp dir, whatever S3 variables the environment has.
    const env = { ...process.env, STATEFOLD_S3_ENDPOINT: '' };
    const { stdout } = await run(process.execPath, [demo, '--short', '--seed', '7'], { timeout: 120_000, env });
    expect(stdout).toMatch(/kills survived\s+3/);
    expect(stdout).toMatch(/charges made\s+12 for 12 orders/);
    expect(stdout).toContain('ok   exactly one charge per order');
    expect(stdout).toContain('ok   final state equals the uninterrupted run');
    expect(stdout).toContain('all checks passed');
    expect(stdout).toMatch(/store\s+\S+agents\.db\n/);
  }, 150_000);

  it('runs on the file store with --store file, and refuses a store it does not know', async () => {
    const env = { ...process.env, STATEFOLD_S3_ENDPOINT: '' };
    const { stdout } = await run(process.execPath, [demo, '--short', '--seed', '7', '--store', 'file'], {
      timeout: 120_000,
      env,
    });
    expect(stdout).toMatch(/store\s+\S+statefold-demo-killed-\w+\n/);
    expect(stdout).toContain('ok   final state equals the uninterrupted run');
    expect(stdout).toContain('all checks passed');
    await expect(run(process.execPath, [demo, '--store', 'nope'], { timeout: 30_000, env })).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--store must be sqlite or file (got nope)'),
    });
  }, 150_000);
});
