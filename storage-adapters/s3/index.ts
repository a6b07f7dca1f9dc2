/**
 * S3Store: checkpoints on S3-compatible object storage (AWS S3, MinIO, Ceph RGW, R2), committed with
 * conditional writes. Needs `@aws-sdk/client-s3`, an optional peer dependency: without it, importing
 * `statefold/s3` fails with one message that says what to install.
 * @module statefold/s3
 */
import type { ListOptions, Store, StoreOptions } from '../store.js';
import { StatefoldError, describeValue } from '../errors.js';
import {
  assertKey,
  assertPrefix,
  isValidKey,
  isValidPrefix,
  retry,
  throwIfAborted,
  TransientError,
  type RetryPolicy,
} from '../kit/index.js';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, S3Client, type S3ClientConfig } from './sdk.js';
import { describeS3Error, isMissing, isRetryable } from './errors.js';
import { putMultipart, type PartSettings } from './multipart.js';
import { CapabilityProbes } from './probes.js';
import { putObject, type S3Io } from './requests.js';

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
  readonly #parts: PartSettings;
  readonly #checkConditional: boolean;
  readonly #io: S3Io;
  readonly #probes: CapabilityProbes;

  constructor(options: S3StoreOptions) {
    if (
      options === null ||
      typeof options !== 'object' ||
      typeof options.bucket !== 'string' ||
      options.bucket === ''
    ) {
      throw invalid('options.bucket must be a non-empty bucket name');
    }
    let prefix = options.prefix ?? '';
    if (typeof prefix !== 'string') throw invalid(`options.prefix ${describeValue(prefix)} is not a string`);
    if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
    if (!isValidPrefix(prefix))
      throw invalid(`options.prefix ${JSON.stringify(options.prefix)} is not a valid key prefix`);
    this.bucket = options.bucket;
    this.prefix = prefix;
    this.#multipartThreshold = positiveInt(
      options.multipartThreshold,
      DEFAULT_MULTIPART_THRESHOLD,
      'multipartThreshold',
    );
    const partSize = positiveInt(options.partSize, DEFAULT_PART_SIZE, 'partSize');
    if (partSize < MIN_PART_SIZE)
      throw invalid(`options.partSize must be at least ${MIN_PART_SIZE} (5 MiB, the S3 minimum)`);
    this.#parts = { partSize, partConcurrency: positiveInt(options.partConcurrency, 4, 'partConcurrency') };
    const policy: RetryPolicy = {
      maxAttempts: positiveInt(options.maxAttempts, 5, 'maxAttempts'),
      baseDelayMs: nonNegative(options.retryBaseDelayMs, 100, 'retryBaseDelayMs'),
      maxDelayMs: nonNegative(options.retryMaxDelayMs, 5_000, 'retryMaxDelayMs'),
      tryTimeoutMs: positiveInt(options.requestTimeoutMs, 60_000, 'requestTimeoutMs'),
      isRetryable,
      describe: describeS3Error,
    };
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
    this.#io = {
      client: this.client,
      bucket: this.bucket,
      retry: (op, key, signal, attempt) => retry(policy, op, key, signal, attempt),
    };
    this.#probes = new CapabilityProbes(this.#io, this.prefix, this.#parts);
  }

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    return this.#io.retry('get', key, options?.signal, async (abortSignal) => {
      let res;
      try {
        res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }), {
          abortSignal,
        });
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
    if (this.#checkConditional) await this.#probes.ensureConditionalWrites(key, signal);
    if (body.byteLength >= this.#multipartThreshold) {
      if (!this.#checkConditional || (await this.#probes.multipartIsConditional(key, signal))) {
        return putMultipart(this.#io, this.#parts, 'putIfAbsent', key, this.prefix + key, body, signal);
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
    return putObject(this.#io, 'putIfAbsent', key, this.prefix + key, body, signal);
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    assertPrefix(prefix, options?.limit);
    const signal = options?.signal;
    const after = options?.startAfter;
    const limit = options?.limit;
    return this.#io.retry('list', prefix, signal, async (abortSignal) => {
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
            // A page no longer than the caller asked for (objects that are not keys may shorten it: it then goes on).
            ...(limit !== undefined ? { MaxKeys: Math.min(1000, limit - keys.length) } : {}),
            ...(token !== undefined
              ? { ContinuationToken: token }
              : startAfter !== undefined
                ? { StartAfter: startAfter }
                : {}),
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
        if (res.IsTruncated !== true || (limit !== undefined && keys.length >= limit)) break;
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
      const unique = keys.filter((k, i) => i === 0 || k !== keys[i - 1]);
      return limit !== undefined && unique.length > limit ? unique.slice(0, limit) : unique;
    });
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    await this.#io.retry('delete', key, options?.signal, async (abortSignal) => {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }), {
          abortSignal,
        });
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
    });
  }

  /**
   * Nothing to remove: a bucket holds objects, which are keys, and no directories. A multipart
   * upload that fails is aborted by putIfAbsent; one whose creation answer was lost, or that a
   * crashed process left, is the bucket lifecycle rule's (see above): listing and aborting
   * uploads here could abort one that another writer has in flight.
   */
  async removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    throwIfAborted('removeLeftovers', prefix, options?.signal);
  }

  /** Closes the client's connections when the store built the client; a client you passed is left alone. */
  destroy(): void {
    if (this.#ownsClient) this.client.destroy();
  }
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
