import { StatefoldError, describeCause } from '../errors.js';

/** Wraps a store failure as a STORAGE error that names the operation and key. */
export function storageError(op: string, key: string, cause: unknown): StatefoldError {
  if (cause instanceof StatefoldError) return cause;
  return new StatefoldError('STORAGE', `${op} ${key}: ${describeCause(cause)}`, { key, cause });
}

/** Throws the signal's reason as a STORAGE error when `signal` is aborted. */
export function throwIfAborted(op: string, key: string, signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw storageError(op, key, signal.reason ?? new Error('aborted'));
}
