/**
 * The engine's errors: the one error type (it lives with the stores, the bottom of the dependency
 * graph) and the factories that give every message one shape, `op stream seq (key): why`, so that
 * a reader finds what failed, where, and why in the same place each time.
 */
import { StatefoldError, describeCause, isStatefoldError, type ErrorCode } from '../storage-adapters/errors.js';

export * from '../storage-adapters/errors.js';

/** Where a failure happened: the operation, the stream, and the seq and key when there are. */
export interface Where {
  op?: string;
  stream: string;
  seq?: number | undefined;
  key?: string | undefined;
}

/** A StatefoldError whose message reads `op stream seq (key): why` (the parts that are known). */
export function failure(code: ErrorCode, where: Where, why: string, cause?: unknown): StatefoldError {
  const { op, stream, seq, key } = where;
  const at =
    `${op === undefined ? '' : `${op} `}stream ${JSON.stringify(stream)}` +
    `${seq === undefined ? '' : ` seq ${seq}`}${key === undefined ? '' : ` (${key})`}`;
  return new StatefoldError(code, `${at}: ${why}`, {
    stream,
    ...(seq !== undefined && { seq }),
    ...(key !== undefined && { key }),
    ...(cause !== undefined && { cause }),
  });
}

/** A CORRUPT error naming stream, seq and key, and why. */
export function corrupt(stream: string, seq: number, key: string, why: string, cause?: unknown): StatefoldError {
  return failure('CORRUPT', { stream, seq, key }, why, cause);
}

/** An UNSUPPORTED error (an intact frame of a newer format) naming stream, seq and key, and why. */
export function unsupported(stream: string, seq: number, key: string, why: string): StatefoldError {
  return failure('UNSUPPORTED', { stream, seq, key }, `${why}: written by a newer statefold? upgrade to read it`);
}

/** A store failure during `op` as a STORAGE error naming stream, seq and key; other StatefoldErrors pass through. */
export function wrapStorage(err: unknown, stream: string, seq: number, key: string, op: string): StatefoldError {
  if (isStatefoldError(err) && err.code !== 'STORAGE') return err;
  return failure('STORAGE', { op, stream, seq, key }, describeCause(err), err);
}
