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
  /** The AWS variables and files of this machine left out, so that only `vars` configure the child. */
  const only = (vars: Record<string, string | undefined>): NodeJS.ProcessEnv => ({
    ...Object.fromEntries(
      Object.keys(process.env)
        .filter((k) => k.startsWith('AWS_'))
        .map((k) => [k, undefined]),
    ),
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    AWS_EC2_METADATA_DISABLED: 'true', // no wait for an instance role that is not there
    ...vars,
  });
  const keys = {
    AWS_ACCESS_KEY_ID: env.credentials?.accessKeyId,
    AWS_SECRET_ACCESS_KEY: env.credentials?.secretAccessKey,
  };

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

  it('with --endpoint or AWS_ENDPOINT_URL and no region (unset or empty), the region is us-east-1', async () => {
    const url = `s3://${env.bucket}/${RUN}/empty`;
    for (const region of [{}, { AWS_REGION: '' }, { AWS_REGION: '', AWS_DEFAULT_REGION: '' }]) {
      const r = await cli(['ls', url, '--endpoint', env.endpoint], only({ ...keys, ...region }));
      expect(r, JSON.stringify(region)).toEqual({ code: 0, stdout: '', stderr: '' });
    }
    const fromEnv = await cli(['ls', url], only({ ...keys, AWS_ENDPOINT_URL: env.endpoint, AWS_REGION: '' }));
    expect(fromEnv).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('without a region or an endpoint: exit 2 saying to give one', async () => {
    const r = await cli(['ls', `s3://${env.bucket}/${RUN}`], only(keys));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^statefold ls: store s3:\/\/\S+: no region: give --region or set AWS_REGION/);
  });

  it('without credentials: exit 3 naming the variables to set, in terms of the store and stream (no internal keys)', async () => {
    const url = `s3://${env.bucket}/${RUN}`;
    const ls = await cli(['ls', url, '--endpoint', env.endpoint], only({}));
    expect(ls.code).toBe(3);
    expect(ls.stderr).toBe(
      `statefold ls: STORAGE: store ${url}: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE); the AWS SDK said: Could not load credentials from any providers\n`,
    );
    const verify = await cli(['verify', url, 'agent-a', '--endpoint', env.endpoint], only({}));
    expect(verify.code).toBe(3);
    expect(verify.stderr).toMatch(
      /^statefold verify: STORAGE: stream "agent-a" in s3:\/\/\S+: no credentials: set AWS_ACCESS_KEY_ID/,
    );
    expect(verify.stderr).not.toMatch(/\bs\./);
  });

  it('a wrong secret or a missing bucket: exit 3 in terms of the store, no internal keys', async () => {
    const url = `s3://${env.bucket}/${RUN}`;
    const wrong = await cli(
      ['log', url, 'agent-a', '--endpoint', env.endpoint],
      only({ ...keys, AWS_SECRET_ACCESS_KEY: 'not-the-secret' }),
    );
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toMatch(
      /^statefold log: STORAGE: stream "agent-a" in s3:\/\/\S+: SignatureDoesNotMatch \(HTTP 403\)/,
    );
    expect(wrong.stderr).not.toMatch(/\bs\./);
    const bucket = `${env.bucket}-no-such-bucket-${randomBytes(3).toString('hex')}`;
    const missing = await cli(['ls', `s3://${bucket}/x`, '--endpoint', env.endpoint], only(keys));
    expect(missing).toEqual({
      code: 3,
      stdout: '',
      stderr: `statefold ls: NOT_FOUND: store s3://${bucket}/x: no bucket "${bucket}"\n`,
    });
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
