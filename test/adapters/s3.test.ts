import { afterEach, describe, expect, it } from 'vitest';
import { StatefoldError } from 'statefold';
import { S3Store, type S3StoreOptions } from 'statefold/s3';
import { FakeS3, type FakeS3Options } from '../support/s3-http-server.js';

// Behaviours of real servers that cannot be provoked on demand (ignoring If-None-Match, throttling,
// resets, lost answers), served over real HTTP on 127.0.0.1. The store conformance suite and the
// S3-native checks against a real server are in test/integration/s3.test.ts.

const servers: FakeS3[] = [];
const stores: S3Store[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) store.destroy();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function setup(
  serverOptions: FakeS3Options = {},
  storeOptions: Partial<S3StoreOptions> = {},
): Promise<{ server: FakeS3; store: S3Store }> {
  const server = await FakeS3.start(serverOptions);
  servers.push(server);
  const store = new S3Store({
    bucket: 'b',
    endpoint: server.endpoint,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    retryBaseDelayMs: 1,
    retryMaxDelayMs: 5,
    ...storeOptions,
  });
  stores.push(store);
  return { server, store };
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const MiB = 1024 * 1024;
const isPut = (key: string) => (r: { method: string; key: string }) => r.method === 'PUT' && r.key === key;
const isGet = (key: string) => (r: { method: string; key: string }) => r.method === 'GET' && r.key === key;

describe('s3 store: servers that ignore If-None-Match', () => {
  it('refuses to write to a server that overwrites despite If-None-Match: *, with a clear STORAGE error', async () => {
    const { server, store } = await setup({ conditionalPut: false });
    const err = await store.putIfAbsent('s/1', bytes('x')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StatefoldError);
    expect(err).toMatchObject({ code: 'STORAGE', key: 's/1' });
    expect((err as Error).message).toMatch(/^putIfAbsent s\/1: the server ignores If-None-Match: \*/);
    expect((err as Error).message).toContain('unsafeAllowUnconditionalWrites: true');
    expect((err as Error).cause).toBeInstanceOf(Error);
    // Nothing written: not the key, and the probe object was removed.
    expect([...server.objects.keys()]).toEqual([]);
  });

  it('probes once per store and keeps refusing without writing again', async () => {
    const { server, store } = await setup({ conditionalPut: false });
    await expect(store.putIfAbsent('s/1', bytes('x'))).rejects.toMatchObject({ code: 'STORAGE' });
    const puts = server.count('PUT');
    await expect(store.putIfAbsent('s/2', bytes('x'))).rejects.toMatchObject({ code: 'STORAGE' });
    expect(server.count('PUT')).toBe(puts);
    expect(puts).toBe(2);
  });

  it('writes to such a server when unsafeAllowUnconditionalWrites is true, still sending If-None-Match: *', async () => {
    const { server, store } = await setup({ conditionalPut: false }, { unsafeAllowUnconditionalWrites: true });
    expect(await store.putIfAbsent('s/1', bytes('x'))).toBe(true);
    expect(server.count('PUT')).toBe(1);
    expect(server.requests[0]!.headers['if-none-match']).toBe('*');
  });

  it('checks a conditional server once, with a probe key that list never shows, then writes directly', async () => {
    const { server, store } = await setup({}, { prefix: 'p' });
    for (const n of [1, 2, 3]) expect(await store.putIfAbsent(`s/${n}`, bytes('x'))).toBe(true);
    expect(server.count('PUT')).toBe(2 + 3);
    expect(server.count('DELETE', 'p/#statefold-probe/')).toBe(1);
    expect([...server.objects.keys()].sort()).toEqual(['p/s/1', 'p/s/2', 'p/s/3']);
    expect(await store.list('')).toEqual(['s/1', 's/2', 's/3']);
  });
});

describe('s3 store: retries', () => {
  it('retries 503 SlowDown with backoff and succeeds', async () => {
    const { server, store } = await setup({}, { unsafeAllowUnconditionalWrites: true });
    server.failNext(isPut('k/1'), { kind: 'status', status: 503, code: 'SlowDown' }, 2);
    expect(await store.putIfAbsent('k/1', bytes('x'))).toBe(true);
    expect(server.count('PUT', 'k/1')).toBe(3);
  });

  it('rejects with STORAGE naming the operation, key and cause after the last try', async () => {
    const { server, store } = await setup({}, { maxAttempts: 3 });
    server.failNext(isGet('k/1'), { kind: 'status', status: 503, code: 'SlowDown' }, 10);
    const err = (await store.get('k/1').catch((e: unknown) => e)) as StatefoldError;
    expect(err).toMatchObject({ code: 'STORAGE', key: 'k/1' });
    expect(err.message).toBe('get k/1: SlowDown (HTTP 503): SlowDown from the test server (after 3 tries)');
    expect((err.cause as Error).name).toBe('SlowDown');
    expect(server.count('GET', 'k/1')).toBe(3);
  });

  it('retries 500 InternalError and connection resets', async () => {
    const { server, store } = await setup({}, { unsafeAllowUnconditionalWrites: true });
    await store.putIfAbsent('k/1', bytes('abc'));
    server.failNext(isGet('k/1'), { kind: 'status', status: 500, code: 'InternalError' });
    server.failNext(isGet('k/1'), { kind: 'reset' });
    expect(Buffer.from((await store.get('k/1'))!).toString()).toBe('abc');
    expect(server.count('GET', 'k/1')).toBe(3);
  });

  it('does not retry a client error such as 403 AccessDenied', async () => {
    const { server, store } = await setup();
    server.failNext(isGet('k/1'), { kind: 'status', status: 403, code: 'AccessDenied' });
    await expect(store.get('k/1')).rejects.toMatchObject({
      code: 'STORAGE',
      message: 'get k/1: AccessDenied (HTTP 403): AccessDenied from the test server',
    });
    expect(server.count('GET', 'k/1')).toBe(1);
  });

  it('resolves false when a write landed, its answer was lost, and the retry gets 412', async () => {
    const { server, store } = await setup({}, { unsafeAllowUnconditionalWrites: true });
    server.failNext(isPut('k/1'), { kind: 'reset-after' });
    expect(await store.putIfAbsent('k/1', bytes('mine'))).toBe(false);
    expect(server.count('PUT', 'k/1')).toBe(2);
    expect(Buffer.from((await store.get('k/1'))!).toString()).toBe('mine');
  });

  it('gives up on a try that does not answer within requestTimeoutMs and retries it', async () => {
    const { server, store } = await setup({}, { requestTimeoutMs: 200, unsafeAllowUnconditionalWrites: true });
    await store.putIfAbsent('k/1', bytes('abc'));
    server.failNext(isGet('k/1'), { kind: 'hang' });
    const started = Date.now();
    expect(Buffer.from((await store.get('k/1'))!).toString()).toBe('abc');
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(server.count('GET', 'k/1')).toBe(2);
  });

  it('keeps a requestTimeoutMs longer than 2^31-1 ms: with 3e9, requests that take 50 ms succeed', async () => {
    // AbortSignal.timeout of more than 2^31-1 ms aborts after 1 ms: every try used to give up.
    const { server, store } = await setup({}, { requestTimeoutMs: 3e9, maxAttempts: 1 });
    server.failNext(() => true, { kind: 'delay', ms: 50 }, Infinity);
    expect(await store.putIfAbsent('k/1', bytes('abc'))).toBe(true);
    expect(Buffer.from((await store.get('k/1'))!).toString()).toBe('abc');
    expect(await store.list('k/')).toEqual(['k/1']);
    await store.delete('k/1');
    expect(await store.get('k/1')).toBeUndefined();
    expect(server.count('GET', 'k/1')).toBe(2);
  });

  it('stops at once when the caller aborts, with the reason as cause', async () => {
    const { server, store } = await setup();
    server.failNext(isGet('k/1'), { kind: 'hang' }, 10);
    const controller = new AbortController();
    const reason = new Error('agent shutting down');
    setTimeout(() => controller.abort(reason), 100);
    const started = Date.now();
    const err = (await store.get('k/1', { signal: controller.signal }).catch((e: unknown) => e)) as StatefoldError;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(err).toMatchObject({
      code: 'ABORTED',
      key: 'k/1',
      message: "get k/1: aborted by the caller's signal (agent shutting down)",
    });
    expect(err.cause).toBe(reason);
    expect(server.count('GET', 'k/1')).toBe(1);
  });

  it("lets one writer abort while waiting for the shared probe without failing another writer's", async () => {
    const { server, store } = await setup({}, { requestTimeoutMs: 300 });
    // The probe's first write hangs: it times out and is retried.
    server.failNext((r) => r.method === 'PUT' && r.key.startsWith('#statefold-probe/'), { kind: 'hang' });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('stop')), 50);
    const [a, b] = await Promise.allSettled([
      store.putIfAbsent('a/1', bytes('a'), { signal: controller.signal }),
      store.putIfAbsent('b/1', bytes('b')),
    ]);
    expect(a).toMatchObject({
      status: 'rejected',
      reason: { code: 'ABORTED', key: 'a/1', message: "putIfAbsent a/1: aborted by the caller's signal (stop)" },
    });
    expect(b).toEqual({ status: 'fulfilled', value: true });
    expect([...server.objects.keys()]).toEqual(['b/1']);
  });

  it('rejects at once with an already aborted signal, touching nothing', async () => {
    const { server, store } = await setup();
    const signal = AbortSignal.abort(new Error('stop'));
    await expect(store.putIfAbsent('k/1', bytes('x'), { signal })).rejects.toMatchObject({
      code: 'ABORTED',
      key: 'k/1',
    });
    await expect(store.list('k/', { signal })).rejects.toMatchObject({ code: 'ABORTED' });
    expect(server.requests).toEqual([]);
  });
});

