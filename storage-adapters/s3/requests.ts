/** The S3 requests the store, its multipart upload and its probes share, and what they share them through. */
import { DeleteObjectCommand, HeadObjectCommand, PutObjectCommand, type S3Client } from './sdk.js';
import { isAlreadyExists, isMissing } from './errors.js';

/** What the parts of one S3Store share: its client, its bucket, and its retry policy. */
export interface S3Io {
  readonly client: S3Client;
  readonly bucket: string;
  /** Runs `attempt` with the store's retries; rejects with STORAGE naming `op` and `key` after the last try. */
  retry<T>(
    op: string,
    key: string,
    signal: AbortSignal | undefined,
    attempt: (signal: AbortSignal) => Promise<T>,
  ): Promise<T>;
}

/** How long cleanup (aborting an upload, deleting a probe) may take, even after the caller gave up. */
export const CLEANUP_TIMEOUT_MS = 30_000;

/** PutObject with `If-None-Match: *`: true when created, false on 412 or 409 ConditionalRequestConflict. */
export function putObject(
  io: S3Io,
  op: string,
  key: string,
  objectKey: string,
  body: Uint8Array,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  return io.retry(op, key, signal, async (abortSignal) => {
    try {
      await io.client.send(
        new PutObjectCommand({
          Bucket: io.bucket,
          Key: objectKey,
          Body: body,
          ContentLength: body.byteLength,
          IfNoneMatch: '*',
        }),
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

/** Whether an object exists at `objectKey` (one HeadObject, no retries: the caller's try retries). */
export async function objectExists(io: S3Io, objectKey: string, abortSignal: AbortSignal): Promise<boolean> {
  try {
    await io.client.send(new HeadObjectCommand({ Bucket: io.bucket, Key: objectKey }), { abortSignal });
    return true;
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
}

/** Deletes `objectKey` as cleanup: bounded by CLEANUP_TIMEOUT_MS, never rejects. */
export async function deleteQuietly(io: S3Io, objectKey: string): Promise<void> {
  await io
    .retry('delete', objectKey, AbortSignal.timeout(CLEANUP_TIMEOUT_MS), (abortSignal) =>
      io.client.send(new DeleteObjectCommand({ Bucket: io.bucket, Key: objectKey }), { abortSignal }),
    )
    .catch(() => undefined);
}
