import { StatefoldError, describeValue } from '../errors.js';

const KEY_SEGMENT = /^[A-Za-z0-9._~-]+$/;

/** Checks that `key` is a well-formed store key, as every store must before touching storage. */
export function isValidKey(key: string): boolean {
  if (typeof key !== 'string' || key.length === 0 || Buffer.byteLength(key) > 1024) return false;
  for (const segment of key.split('/')) {
    if (!KEY_SEGMENT.test(segment) || segment === '.' || segment === '..') return false;
  }
  return true;
}

/** Checks that `prefix` could begin a key: empty, or a key that may end with `/`. */
export function isValidPrefix(prefix: string): boolean {
  if (prefix === '') return true;
  return isValidKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
}

/** Rejects a malformed key before any store touches storage. */
export function assertKey(op: string, key: string): void {
  if (!isValidKey(key)) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `${op} ${typeof key === 'string' ? JSON.stringify(key) : describeValue(key)}: not a valid store key ('/'-separated segments of [A-Za-z0-9._~-], at most 1,024 bytes)`,
      { key },
    );
  }
}

/** Rejects a malformed list prefix, and a `limit` that is not a positive integer. */
export function assertPrefix(prefix: string, limit?: number): void {
  if (!isValidPrefix(prefix)) {
    const shown = typeof prefix === 'string' ? JSON.stringify(prefix) : describeValue(prefix);
    throw new StatefoldError('INVALID_ARGUMENT', `list ${shown}: not a valid key prefix`, {
      key: prefix,
    });
  }
  if (limit !== undefined && !(Number.isSafeInteger(limit) && limit > 0)) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `list ${JSON.stringify(prefix)}: limit ${describeValue(limit)} is not a positive integer`,
      {
        key: prefix,
      },
    );
  }
}
