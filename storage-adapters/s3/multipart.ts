/** Multipart upload for large bodies, completed only if no object exists, and aborted whenever it does not complete. */
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  type CompletedPart,
} from './sdk.js';
import { errorName, isAlreadyExists, storage } from './errors.js';
import { CLEANUP_TIMEOUT_MS, objectExists, type S3Io } from './requests.js';

/** How a body is cut into parts and how many go up at once. */
export interface PartSettings {
  /** Size of each part but the last. */
  partSize: number;
  /** Parts uploaded at once. */
  partConcurrency: number;
}

/**
 * A multipart upload whose completion carries `If-None-Match: *`: true when it created the
 * object, false when one was already there. Every failure (and every `false`) aborts the upload.
 */
export async function putMultipart(
  io: S3Io,
  settings: PartSettings,
  op: string,
  key: string,
  objectKey: string,
  body: Uint8Array,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const create = await io.retry(op, key, signal, (abortSignal) =>
    io.client.send(new CreateMultipartUploadCommand({ Bucket: io.bucket, Key: objectKey }), { abortSignal }),
  );
  const uploadId = create.UploadId;
  if (uploadId === undefined) throw storage(op, key, new Error('CreateMultipartUpload returned no UploadId'), 1);
  let completed = false;
  try {
    const parts = await uploadParts(io, settings, op, key, objectKey, uploadId, body, signal);
    let tries = 0;
    const created = await io.retry(op, key, signal, async (abortSignal) => {
      tries++;
      try {
        await io.client.send(
          new CompleteMultipartUploadCommand({
            Bucket: io.bucket,
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
        if (tries > 1 && errorName(err) === 'NoSuchUpload' && (await objectExists(io, objectKey, abortSignal))) {
          completed = true;
          return false;
        }
        throw err;
      }
    });
    if (created) completed = true;
    return created;
  } finally {
    if (!completed) await abortUpload(io, key, objectKey, uploadId);
  }
}

/** Uploads the parts, `partConcurrency` at a time; resolves their numbers and ETags in order. */
async function uploadParts(
  io: S3Io,
  settings: PartSettings,
  op: string,
  key: string,
  objectKey: string,
  uploadId: string,
  body: Uint8Array,
  signal: AbortSignal | undefined,
): Promise<CompletedPart[]> {
  const { partSize } = settings;
  const count = Math.ceil(body.byteLength / partSize);
  const parts: CompletedPart[] = new Array(count);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (next < count && !failed) {
      const index = next++;
      const chunk = body.subarray(index * partSize, Math.min(body.byteLength, (index + 1) * partSize));
      const res = await io.retry(op, key, signal, (abortSignal) =>
        io.client.send(
          new UploadPartCommand({
            Bucket: io.bucket,
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
  // Every worker settles before the caller aborts the upload: a part still in flight could land after the abort.
  const settled = await Promise.allSettled(
    Array.from({ length: Math.min(settings.partConcurrency, count) }, () =>
      worker().catch((err: unknown) => {
        failed = true;
        throw err;
      }),
    ),
  );
  for (const result of settled) if (result.status === 'rejected') throw result.reason;
  return parts;
}

/** Aborts an upload so that its parts are not left behind; runs even when the caller's signal fired. */
async function abortUpload(io: S3Io, key: string, objectKey: string, uploadId: string): Promise<void> {
  try {
    await io.retry('abortMultipartUpload', key, AbortSignal.timeout(CLEANUP_TIMEOUT_MS), async (abortSignal) => {
      try {
        await io.client.send(
          new AbortMultipartUploadCommand({ Bucket: io.bucket, Key: objectKey, UploadId: uploadId }),
          { abortSignal },
        );
      } catch (err) {
        if (errorName(err) !== 'NoSuchUpload') throw err;
      }
    });
  } catch {
    // The original failure is the one to report; a bucket lifecycle rule can clean what is left.
  }
}
