/**
 * How the S3 store reads the SDK's errors: which mean "missing", which mean "already exists",
 * which are worth another try, and how to describe one in a message.
 */
import { describeCause, type StatefoldError } from '../errors.js';
import { retryError } from '../kit/index.js';

/** The fields of an SDK error (or a network error) the store looks at. */
interface S3ErrorShape {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  $retryable?: unknown;
}

/** The error's name as the SDK gives it (`NoSuchKey`, `SlowDown`, ...). */
export function errorName(err: unknown): string | undefined {
  return (err as S3ErrorShape | undefined)?.name;
}

function httpStatus(err: unknown): number | undefined {
  return (err as S3ErrorShape | undefined)?.$metadata?.httpStatusCode;
}

/** True when the object is not there (404, NoSuchKey), but not when the bucket or upload is missing. */
export function isMissing(err: unknown): boolean {
  const name = errorName(err);
  return (
    name === 'NoSuchKey' ||
    name === 'NotFound' ||
    (httpStatus(err) === 404 && name !== 'NoSuchBucket' && name !== 'NoSuchUpload')
  );
}

/** True when a conditional write was refused because the object exists (412, or 409 ConditionalRequestConflict). */
export function isAlreadyExists(err: unknown): boolean {
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

const RETRYABLE_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
]);

/** True for throttling, 5xx (but 501 and 505), 408, 429, connection resets and other network failures. */
export function isRetryable(err: unknown): boolean {
  const e = err as S3ErrorShape | undefined;
  if (e === undefined || e === null) return false;
  if (e.name !== undefined && RETRYABLE_NAMES.has(e.name)) return true;
  if (e.code !== undefined && RETRYABLE_CODES.has(e.code)) return true;
  const status = httpStatus(err);
  if (status !== undefined)
    return status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505);
  if (e.$retryable !== undefined) return true;
  // Errors without an HTTP answer are network failures ("socket hang up") unless the SDK says otherwise.
  return /socket hang up|ECONNRESET|EPIPE|other side closed|network/i.test(e.message ?? '');
}

/** Short text of an SDK error: `Name (HTTP status): message`, or the message of any other error. */
export function describeS3Error(err: unknown): string {
  const e = err as S3ErrorShape | undefined;
  const status = httpStatus(err);
  if (status !== undefined && e?.name !== undefined) {
    const message =
      e.message !== undefined && e.message !== e.name && e.message !== 'UnknownError' ? `: ${e.message}` : '';
    return `${e.name} (HTTP ${status})${message}`;
  }
  return describeCause(err);
}

/** The STORAGE error an S3 request ends with: `op key: <S3 error>`, plus `(after N tries)` when it took more than one. */
export function storage(op: string, key: string, cause: unknown, tries: number): StatefoldError {
  return retryError(op, key, cause, tries, describeS3Error);
}
