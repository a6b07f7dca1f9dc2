import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type CompletedPart,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import type { ListOptions, Store, StoreOptions } from '../store.js';
import { StatefoldError, describeCause } from '../errors.js';
import { assertKey, assertPrefix, isValidKey, isValidPrefix, throwIfAborted } from '../kit/index.js';

/** Options of `new S3Store(...)`. */
export interface S3StoreOptions {
  /** The bucket that holds the objects; it must exist. */
  bucket: string;
  /**
   * A folder inside the bucket under which every key lives (`agents/` stores key `k` at
   * `agents/k`); a `/` is added when missing. Default: the bucket's root.
   */
  prefix?: string;
  /**
   * Your own client. The store then ignores `endpoint`, `region`, `credentials` and
   * `forcePathStyle`, and retries on top of the client's own retries: build it with
   * `maxAttempts: 1` to leave retries to the store.
   */
  client?: S3Client;
  /** An S3-compatible endpoint such as `http://127.0.0.1:9000` (MinIO, Ceph RGW, R2). Default: AWS. */
  endpoint?: string;
  /** The region. Default: the SDK's (AWS_REGION, config files), or `us-east-1` when `endpoint` is given. */
  region?: string;
  /** Access keys or a provider. Default: the SDK's default credential chain. */
  credentials?: S3ClientConfig['credentials'];
  /** Addresses the bucket in the path, not the host name. Default: `true` when `endpoint` is given. */
  forcePathStyle?: boolean;
  /** Bodies of at least this many bytes go up as multipart uploads. Default 16 MiB. */
  multipartThreshold?: number;
  /** Size of each multipart part but the last; at least 5 MiB (the S3 minimum). Default 8 MiB. */
  partSize?: number;
  /** Parts uploaded at once. Default 4. */
  partConcurrency?: number;
  /** Tries per request (throttling, 5xx, resets, timeouts are retried). Default 5. */
  maxAttempts?: number;
  /** First backoff delay; each retry waits a random time up to base × 2^try (full jitter). Default 100 ms. */
  retryBaseDelayMs?: number;
  /** The longest backoff between two tries. Default 5,000 ms. */
  retryMaxDelayMs?: number;
  /** One try of one request gives up (and is retried) after this long. Default 60,000 ms. */
  requestTimeoutMs?: number;
  /**
   * Skips the check that the server honours `If-None-Match: *`. A server that ignores it
   * (s3rver, fauxqs) overwrites existing objects, so two writers can fork a stream and lose
   * checkpoints. Only for servers you know are safe, or data you can lose. Default `false`.
   */
  unsafeAllowUnconditionalWrites?: boolean;
}

/** The default size from which bodies go up as multipart uploads: 16 MiB. */
export const DEFAULT_MULTIPART_THRESHOLD = 16 * 1024 * 1024;
/** The default multipart part size: 8 MiB. */
export const DEFAULT_PART_SIZE = 8 * 1024 * 1024;
/** The smallest part S3 (and MinIO, Ceph RGW) accepts, except for the last part: 5 MiB. */
export const MIN_PART_SIZE = 5 * 1024 * 1024;

/** The largest body one PutObject takes (S3's limit, and Ceph RGW's default `rgw max put size`): 5 GiB. */
export const MAX_SINGLE_PUT = 5 * 1024 * 1024 * 1024;

/** Marks the conditional-write probe; `#` never occurs in a store key, so list never reports it. */
const PROBE_MARK = '#statefold-probe';

/**
 * A store in an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, Cloudflare R2), so that agents on
 * many machines share one bucket: one object per key, at `<prefix><key>`. Create-if-absent is a
 * PutObject with `If-None-Match: *`, or for bodies from `multipartThreshold` up a multipart upload
 * completed with `If-None-Match: *`; a 412 or a 409 ConditionalRequestConflict resolves `false`.
 * Before its first write the store checks once that the server honours the condition, and refuses
 * to write to one that does not. Before its first large body it checks the same of multipart
 * completion; where that is ignored (Ceph RGW 16) large bodies go up as one conditional PutObject.
 * Failed uploads are aborted; an upload whose creation answer was lost cannot be, so give the
 * bucket a lifecycle rule that aborts incomplete multipart uploads after a day.
 */
