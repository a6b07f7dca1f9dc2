import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { SnapshotEngine } from 'statefold';
import { cli } from '../support/cli.js';
import { flipByte } from '../support/damage.js';
import { removePrefix } from '../support/s3-cleanup.js';
import { s3Client, s3Store, s3TestEnv, type S3TestEnv } from '../support/s3-env.js';

// The `statefold` bin against a real S3-compatible server, configured as a user would: an
// s3:// URL, --endpoint, and the usual AWS credential variables.
const env = s3TestEnv();
const RUN = `statefold-it/${Date.now().toString(36)}-${randomBytes(3).toString('hex')}-cli`;

if (env === undefined) {
  describe.skip('statefold CLI on s3 (needs STATEFOLD_S3_ENDPOINT)', () => {
    it('lists, verifies and deletes streams in a bucket', () => undefined);
  });
} else {
  defineSuite(env);
}

function defineSuite(env: S3TestEnv): void {
  const admin = s3Client(env);
  afterAll(async () => {
    await removePrefix(admin, env.bucket, `${RUN}/`);
    admin.destroy();
  }, 120_000);
  const awsEnv = {
    AWS_ACCESS_KEY_ID: env.credentials?.accessKeyId,
    AWS_SECRET_ACCESS_KEY: env.credentials?.secretAccessKey,
    AWS_REGION: env.region,
  };
  const run = (...args: string[]) => cli([...args, '--endpoint', env.endpoint], awsEnv as NodeJS.ProcessEnv);

  it('ls, log, verify (a damaged delta: exit 1), show and rm through s3://bucket/prefix', async () => {
    const store = s3Store(env, `${RUN}/`);
    const keys: string[] = [];
    for (const stream of ['agent-a', 'agent-b']) {
      const engine = await SnapshotEngine.open({ store, stream, policy: { baseEvery: 4, maxDeltaRatio: Infinity } });
      for (let i = 1; i <= 6; i++) keys.push((await engine.checkpoint({ stream, i, pad: 'x'.repeat(200) })).key);
      await engine.close();
    }
    const url = `s3://${env.bucket}/${RUN}`;
    expect(await run('ls', url)).toMatchObject({ code: 0, stdout: 'agent-a\nagent-b\n' });
    expect((await run('log', url, 'agent-a', '--limit', '2')).stdout.trim().split('\n')).toHaveLength(3);
    await flipByte(store, keys[1]!, undefined, 1); // agent-a seq 2, a delta
    const v = await run('verify', url, 'agent-a', '--json');
    expect(v.code).toBe(1);
    expect(JSON.parse(v.stdout).damaged.map((d: { seq: number }) => d.seq)).toEqual([2, 3, 4]);
    expect(JSON.parse((await run('show', url, 'agent-b', '--json')).stdout).value).toMatchObject({ i: 6 });
    expect((await run('rm', url, 'agent-b', '--yes')).code).toBe(0);
    expect((await run('ls', url)).stdout).toBe('agent-a\n');
    store.destroy();
  });

  it('verify, log, gc and rm of a stream the prefix does not hold: exit 3 NOT_FOUND', async () => {
    const url = `s3://${env.bucket}/${RUN}`;
    for (const args of [
      ['verify', url, 'no-such-stream'],
      ['log', url, 'no-such-stream'],
      ['gc', url, 'no-such-stream', '--keep-last', '1'],
      ['rm', url, 'no-such-stream', '--yes'],
    ]) {
      const r = await run(...args);
      expect(r, args.join(' ')).toMatchObject({ code: 3, stdout: '' });
      expect(r.stderr, args.join(' ')).toMatch(/NOT_FOUND: no stream "no-such-stream" in s3:/);
    }
  });
}
