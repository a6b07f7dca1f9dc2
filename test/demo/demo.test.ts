import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const demo = fileURLToPath(new URL('../../demo/demo.mjs', import.meta.url));

describe('demo: npm run demo in short mode', () => {
  it('survives its kills, charges each order exactly once and ends in the uninterrupted state', async () => {
    // The file store in a temp dir, whatever S3 variables the environment has.
    const env = { ...process.env, STATEFOLD_S3_ENDPOINT: '' };
    const { stdout } = await run(process.execPath, [demo, '--short', '--seed', '7'], { timeout: 120_000, env });
    expect(stdout).toMatch(/kills survived\s+3/);
    expect(stdout).toMatch(/charges made\s+12 for 12 orders/);
    expect(stdout).toContain('ok   exactly one charge per order');
    expect(stdout).toContain('ok   final state equals the uninterrupted run');
    expect(stdout).toContain('all checks passed');
  }, 150_000);
});
