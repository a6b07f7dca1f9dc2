import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Store } from 'statefold/s3';
import { describeStoreConformance } from 'statefold/testing';
import { listAll, listUploads, removePrefix } from '../support/s3-cleanup.js';
import { s3Client, s3Store, s3TestEnv, type S3TestEnv } from '../support/s3-env.js';

// The S3 store against a real S3-compatible server (Ceph RGW in CI, MinIO with `npm run test:minio`).
const env = s3TestEnv();
const MiB = 1024 * 1024;
/** Everything this run writes lives under this prefix, removed at the end. */
const RUN = `statefold-it/${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;

if (env === undefined) {
  describe.skip('s3 store: integration (needs STATEFOLD_S3_ENDPOINT)', () => {
    it('runs against a real S3-compatible server', () => undefined);
  });
} else {
  defineSuite(env);
}

function defineSuite(env: S3TestEnv): void {
  const clients: S3Client[] = [];
  const admin = s3Client(env);
  let stores = 0;
  const newClient = (): S3Client => {
    const client = s3Client(env);
    clients.push(client);
    return client;
  };
  const prefixFor = (name: string): string => `${RUN}/${name}-${++stores}/`;
  const store = (name: string, options: Parameters<typeof s3Store>[2] = {}): S3Store =>
    s3Store(env, prefixFor(name), { client: newClient(), ...options });

  describeStoreConformance({
    name: 's3',
    honoursListLimit: true,
    beforeAll: async () => {
      try {
        await admin.send(new HeadBucketCommand({ Bucket: env.bucket }));
      } catch (err) {
        throw new Error(
          `bucket ${env.bucket} at ${env.endpoint} is not reachable: ${(err as Error).name} ${(err as Error).message}`,
          { cause: err },
        );
      }
    },
    create: async () => store('conformance'),
    destroy: (s) => s.client.destroy(),
    // A bucket that does not exist, with few and short retries.
    createFailing: async () =>
      s3Store({ ...env, bucket: `statefold-missing-${randomBytes(4).toString('hex')}` }, prefixFor('failing'), {
        client: newClient(),
        maxAttempts: 2,
        retryBaseDelayMs: 1,
        retryMaxDelayMs: 5,
      }),
  });

  afterAll(async () => {
    await removePrefix(admin, env.bucket, `${RUN}/`);
    for (const client of clients) client.destroy();
    admin.destroy();
  }, 300_000);

  const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
  const pattern = (size: number, seed: number): Uint8Array => {
    const out = new Uint8Array(size);
    let x = seed * 2654435761 || 1;
    for (let i = 0; i < size; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      out[i] = x & 0xff;
    }
    return out;
  };
  const same = (a: Uint8Array | undefined, b: Uint8Array): boolean =>
    a !== undefined && Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0;
  const etagOf = async (s: S3Store, key: string): Promise<string> =>
    (await admin.send(new HeadObjectCommand({ Bucket: env.bucket, Key: s.prefix + key }))).ETag ?? '';

  /**
   * Asks the server directly (not through the store) whether CompleteMultipartUpload honours
   * `If-None-Match: *` over an existing object. AWS S3 and MinIO do; Ceph RGW 16 overwrites.
   */
  let completionIsConditional: boolean;
  beforeAll(async () => {
    const key = `${RUN}/raw-probe`;
    await admin.send(new PutObjectCommand({ Bucket: env.bucket, Key: key, Body: bytes('first') }));
    const { UploadId } = await admin.send(new CreateMultipartUploadCommand({ Bucket: env.bucket, Key: key }));
    const part = await admin.send(
      new UploadPartCommand({ Bucket: env.bucket, Key: key, UploadId, PartNumber: 1, Body: bytes('second') }),
    );
    try {
      await admin.send(
        new CompleteMultipartUploadCommand({
          Bucket: env.bucket,
          Key: key,
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
          IfNoneMatch: '*',
        }),
      );
      completionIsConditional = false;
    } catch (err) {
      if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode !== 412) throw err;
      completionIsConditional = true;
      await admin.send(new AbortMultipartUploadCommand({ Bucket: env.bucket, Key: key, UploadId }));
    }
  }, 60_000);

  describe('s3 store: native behaviour', () => {
    it('keeps every key under its prefix in the bucket, and leaves no probe object behind', async () => {
      const s = store('layout');
      expect(await s.putIfAbsent('a/0000000000000001', bytes('x'))).toBe(true);
      expect(await listAll(admin, env.bucket, s.prefix)).toEqual([`${s.prefix}a/0000000000000001`]);
    });

    it('lists more than 1,000 keys in ascending order through continuation tokens, honouring startAfter', async () => {
      const s = store('many');
      const keys = Array.from({ length: 1_100 }, (_, i) => `log/${i.toString(16).padStart(16, '0')}`);
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < keys.length) {
          const key = keys[next++]!;
          expect(await s.putIfAbsent(key, bytes(key))).toBe(true);
        }
      };
      await Promise.all(Array.from({ length: 32 }, worker));
      await s.putIfAbsent('other/0000000000000001', bytes('x'));
      // The server pages: one ListObjectsV2 does not return them all.
      const page = await admin.send(new ListObjectsV2Command({ Bucket: env.bucket, Prefix: `${s.prefix}log/` }));
      expect(page.IsTruncated).toBe(true);
      expect(page.Contents!.length).toBeLessThan(keys.length);

      expect(await s.list('log/')).toEqual(keys);
      expect(await s.list('log/', { startAfter: keys[9] })).toEqual(keys.slice(10));
      expect(await s.list('log/', { startAfter: keys[1_049] })).toEqual(keys.slice(1_050));
      expect(await s.list('log/', { startAfter: 'log/00000000000003e7.x' })).toEqual(keys.slice(1_000));
      expect(await s.list('log/', { startAfter: keys[1_099] })).toEqual([]);
      expect(await s.list('')).toEqual([...keys, 'other/0000000000000001']);
    }, 180_000);

    it('creates a body over the multipart threshold only if absent (in parts where the server completes conditionally)', async () => {
      const s = store('large', { multipartThreshold: MiB, partSize: 5 * MiB });
      const first = pattern(11 * MiB + 3, 1);
      expect(await s.putIfAbsent('big/1', first)).toBe(true);
      expect(await s.putIfAbsent('big/1', pattern(6 * MiB, 2))).toBe(false);
      expect(same(await s.get('big/1'), first)).toBe(true);
      // Multipart ETags end in -<parts>; on a server whose completion ignores If-None-Match the
      // store sends one conditional PutObject instead, which never forks a key.
      const etag = await etagOf(s, 'big/1');
      if (completionIsConditional) expect(etag).toMatch(/-3"?$/);
      else expect(etag).not.toContain('-');
      expect(await listUploads(admin, env.bucket, s.prefix)).toEqual([]);
      expect(await listAll(admin, env.bucket, s.prefix)).toEqual([`${s.prefix}big/1`]);
    }, 120_000);

    it('uploads in parts, round-trips the body and leaves no upload, when multipart is forced', async () => {
      // Without the conditional-write checks the store always takes the multipart path; this
      // exercises it on every server, RGW included (nobody else writes this key).
      const s = store('forced', { multipartThreshold: MiB, partSize: 5 * MiB, unsafeAllowUnconditionalWrites: true });
      const body = pattern(11 * MiB + 3, 3);
      expect(await s.putIfAbsent('big/1', body)).toBe(true);
      expect(await etagOf(s, 'big/1')).toMatch(/-3"?$/);
      expect(same(await s.get('big/1'), body)).toBe(true);
      expect(await listUploads(admin, env.bucket, s.prefix)).toEqual([]);
    }, 120_000);

    it('aborts a multipart upload that is cancelled mid-way, leaving no upload and no object', async () => {
      const client = newClient();
      const controller = new AbortController();
      // Cancel as soon as the server has taken the first part.
      client.middlewareStack.add(
        (next, context) => async (args) => {
          const out = await next(args);
          if (context.commandName === 'UploadPartCommand') controller.abort(new Error('cancelled by the test'));
          return out;
        },
        { step: 'initialize', name: 'cancelAfterFirstPart' },
      );
      const s = store('cancel', {
        client,
        multipartThreshold: MiB,
        partSize: 5 * MiB,
        partConcurrency: 1,
        unsafeAllowUnconditionalWrites: true,
      });
      const err = await s
        .putIfAbsent('big/1', pattern(16 * MiB, 4), { signal: controller.signal })
        .catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: 'ABORTED',
        key: 'big/1',
        message: "putIfAbsent big/1: aborted by the caller's signal (cancelled by the test)",
      });
      expect(await listUploads(admin, env.bucket, s.prefix)).toEqual([]);
      expect(await s.get('big/1')).toBeUndefined();
    }, 120_000);

    it('lets exactly one of two S3Client instances create each key when they race', async () => {
      const prefix = prefixFor('race');
      const a = s3Store(env, prefix, { client: newClient() });
      const b = s3Store(env, prefix, { client: newClient() });
      for (let i = 0; i < 25; i++) {
        const key = `r/${i}`;
        const [wa, wb] = await Promise.all([a.putIfAbsent(key, bytes(`a${i}`)), b.putIfAbsent(key, bytes(`b${i}`))]);
        expect(wa !== wb, key).toBe(true);
        const winner = wa ? `a${i}` : `b${i}`;
        expect(Buffer.from((await b.get(key))!).toString()).toBe(winner);
        expect(Buffer.from((await a.get(key))!).toString()).toBe(winner);
      }
    }, 120_000);

    it('lets exactly one of two S3Client instances create a large key when they race', async () => {
      const prefix = prefixFor('race-large');
      const options = { multipartThreshold: MiB, partSize: 5 * MiB };
      const a = s3Store(env, prefix, { client: newClient(), ...options });
      const b = s3Store(env, prefix, { client: newClient(), ...options });
      const bodyA = pattern(6 * MiB, 5);
      const bodyB = pattern(6 * MiB, 6);
      for (let i = 0; i < 3; i++) {
        const key = `big/${i}`;
        const [wa, wb] = await Promise.all([a.putIfAbsent(key, bodyA), b.putIfAbsent(key, bodyB)]);
        expect([wa, wb].filter(Boolean), key).toHaveLength(1);
        expect(same(await a.get(key), wa ? bodyA : bodyB), key).toBe(true);
      }
      expect(await listUploads(admin, env.bucket, prefix)).toEqual([]);
    }, 180_000);

    it('rejects with STORAGE naming the key when the bucket does not exist', async () => {
      const s = s3Store(
        { ...env, bucket: `statefold-missing-${randomBytes(4).toString('hex')}` },
        prefixFor('nobucket'),
        { client: newClient() },
      );
      const err = await s.get('k/1').catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'STORAGE', key: 'k/1' });
      expect((err as Error).message).toMatch(/^get k\/1: NoSuchBucket \(HTTP 404\)/);
    });
  });
}