export class S3Store implements Store {
  /** The bucket this store writes to. */
  readonly bucket: string;
  /** The folder every key lives under (`''` or ending with `/`). */
  readonly prefix: string;
  /** The client the store sends its requests with. */
  readonly client: S3Client;
  readonly #ownsClient: boolean;
  readonly #multipartThreshold: number;
  readonly #partSize: number;
  readonly #partConcurrency: number;
  readonly #maxAttempts: number;
  readonly #baseDelay: number;
  readonly #maxDelay: number;
  readonly #requestTimeout: number;
  readonly #checkConditional: boolean;
  #probe: Promise<void> | undefined;
  #multipartProbe: Promise<boolean> | undefined;

  constructor(options: S3StoreOptions) {
    if (options === null || typeof options !== 'object' || typeof options.bucket !== 'string' || options.bucket === '') {
      throw invalid('options.bucket must be a non-empty bucket name');
    }
    let prefix = options.prefix ?? '';
    if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
    if (!isValidPrefix(prefix)) throw invalid(`options.prefix ${JSON.stringify(options.prefix)} is not a valid key prefix`);
    this.bucket = options.bucket;
    this.prefix = prefix;
    this.#multipartThreshold = positiveInt(options.multipartThreshold, DEFAULT_MULTIPART_THRESHOLD, 'multipartThreshold');
    this.#partSize = positiveInt(options.partSize, DEFAULT_PART_SIZE, 'partSize');
    if (this.#partSize < MIN_PART_SIZE) throw invalid(`options.partSize must be at least ${MIN_PART_SIZE} (5 MiB, the S3 minimum)`);
    this.#partConcurrency = positiveInt(options.partConcurrency, 4, 'partConcurrency');
    this.#maxAttempts = positiveInt(options.maxAttempts, 5, 'maxAttempts');
    this.#baseDelay = nonNegative(options.retryBaseDelayMs, 100, 'retryBaseDelayMs');
    this.#maxDelay = nonNegative(options.retryMaxDelayMs, 5_000, 'retryMaxDelayMs');
    this.#requestTimeout = positiveInt(options.requestTimeoutMs, 60_000, 'requestTimeoutMs');
    this.#checkConditional = options.unsafeAllowUnconditionalWrites !== true;
    if (options.client !== undefined) {
      this.client = options.client;
      this.#ownsClient = false;
    } else {
      const endpoint = options.endpoint;
      const region = options.region ?? (endpoint !== undefined ? 'us-east-1' : undefined);
      this.client = new S3Client({
        // The store retries itself (with the same classes of errors), so the SDK makes one try.
        maxAttempts: 1,
        ...(endpoint !== undefined && { endpoint }),
        ...(region !== undefined && { region }),
        ...(options.credentials !== undefined && { credentials: options.credentials }),
        forcePathStyle: options.forcePathStyle ?? endpoint !== undefined,
      });
      this.#ownsClient = true;
    }
  }

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    return this.#retry('get', key, options?.signal, async (abortSignal) => {
      let res;
      try {
        res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }), { abortSignal });
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
      // Reading the body is part of the try: a connection reset mid-body is retried as a whole.
      const body = res.Body === undefined ? new Uint8Array(0) : await res.Body.transformToByteArray();
      if (res.ContentLength !== undefined && body.byteLength !== res.ContentLength) {
        throw new TransientError(`truncated body: ${body.byteLength} of ${res.ContentLength} bytes`);
      }
      return body;
    });
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    assertKey('putIfAbsent', key);
    if (!(body instanceof Uint8Array)) {
      throw new StatefoldError('INVALID_ARGUMENT', `putIfAbsent ${key}: body must be a Uint8Array`, { key });
    }
    const signal = options?.signal;
    throwIfAborted('putIfAbsent', key, signal);
    if (this.#checkConditional) await this.#ensureConditionalWrites(key, signal);
    if (body.byteLength >= this.#multipartThreshold) {
      if (!this.#checkConditional || (await this.#multipartIsConditional(key, signal))) {
        return this.#putMultipart('putIfAbsent', key, this.prefix + key, body, signal);
      }
      // This server completes multipart uploads over existing objects (Ceph RGW 16 does): one
      // conditional PutObject, which every such server honours, is the only atomic way up.
      if (body.byteLength > MAX_SINGLE_PUT) {
        throw new StatefoldError(
          'STORAGE',
          `putIfAbsent ${key}: a body of ${body.byteLength} bytes needs a multipart upload, and this server ignores If-None-Match on CompleteMultipartUpload`,
          { key },
        );
      }
    }
    return this.#putObject('putIfAbsent', key, this.prefix + key, body, signal);
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    assertPrefix(prefix);
    const signal = options?.signal;
    const after = options?.startAfter;
    return this.#retry('list', prefix, signal, async (abortSignal) => {
      const keys: string[] = [];
      let token: string | undefined;
      let startAfter = after !== undefined && after >= prefix ? this.prefix + after : undefined;
      // Bounded: each page must move on; a server that repeats itself fails instead of looping.
      for (let page = 0; ; page++) {
        if (page > 1_000_000) throw new Error('listing did not end after 1,000,000 pages');
        const res = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.prefix + prefix,
            ...(token !== undefined ? { ContinuationToken: token } : startAfter !== undefined ? { StartAfter: startAfter } : {}),
          }),
          { abortSignal },
        );
        let last: string | undefined;
        for (const object of res.Contents ?? []) {
          const full = object.Key;
          if (full === undefined || !full.startsWith(this.prefix)) continue;
          last = full;
          const key = full.slice(this.prefix.length);
          // Objects that are not store keys (the probe, foreign objects) are not listed.
          if (!isValidKey(key) || !key.startsWith(prefix) || (after !== undefined && key <= after)) continue;
          keys.push(key);
        }
        if (res.IsTruncated !== true) break;
        if (res.NextContinuationToken !== undefined && res.NextContinuationToken !== token) {
          token = res.NextContinuationToken;
        } else if (last !== undefined && (startAfter === undefined || last > startAfter)) {
          // A server that pages without a token: go on after the last key seen.
          token = undefined;
          startAfter = last;
        } else {
          throw new Error('ListObjectsV2 said the listing was truncated but gave no way to go on');
        }
      }
      // S3 lists in UTF-8 byte order already; sorting and dropping repeats guards against servers that do not.
      keys.sort();
      return keys.filter((k, i) => i === 0 || k !== keys[i - 1]);
    });
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    await this.#retry('delete', key, options?.signal, async (abortSignal) => {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }), { abortSignal });
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
    });
  }

  /** Closes the client's connections when the store built the client; a client you passed is left alone. */
  destroy(): void {
    if (this.#ownsClient) this.client.destroy();
  }

  /** PutObject with `If-None-Match: *`: true when created, false on 412 or 409 ConditionalRequestConflict. */
  async #putObject(op: string, key: string, objectKey: string, body: Uint8Array, signal: AbortSignal | undefined): Promise<boolean> {
    return this.#retry(op, key, signal, async (abortSignal) => {
      try {
        await this.client.send(
          new PutObjectCommand({ Bucket: this.bucket, Key: objectKey, Body: body, ContentLength: body.byteLength, IfNoneMatch: '*' }),
          { abortSignal },
        );
        return true;
      } catch (err) {
        // After a try that may have landed, a retry sees 412 too: the engine reads the object back.
        if (isAlreadyExists(err)) return false;
        throw err;
      }
    });
  }

  /** A multipart upload whose completion carries `If-None-Match: *`; aborted whenever it does not complete. */
  async #putMultipart(op: string, key: string, objectKey: string, body: Uint8Array, signal: AbortSignal | undefined): Promise<boolean> {
    const create = await this.#retry(op, key, signal, (abortSignal) =>
      this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: objectKey }), { abortSignal }),
    );
    const uploadId = create.UploadId;
    if (uploadId === undefined) throw storage(op, key, new Error('CreateMultipartUpload returned no UploadId'), 1);
    let completed = false;
    try {
      const count = Math.ceil(body.byteLength / this.#partSize);
      const parts: CompletedPart[] = new Array(count);
      let next = 0;
      let failed = false;
      const worker = async (): Promise<void> => {
        while (next < count && !failed) {
          const index = next++;
          const chunk = body.subarray(index * this.#partSize, Math.min(body.byteLength, (index + 1) * this.#partSize));
          const res = await this.#retry(op, key, signal, (abortSignal) =>
            this.client.send(
              new UploadPartCommand({
                Bucket: this.bucket,
                Key: objectKey,
                UploadId: uploadId,
                PartNumber: index + 1,
                Body: chunk,
                ContentLength: chunk.byteLength,
              }),
              { abortSignal },
            ),
          );
          if (res.ETag === undefined) throw storage(op, key, new Error(`UploadPart ${index + 1} returned no ETag`), 1);
          parts[index] = { PartNumber: index + 1, ETag: res.ETag };
        }
      };
      // Every worker settles before the upload is aborted: a part still in flight could land after the abort.
      const settled = await Promise.allSettled(
        Array.from({ length: Math.min(this.#partConcurrency, count) }, () =>
          worker().catch((err: unknown) => {
            failed = true;
            throw err;
          }),
        ),
      );
      for (const result of settled) if (result.status === 'rejected') throw result.reason;
      let tries = 0;
      const created = await this.#retry(op, key, signal, async (abortSignal) => {
        tries++;
        try {
          await this.client.send(
            new CompleteMultipartUploadCommand({
              Bucket: this.bucket,
              Key: objectKey,
              UploadId: uploadId,
              MultipartUpload: { Parts: parts },
              IfNoneMatch: '*',
            }),
            { abortSignal },
          );
          return true;
        } catch (err) {
          if (isAlreadyExists(err)) return false;
          // A retried completion whose first try landed finds the upload gone: the object exists.
          if (tries > 1 && errorName(err) === 'NoSuchUpload' && (await this.#exists(objectKey, abortSignal))) {
            completed = true;
            return false;
          }
          throw err;
        }
      });
      if (created) completed = true;
      return created;
    } finally {
      if (!completed) await this.#abortUpload(key, objectKey, uploadId);
    }
  }

  async #exists(objectKey: string, abortSignal: AbortSignal): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey }), { abortSignal });
      return true;
    } catch (err) {
      if (isMissing(err)) return false;
      throw err;
    }
  }

  /** Aborts an upload so that its parts are not left behind; runs even when the caller's signal fired. */
  async #abortUpload(key: string, objectKey: string, uploadId: string): Promise<void> {
    try {
      await this.#retry('abortMultipartUpload', key, AbortSignal.timeout(CLEANUP_TIMEOUT_MS), async (abortSignal) => {
        try {
          await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: objectKey, UploadId: uploadId }), { abortSignal });
        } catch (err) {
          if (errorName(err) !== 'NoSuchUpload') throw err;
        }
      });
    } catch {
      // The original failure is the one to report; a bucket lifecycle rule can clean what is left.
    }
  }

  /**
   * Checks once per store that the server refuses to overwrite: writes a probe object twice with
   * `If-None-Match: *` and expects the second write to be refused.
   */
  async #ensureConditionalWrites(key: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.#probe === undefined) {
      // Shared by concurrent writers, so it runs without any one caller's signal.
      const probe = this.#runProbe();
      this.#probe = probe;
      // A probe that failed for a transient reason is run again by the next write; a refusal sticks.
      probe.catch((err: unknown) => {
        if (!(err instanceof UnconditionalServerError) && this.#probe === probe) this.#probe = undefined;
      });
    }
    try {
      await untilAborted(this.#probe, signal, key);
    } catch (err) {
      if (err instanceof AbortedWait) throw err.error;
      if (err instanceof UnconditionalServerError) {
        throw new StatefoldError('STORAGE', `putIfAbsent ${key}: ${err.message}`, { key, cause: err });
      }
      throw new StatefoldError('STORAGE', `putIfAbsent ${key}: checking that the server honours If-None-Match failed: ${describeCause(err)}`, {
        key,
        cause: err,
      });
    }
  }

  async #runProbe(): Promise<void> {
    const objectKey = this.#probeKey();
    const op = 'probe';
    try {
      await this.#putObject(op, objectKey, objectKey, Uint8Array.of(1), undefined);
      const again = await this.#putObject(op, objectKey, objectKey, Uint8Array.of(2), undefined);
      if (again) {
        throw new UnconditionalServerError(
          `the server ignores If-None-Match: * (it overwrote an existing object in bucket ${this.bucket}), so two writers ` +
            'could fork a stream; use a server with conditional writes (AWS S3, MinIO, Ceph RGW, Cloudflare R2) ' +
            'or pass unsafeAllowUnconditionalWrites: true at your own risk',
        );
      }
    } finally {
      await this.#deleteProbe(objectKey);
    }
  }

  /**
   * Whether the server refuses to complete a multipart upload over an existing object, checked
   * once per store on its first large body: AWS S3 and MinIO refuse; Ceph RGW 16 overwrites.
   */
  async #multipartIsConditional(key: string, signal: AbortSignal | undefined): Promise<boolean> {
    if (this.#multipartProbe === undefined) {
      const probe = this.#runMultipartProbe();
      this.#multipartProbe = probe;
      probe.catch(() => {
        if (this.#multipartProbe === probe) this.#multipartProbe = undefined;
      });
    }
    try {
      return await untilAborted(this.#multipartProbe, signal, key);
    } catch (err) {
      if (err instanceof AbortedWait) throw err.error;
      throw new StatefoldError('STORAGE', `putIfAbsent ${key}: checking that the server honours If-None-Match on multipart uploads failed: ${describeCause(err)}`, {
        key,
        cause: err,
      });
    }
  }

  async #runMultipartProbe(): Promise<boolean> {
    const objectKey = this.#probeKey();
    const op = 'probe';
    try {
      await this.#putObject(op, objectKey, objectKey, Uint8Array.of(1), undefined);
      // A one-part upload (the last part may be small) completed over the object just written.
      const overwrote = await this.#putMultipart(op, objectKey, objectKey, Uint8Array.of(2), undefined);
      return !overwrote;
    } finally {
      await this.#deleteProbe(objectKey);
    }
  }

  #probeKey(): string {
    return `${this.prefix}${PROBE_MARK}/${randomBytes(8).toString('hex')}`;
  }

  async #deleteProbe(objectKey: string): Promise<void> {
    await this.#retry('delete', objectKey, AbortSignal.timeout(CLEANUP_TIMEOUT_MS), (abortSignal) =>
      this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey }), { abortSignal }),
    ).catch(() => undefined);
  }

  /**
   * Runs `attempt` until it succeeds, retrying throttling, 5xx, resets and timeouts with capped
   * exponential backoff and full jitter; rejects with STORAGE naming `op` and `key` after the last try.
   */
  async #retry<T>(op: string, key: string, signal: AbortSignal | undefined, attempt: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    for (let tries = 1; ; tries++) {
      if (signal?.aborted) throw storage(op, key, signal.reason ?? new Error('aborted'), tries - 1);
      const timeout = AbortSignal.timeout(this.#requestTimeout);
      const abortSignal = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
      try {
        return await attempt(abortSignal);
      } catch (err) {
        if (err instanceof StatefoldError) throw err;
        if (signal?.aborted) throw storage(op, key, signal.reason ?? err, tries);
        const cause = timeout.aborted ? new TransientError(`no answer within ${this.#requestTimeout} ms`, { cause: err }) : err;
        if (!isRetryable(cause) || tries >= this.#maxAttempts) throw storage(op, key, cause, tries);
        const delay = Math.random() * Math.min(this.#maxDelay, this.#baseDelay * 2 ** (tries - 1));
        await sleep(delay, signal);
      }
    }
  }
}

