import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { S3Store } from 'statefold/s3';
import { removePrefix } from '../support/s3-cleanup.js';
import { s3Client, s3Store, s3TestEnv, type S3TestEnv } from '../support/s3-env.js';
import { takeOverBusyWriter } from '../support/takeover.js';

// Takeover on a real S3-compatible server: a child process commits back to back with 3 checkpoints
// in flight; a new engine must open, fence it and keep every acknowledged checkpoint.
const env = s3TestEnv();
const RUN = `statefold-it/${Date.now().toString(36)}-${randomBytes(3).toString('hex')}-takeover`;

if (env === undefined) {
  describe.skip('takeover on s3 (needs STATEFOLD_S3_ENDPOINT)', () => {
    it('takes over a busy writer', () => undefined);
  });
} else {
  defineSuite(env);
}

function defineSuite(env: S3TestEnv): void {
  const admin = s3Client(env);
  const stores: S3Store[] = [];
  afterAll(async () => {
    for (const s of stores) s.destroy();
    await removePrefix(admin, env.bucket, `${RUN}/`);
    admin.destroy();
  });

  describe('takeover on s3: another process committing back to back', () => {
    it('opens while the old process writes with 3 checkpoints in flight, fences it, and keeps every acknowledged seq', async () => {
      const opens: number[] = [];
      for (let round = 1; round <= 3; round++) {
        const prefix = `${RUN}/r${round}/`;
        const store = s3Store(env, prefix);
        stores.push(store);
        const report = await takeOverBusyWriter(store, ['s3', prefix], 'agent/takeover', 10 * round);
        opens.push(report.openMs);
        console.log(
          `takeover (s3): round ${round}: open took ${report.openMs.toFixed(1)} ms, old writer acknowledged ${report.acked}, ${report.fillers} fillers, new engine at seq ${report.seq}`,
        );
      }
      expect(opens).toHaveLength(3);
    }, 300_000);
  });
}
