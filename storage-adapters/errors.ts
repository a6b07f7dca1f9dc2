import { StatefoldError, describeCause } from '../engine/errors.js';
import { isValidKey, isValidPrefix } from './store.js';

/** Rejects a malformed key before any store touches storage. */
export function assertKey(op: string, key: string): void {
  if (!isValidKey(key)) {
    throw new StatefoldError('INVALID_ARGUMENT', `${op} ${JSON.stringify(key)}: not a valid store key ('/'-separated segments of [A-Za-z0-9._~-], at most 1,024 bytes)`, { key });
  }
}

/** Rejects a malformed list prefix. */
export function assertPrefix(prefix: string): void {
  if (!isValidPrefix(prefix)) {
    throw new StatefoldError('INVALID_ARGUMENT', `list ${JSON.stringify(prefix)}: not a valid key prefix`, { key: prefix });
  }
}

/** Wraps a store failure as a STORAGE error that names the operation and key. */
export function storageError(op: string, key: string, cause: unknown): StatefoldError {
  if (cause instanceof StatefoldError) return cause;
  return new StatefoldError('STORAGE', `${op} ${key}: ${describeCause(cause)}`, { key, cause });
}

/** Throws the signal's reason as a STORAGE error when `signal` is aborted. */
export function throwIfAborted(op: string, key: string, signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw storageError(op, key, signal.reason ?? new Error('aborted'));
}