/** How long cleanup (aborting an upload, deleting a probe) may take, even after the caller gave up. */
const CLEANUP_TIMEOUT_MS = 30_000;

/** The caller's signal fired while it waited for a shared probe; carries the STORAGE error to throw. */
class AbortedWait extends Error {
  constructor(readonly error: StatefoldError) {
    super(error.message);
  }
}

/** Waits for `promise`, or rejects when `signal` fires first (the promise goes on for others). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, key: string): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new AbortedWait(storage('putIfAbsent', key, signal.reason ?? new Error('aborted'), 0)));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** A failure worth another try that the SDK does not raise itself (a truncated body, a try that timed out). */
class TransientError extends Error {
  override name = 'TransientError';
}

/** The probe saw an overwrite. */
class UnconditionalServerError extends Error {
  override name = 'UnconditionalServerError';
}

function storage(op: string, key: string, cause: unknown, tries: number): StatefoldError {
  const after = tries > 1 ? ` (after ${tries} tries)` : '';
  return new StatefoldError('STORAGE', `${op} ${key}: ${describeS3Error(cause)}${after}`, { key, cause });
}

function invalid(message: string): StatefoldError {
  return new StatefoldError('INVALID_ARGUMENT', `new S3Store: ${message}`);
}

function positiveInt(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) throw invalid(`options.${name} must be a positive integer`);
  return value;
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) throw invalid(`options.${name} must be a non-negative number`);
  return value;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    // An abort ends the wait early; the retry loop then rejects with the signal's reason.
    signal?.addEventListener('abort', done, { once: true });
  });
}

