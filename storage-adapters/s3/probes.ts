/**
 * The two checks an S3Store makes of its server before trusting it, each run once per store and
 * shared by every writer: does PutObject honour `If-None-Match: *`, and does
 * CompleteMultipartUpload.
 */
import { randomBytes } from 'node:crypto';
import { StatefoldError, describeCause } from '../errors.js';
import { abortedError } from '../kit/index.js';
import { putMultipart, type PartSettings } from './multipart.js';
import { deleteQuietly, putObject, type S3Io } from './requests.js';

/** Marks the probe objects; `#` never occurs in a store key, so list never reports them. */
const PROBE_MARK = '#statefold-probe';

/** The memoised capability probes of one store. */
export class CapabilityProbes {
  readonly #io: S3Io;
  readonly #prefix: string;
  readonly #parts: PartSettings;
  #conditional: Promise<void> | undefined;
  #multipart: Promise<boolean> | undefined;

  constructor(io: S3Io, prefix: string, parts: PartSettings) {
    this.#io = io;
    this.#prefix = prefix;
    this.#parts = parts;
  }

  /**
   * Resolves when the server refuses to overwrite (checked once: a probe object is written twice
   * with `If-None-Match: *` and the second write must be refused); rejects STORAGE naming `key`
   * when it does not, or when the check failed. The caller's `signal` ends only its own wait.
   */
  async ensureConditionalWrites(key: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.#conditional === undefined) {
      // Shared by concurrent writers, so it runs without any one caller's signal.
      const probe = this.#runConditional();
      this.#conditional = probe;
      // A probe that failed for a transient reason is run again by the next write; a refusal sticks.
      probe.catch((err: unknown) => {
        if (!(err instanceof UnconditionalServerError) && this.#conditional === probe) this.#conditional = undefined;
      });
    }
    try {
      await untilAborted(this.#conditional, signal, key);
    } catch (err) {
      if (err instanceof AbortedWait) throw err.error;
      if (err instanceof UnconditionalServerError) {
        throw new StatefoldError('STORAGE', `putIfAbsent ${key}: ${err.message}`, { key, cause: err });
      }
      throw new StatefoldError(
        'STORAGE',
        `putIfAbsent ${key}: checking that the server honours If-None-Match failed: ${describeCause(err)}`,
        {
          key,
          cause: err,
        },
      );
    }
  }

  /**
   * Whether the server refuses to complete a multipart upload over an existing object, checked
   * once per store on its first large body: AWS S3 and MinIO refuse; Ceph RGW 16 overwrites.
   */
  async multipartIsConditional(key: string, signal: AbortSignal | undefined): Promise<boolean> {
    if (this.#multipart === undefined) {
      const probe = this.#runMultipart();
      this.#multipart = probe;
      probe.catch(() => {
        if (this.#multipart === probe) this.#multipart = undefined;
      });
    }
    try {
      return await untilAborted(this.#multipart, signal, key);
    } catch (err) {
      if (err instanceof AbortedWait) throw err.error;
      throw new StatefoldError(
        'STORAGE',
        `putIfAbsent ${key}: checking that the server honours If-None-Match on multipart uploads failed: ${describeCause(err)}`,
        {
          key,
          cause: err,
        },
      );
    }
  }

  async #runConditional(): Promise<void> {
    const objectKey = this.#probeKey();
    const op = 'probe';
    try {
      await putObject(this.#io, op, objectKey, objectKey, Uint8Array.of(1), undefined);
      const again = await putObject(this.#io, op, objectKey, objectKey, Uint8Array.of(2), undefined);
      if (again) {
        throw new UnconditionalServerError(
          `the server ignores If-None-Match: * (it overwrote an existing object in bucket ${this.#io.bucket}), so two writers ` +
            'could fork a stream; use a server with conditional writes (AWS S3, MinIO, Ceph RGW, Cloudflare R2) ' +
            'or pass unsafeAllowUnconditionalWrites: true at your own risk',
        );
      }
    } finally {
      await deleteQuietly(this.#io, objectKey);
    }
  }

  async #runMultipart(): Promise<boolean> {
    const objectKey = this.#probeKey();
    const op = 'probe';
    try {
      await putObject(this.#io, op, objectKey, objectKey, Uint8Array.of(1), undefined);
      // A one-part upload (the last part may be small) completed over the object just written.
      const overwrote = await putMultipart(
        this.#io,
        this.#parts,
        op,
        objectKey,
        objectKey,
        Uint8Array.of(2),
        undefined,
      );
      return !overwrote;
    } finally {
      await deleteQuietly(this.#io, objectKey);
    }
  }

  #probeKey(): string {
    return `${this.#prefix}${PROBE_MARK}/${randomBytes(8).toString('hex')}`;
  }
}

/** The probe saw an overwrite. */
class UnconditionalServerError extends Error {
  override name = 'UnconditionalServerError';
}

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
    const onAbort = (): void => reject(new AbortedWait(abortedError('putIfAbsent', key, signal.reason)));
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
