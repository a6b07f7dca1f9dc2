import { StatefoldError, describeCause } from '../errors.js';

/** Wraps a store failure as a STORAGE error that names the operation and key. */
export function storageError(op: string, key: string, cause: unknown): StatefoldError {
  if (cause instanceof StatefoldError) return cause;
  return new StatefoldError('STORAGE', `${op} ${key}: ${describeCause(cause)}`, { key, cause });
}

/** The ABORTED error of an operation the caller's signal cancelled, with the signal's reason as cause. */
export function abortedError(op: string, key: string, reason: unknown): StatefoldError {
  const cause = reason ?? new Error('aborted');
  return new StatefoldError('ABORTED', `${op} ${key}: aborted by the caller's signal (${describeCause(cause)})`, {
    key,
    cause,
  });
}

/** Throws ABORTED, with the signal's reason as cause, when `signal` is aborted. */
export function throwIfAborted(op: string, key: string, signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortedError(op, key, signal.reason);
}