interface S3ErrorShape {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  $retryable?: unknown;
}

function errorName(err: unknown): string | undefined {
  return (err as S3ErrorShape | undefined)?.name;
}

function httpStatus(err: unknown): number | undefined {
  return (err as S3ErrorShape | undefined)?.$metadata?.httpStatusCode;
}

function isMissing(err: unknown): boolean {
  const name = errorName(err);
  return name === 'NoSuchKey' || name === 'NotFound' || (httpStatus(err) === 404 && name !== 'NoSuchBucket' && name !== 'NoSuchUpload');
}

function isAlreadyExists(err: unknown): boolean {
  const status = httpStatus(err);
  const name = errorName(err);
  return status === 412 || name === 'PreconditionFailed' || name === 'ConditionalRequestConflict';
}

const RETRYABLE_NAMES = new Set([
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'RequestTimeout',
  'RequestTimeoutException',
  'InternalError',
  'ServiceUnavailable',
  'TimeoutError',
  'TransientError',
]);

const RETRYABLE_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'UND_ERR_SOCKET']);

function isRetryable(err: unknown): boolean {
  const e = err as S3ErrorShape | undefined;
  if (e === undefined || e === null) return false;
  if (e.name !== undefined && RETRYABLE_NAMES.has(e.name)) return true;
  if (e.code !== undefined && RETRYABLE_CODES.has(e.code)) return true;
  const status = httpStatus(err);
  if (status !== undefined) return status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505);
  if (e.$retryable !== undefined) return true;
  // Errors without an HTTP answer are network failures ("socket hang up") unless the SDK says otherwise.
  return /socket hang up|ECONNRESET|EPIPE|other side closed|network/i.test(e.message ?? '');
}

function describeS3Error(err: unknown): string {
  const e = err as S3ErrorShape | undefined;
  const status = httpStatus(err);
  if (status !== undefined && e?.name !== undefined) {
    const message = e.message !== undefined && e.message !== e.name && e.message !== 'UnknownError' ? `: ${e.message}` : '';
    return `${e.name} (HTTP ${status})${message}`;
  }
  return describeCause(err);
}