describe('s3 store: missing objects and listing', () => {
  it('maps 404 on get to undefined and on delete to a quiet resolve', async () => {
    const { store } = await setup({ deleteMissing404: true });
    expect(await store.get('no/such')).toBeUndefined();
    await expect(store.delete('no/such')).resolves.toBeUndefined();
  });

  it('pages through continuation tokens, honouring startAfter across pages', async () => {
    const { server, store } = await setup({ pageSize: 3 }, { prefix: 'root/', unsafeAllowUnconditionalWrites: true });
    const keys = Array.from({ length: 10 }, (_, i) => `l/${String(i).padStart(2, '0')}`);
    for (const key of keys) await store.putIfAbsent(key, bytes(key));
    await store.putIfAbsent('m/00', bytes('other'));
    expect(await store.list('l/')).toEqual(keys);
    expect(await store.list('l/', { startAfter: 'l/04' })).toEqual(keys.slice(5));
    expect(
      server.requests
        .filter((r) => r.query.get('list-type') === '2')
        .at(-1)!
        .query.get('continuation-token'),
    ).not.toBeNull();
    // StartAfter goes to the server with the store's prefix prepended.
    const first = server.requests.find((r) => r.query.get('start-after') !== null)!;
    expect(first.query.get('start-after')).toBe('root/l/04');
  });

  it('goes on after the last key when a truncated page carries no continuation token', async () => {
    const { store } = await setup({ pageSize: 2, listWithoutToken: true }, { unsafeAllowUnconditionalWrites: true });
    const keys = ['a/1', 'a/2', 'a/3', 'a/4', 'a/5'];
    for (const key of keys) await store.putIfAbsent(key, bytes(key));
    expect(await store.list('a/')).toEqual(keys);
    expect(await store.list('a/', { startAfter: 'a/1' })).toEqual(keys.slice(1));
  });

  it('does not list objects under the prefix that are not store keys', async () => {
    const { server, store } = await setup({}, { prefix: 'p/' });
    server.objects.set('p/ok/1', Buffer.from('x'));
    server.objects.set('p/ok/has space', Buffer.from('x'));
    server.objects.set('p/#statefold-probe/abc', Buffer.from('x'));
    server.objects.set('other/ok/2', Buffer.from('x'));
    expect(await store.list('')).toEqual(['ok/1']);
  });
});

