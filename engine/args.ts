/**
 * Argument checks shared by the read and write APIs: a clear INVALID_ARGUMENT, naming the call and
 * the option, before any store is touched. Every check describes the value it rejects with
 * describeValue, which never throws (BigInts, symbols, objects without a prototype, Proxies).
 */
import type { Store } from '../storage-adapters/store.js';
import { StatefoldError, describeValue } from './errors.js';
import { DEFAULT_LIMITS, type FrameLimits, type FrameReading } from './format/frame.js';
import { Keyring, type Encryption } from './format/keyring.js';
import { resolveStoreTimeout } from './log/guard.js';

/** Throws INVALID_ARGUMENT `op stream "id": what` (`op: what` when no stream is known yet). */
export function invalidArgument(op: string, what: string, stream?: string): never {
  const where = stream === undefined ? op : `${op} stream ${JSON.stringify(stream)}`;
  throw new StatefoldError('INVALID_ARGUMENT', `${where}: ${what}`, stream === undefined ? {} : { stream });
}

/** Throws INVALID_ARGUMENT unless `seq` (the option `name` of `op`) is a positive safe integer. */
export function assertSeq(seq: unknown, stream: string, op: string, name = 'seq'): asserts seq is number {
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) {
    const shown = typeof seq === 'string' ? `${describeValue(seq)} (a string)` : describeValue(seq);
    invalidArgument(op, `${name} ${shown} is not a positive integer`, stream);
  }
}

/** Throws INVALID_ARGUMENT unless `store` has the five Store methods. */
export function assertStore(store: unknown, op: string): asserts store is Store {
  const s = store as Partial<Store> | null | undefined;
  if (
    s === null ||
    typeof s !== 'object' ||
    typeof s.get !== 'function' ||
    typeof s.putIfAbsent !== 'function' ||
    typeof s.list !== 'function' ||
    typeof s.delete !== 'function' ||
    typeof s.removeLeftovers !== 'function'
  ) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `${op}: store must be a Store (MemoryStore, FileStore, SqliteStore, S3Store, or an object with get, putIfAbsent, list, delete and removeLeftovers)`,
    );
  }
}

/** The options every call that takes them may hold, with the same meaning everywhere. */
interface CommonOptions {
  concurrency?: number;
  signal?: AbortSignal;
  storeTimeoutMs?: number;
  maxPayloadBytes?: number;
  onProgress?: unknown;
}

/**
 * Returns `options` (an object, or {} for undefined), checking the options that mean the same in
 * every call (`concurrency`, `signal`, `storeTimeoutMs`, `maxPayloadBytes`, `onProgress`) when
 * present; the caller checks its own. Null, arrays and other non-objects are INVALID_ARGUMENT.
 */
export function assertOptions<T extends object>(options: T | undefined, op: string, stream?: string): T {
  if (options === undefined) return {} as T;
  assertOptionalObject(options, 'options', op, stream);
  const o = options as CommonOptions;
  assertOptionalPositiveInt(o.concurrency, 'concurrency', op, stream);
  assertOptionalSignal(o.signal, op, stream);
  if (o.storeTimeoutMs !== undefined) resolveStoreTimeout(o.storeTimeoutMs, op);
  assertOptionalPositiveInt(o.maxPayloadBytes, 'maxPayloadBytes', op, stream);
  assertOptionalFunction(o.onProgress, 'onProgress', op, stream);
  return options;
}

/** Throws INVALID_ARGUMENT unless `value` is undefined or an object (not null, not an array). */
export function assertOptionalObject(value: unknown, name: string, op: string, stream?: string): void {
  if (value === undefined) return;
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    invalidArgument(op, `${name} must be an object, not ${describeValue(value)}`, stream);
}

/** Throws INVALID_ARGUMENT unless `value` is undefined or a function. */
export function assertOptionalFunction(value: unknown, name: string, op: string, stream?: string): void {
  if (value !== undefined && typeof value !== 'function')
    invalidArgument(op, `${name} must be a function, not ${describeValue(value)}`, stream);
}

/** Throws INVALID_ARGUMENT unless `value` is undefined or a boolean. */
export function assertOptionalBoolean(value: unknown, name: string, op: string, stream?: string): void {
  if (value !== undefined && typeof value !== 'boolean')
    invalidArgument(op, `${name} must be true or false, not ${describeValue(value)}`, stream);
}

/** Throws INVALID_ARGUMENT unless `value` is undefined or a positive safe integer. */
export function assertOptionalPositiveInt(value: unknown, name: string, op: string, stream?: string): void {
  if (value !== undefined && !(typeof value === 'number' && Number.isSafeInteger(value) && value >= 1))
    invalidArgument(op, `${name} ${describeValue(value)} is not a positive integer`, stream);
}

/** Throws INVALID_ARGUMENT unless `value` is undefined or an AbortSignal (anything with `aborted` and `addEventListener`). */
export function assertOptionalSignal(value: unknown, op: string, stream?: string): void {
  if (value === undefined) return;
  const s = value as { aborted?: unknown; addEventListener?: unknown } | null;
  let ok = false;
  try {
    ok =
      s !== null && typeof s === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function';
  } catch {
    // A Proxy whose get trap throws is no signal.
  }
  if (!ok) invalidArgument(op, `signal must be an AbortSignal, not ${describeValue(value)}`, stream);
}

/** Frame limits from an optional maxPayloadBytes. */
export function limitsOf(maxPayloadBytes: number | undefined): FrameLimits {
  if (maxPayloadBytes === undefined) return DEFAULT_LIMITS;
  if (!Number.isSafeInteger(maxPayloadBytes) || maxPayloadBytes < 1) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `maxPayloadBytes ${describeValue(maxPayloadBytes)} is not a positive integer`,
    );
  }
  return { maxPayloadBytes };
}

/** How a read call reads frames: its maxPayloadBytes and, for an encrypted stream, its keys. */
export function readingOf(options: { maxPayloadBytes?: number; encryption?: Encryption }, op: string): FrameReading {
  const limits = limitsOf(options.maxPayloadBytes);
  const keyring = Keyring.of(options.encryption, op);
  return keyring === undefined ? limits : { ...limits, keyring };
}
