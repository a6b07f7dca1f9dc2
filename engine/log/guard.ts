/**
 * The one boundary between statefold and a store: every store call the engine, restore, list and
 * gc make goes through it. Whatever a store does wrong surfaces as a StatefoldError naming the
 * operation and key: a throw that is not a StatefoldError (an Error, a string, `42`, a symbol)
 * becomes STORAGE with the thrown value as cause; an answer of the wrong type becomes STORAGE; a
 * call that does not settle within the timeout becomes TIMEOUT; a call failed by the caller's own
 * AbortSignal becomes ABORTED, so that retry logic written against STORAGE never retries a
 * cancellation.
 */
import type { ListOptions, Store, StoreOptions } from '../../storage-adapters/store.js';
import { setLongTimeout } from '../../storage-adapters/kit/timers.js';
import { StatefoldError, describeCause, describeValue } from '../errors.js';

/** Default time a single store call may take before it fails TIMEOUT: 5 minutes (a guard against calls that never settle). */
export const DEFAULT_STORE_TIMEOUT_MS = 300_000;

/** A store whose every call keeps the error contract above, failing TIMEOUT after `timeoutMs` (Infinity: never). */
export function guardStore(store: Store, timeoutMs: number): Store {
  return {
    get: (key: string, options?: StoreOptions) =>
      guarded(
        'get',
        key,
        options,
        timeoutMs,
        () => store.get(key, options),
        (v) => v === undefined || v instanceof Uint8Array,
        'a Uint8Array or undefined',
      ),
    putIfAbsent: (key: string, body: Uint8Array, options?: StoreOptions) =>
      guarded(
        'putIfAbsent',
        key,
        options,
        timeoutMs,
        () => store.putIfAbsent(key, body, options),
        (v) => typeof v === 'boolean',
        'a boolean',
      ),
    list: (prefix: string, options?: ListOptions) =>
      guarded(
        'list',
        prefix,
        options,
        timeoutMs,
        () => store.list(prefix, options),
        (v) => Array.isArray(v) && v.every((k) => typeof k === 'string'),
        'an array of strings',
      ),
    delete: (key: string, options?: StoreOptions) =>
      guarded(
        'delete',
        key,
        options,
        timeoutMs,
        () => store.delete(key, options),
        () => true,
        'nothing',
      ),
    removeLeftovers: (prefix: string, options?: StoreOptions) =>
      guarded(
        'removeLeftovers',
        prefix,
        options,
        timeoutMs,
        () => store.removeLeftovers(prefix, options),
        () => true,
        'nothing',
      ),
    // (Only on a store that has it: readers check for it.)
    ...(typeof store.scan === 'function' && {
      scan: (prefix: string, options?: ListOptions) =>
        guarded(
          'scan',
          prefix,
          options,
          timeoutMs,
          () => store.scan!(prefix, options),
          (v) =>
            Array.isArray(v) &&
            v.every(
              (o) => typeof o === 'object' && o !== null && typeof o.key === 'string' && o.body instanceof Uint8Array,
            ),
          'an array of { key, body }',
        ),
    }),
  };
}

/**
 * Checks a `storeTimeoutMs` option: a positive number of milliseconds, or Infinity. Any number is
 * kept as given, also past the 2^31-1 ms (24.8 days) that Node's timers hold (kit/timers.ts).
 */
export function resolveStoreTimeout(value: unknown, op: string): number {
  if (value === undefined) return DEFAULT_STORE_TIMEOUT_MS;
  if (typeof value !== 'number' || !(value > 0)) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `${op}: storeTimeoutMs ${describeValue(value)} is not a positive number of milliseconds (or Infinity)`,
    );
  }
  return value;
}

/**
 * Microtask turns a store call may take before its TIMEOUT timer is armed. A store that answers in
 * process (MemoryStore, SqliteStore's reads and light writes) settles within them, and then no
 * timer is armed at all: a process's first timer costs about 0.3 ms, and each one after it a few
 * microseconds, on every call. A call still pending after them (I/O, a thread) gets its timer then,
 * microseconds after it started: the TIMEOUT still comes within storeTimeoutMs of that.
 */
const SETTLE_TURNS = 8;

async function guarded<T>(
  op: string,
  key: string,
  options: StoreOptions | undefined,
  timeoutMs: number,
  call: () => Promise<T>,
  valid: (v: unknown) => boolean,
  expected: string,
): Promise<T> {
  const signal = options?.signal;
  if (signal?.aborted) throw aborted(op, key, signal.reason);
  let cancel: (() => void) | undefined;
  try {
    let settled = false;
    const answer = new Promise<T>((resolve, reject) => {
      try {
        call().then(resolve, reject);
      } catch (err) {
        reject(err);
      }
    });
    answer.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let turn = 0; turn < SETTLE_TURNS && !settled; turn++) await undefined;
    const result = settled
      ? await answer
      : await new Promise<T>((resolve, reject) => {
          // Not setTimeout: Node fires one of more than 2^31-1 ms at once.
          cancel = setLongTimeout(
            () =>
              reject(
                new StatefoldError(
                  'TIMEOUT',
                  `${op} ${key}: the store did not answer within ${timeoutMs} ms (storeTimeoutMs)`,
                  { key },
                ),
              ),
            timeoutMs,
          );
          answer.then(resolve, reject);
        });
    if (!valid(result))
      throw new StatefoldError('STORAGE', `${op} ${key}: the store answered ${answered(result)}, not ${expected}`, {
        key,
      });
    return result;
  } catch (err) {
    if (signal?.aborted) throw aborted(op, key, signal.reason, err);
    if (err instanceof StatefoldError) throw err;
    throw new StatefoldError('STORAGE', `${op} ${key}: ${describeCause(err)}`, { key, cause: err });
  } finally {
    cancel?.();
  }
}

function aborted(op: string, key: string, reason: unknown, failure?: unknown): StatefoldError {
  return new StatefoldError(
    'ABORTED',
    `${op} ${key}: aborted by the caller's signal${reason === undefined ? '' : ` (${describeCause(reason)})`}`,
    { key, cause: failure ?? reason },
  );
}

/** What a store answered, for the STORAGE error that rejects it. */
function answered(v: unknown): string {
  return Array.isArray(v) ? 'an array that is not all strings' : describeValue(v);
}