describe('s3 store: multipart uploads', () => {
  const big = (size: number, seed: number): Uint8Array =>
    Uint8Array.from({ length: size }, (_, i) => (i * 31 + seed) & 0xff);

  it('uploads a body over the threshold in parts, completing with If-None-Match: *', async () => {
    const { server, store } = await setup({}, { multipartThreshold: MiB, partSize: 5 * MiB });
    const body = big(11 * MiB + 5, 1);
    expect(await store.putIfAbsent('big/1', body)).toBe(true);
    const parts = server.requests.filter((r) => r.method === 'PUT' && r.key === 'big/1' && r.query.has('partNumber'));
    expect(parts.map((r) => Number(r.query.get('partNumber'))).sort()).toEqual([1, 2, 3]);
    const complete = server.requests.find((r) => r.method === 'POST' && r.key === 'big/1' && r.query.has('uploadId'))!;
    expect(complete.headers['if-none-match']).toBe('*');
    expect(Buffer.compare(server.objects.get('big/1')!, Buffer.from(body))).toBe(0);
    expect(server.uploads.size).toBe(0);
  });

  it('resolves false and aborts the upload when the completion gets 412', async () => {
    const { server, store } = await setup({}, { multipartThreshold: MiB, partSize: 5 * MiB });
    expect(await store.putIfAbsent('big/1', big(6 * MiB, 1))).toBe(true);
    expect(await store.putIfAbsent('big/1', big(6 * MiB, 2))).toBe(false);
    expect(server.uploads.size).toBe(0);
    expect(server.objects.get('big/1')![0]).toBe(1);
  });

  it('aborts the upload when a part fails for good', async () => {
    const { server, store } = await setup({}, { multipartThreshold: MiB, partSize: 5 * MiB, maxAttempts: 2 });
    server.failNext((r) => r.method === 'PUT' && r.key === 'big/1' && r.query.get('partNumber') === '2', {
      kind: 'status',
      status: 400,
      code: 'InvalidPart',
    });
    await expect(store.putIfAbsent('big/1', big(11 * MiB, 1))).rejects.toMatchObject({ code: 'STORAGE', key: 'big/1' });
    expect(server.count('POST', 'big/1')).toBe(1); // created, never completed
    expect(server.count('DELETE', 'big/1')).toBe(1);
    expect(server.uploads.size).toBe(0);
    expect(server.objects.has('big/1')).toBe(false);
  });

  it('resolves false when a retried completion finds its upload gone and the object there', async () => {
    const { server, store } = await setup(
      { conditionalComplete: false },
      { multipartThreshold: MiB, partSize: 5 * MiB, unsafeAllowUnconditionalWrites: true },
    );
    server.failNext((r) => r.method === 'POST' && r.key === 'big/1' && r.query.has('uploadId'), {
      kind: 'reset-after',
    });
    expect(await store.putIfAbsent('big/1', big(6 * MiB, 3))).toBe(false);
    expect(server.objects.get('big/1')![0]).toBe(3);
    expect(server.uploads.size).toBe(0);
    expect(server.count('DELETE', 'big/1')).toBe(0);
  });

  it('sends large bodies as one conditional PutObject to a server whose completion ignores If-None-Match', async () => {
    const { server, store } = await setup(
      { conditionalComplete: false },
      { multipartThreshold: MiB, partSize: 5 * MiB },
    );
    expect(await store.putIfAbsent('big/1', big(6 * MiB, 1))).toBe(true);
    expect(await store.putIfAbsent('big/1', big(6 * MiB, 2))).toBe(false);
    expect(server.objects.get('big/1')![0]).toBe(1);
    // The one multipart upload was the probe's, on the probe key; it was aborted, and the probe removed.
    expect(server.requests.filter((r) => r.method === 'POST' && r.query.has('uploads')).map((r) => r.key)).toEqual([
      expect.stringMatching(/^#statefold-probe\//),
    ]);
    expect(server.uploads.size).toBe(0);
    expect([...server.objects.keys()]).toEqual(['big/1']);
  });
});

describe('s3 store: options', () => {
  it('rejects a missing bucket, a bad prefix or a part size under 5 MiB with INVALID_ARGUMENT', () => {
    expect(() => new S3Store({} as never)).toThrowError(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => new S3Store({ bucket: 'b', prefix: '../x' })).toThrowError(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => new S3Store({ bucket: 'b', partSize: MiB })).toThrowError(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => new S3Store({ bucket: 'b', maxAttempts: 0 })).toThrowError(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it('rejects option values that are not even strings or numbers with INVALID_ARGUMENT, not a TypeError', () => {
    expect(() => new S3Store({ bucket: 'b', prefix: 1n as never })).toThrowError(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: 'new S3Store: options.prefix 1n (a bigint) is not a string',
      }),
    );
    expect(() => new S3Store({ bucket: 'b', requestTimeoutMs: Object.create(null) as never })).toThrowError(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it('stores every key under the prefix, adding the slash', async () => {
    const { server, store } = await setup({}, { prefix: 'team/agents' });
    expect(store.prefix).toBe('team/agents/');
    await store.putIfAbsent('s/1', bytes('x'));
    expect([...server.objects.keys()]).toEqual(['team/agents/s/1']);
    expect(Buffer.from((await store.get('s/1'))!).toString()).toBe('x');
    await store.delete('s/1');
    expect(server.objects.size).toBe(0);
  });
});
