/**
 * Argument checks shared by the read and write APIs: a clear INVALID_ARGUMENT before any store is
 * touched.
 */
import type { Store } from '../storage-adapters/store.js';
import { StatefoldError } from './errors.js';
import { DEFAULT_LIMITS, type FrameLimits, type FrameReading } from './format/frame.js';
import { Keyring, type Encryption } from './format/keyring.js';

/** Throws INVALID_ARGUMENT unless `seq` is a positive safe integer. */
export function assertSeq(seq: unknown, stream: string): asserts seq is number {
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) {
    const shown = typeof seq === 'number' ? String(seq) : `${JSON.stringify(seq) ?? String(seq)} (a ${typeof seq})`;
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `stream ${JSON.stringify(stream)}: seq ${shown} is not a positive integer`,
      { stream },
    );
  }
}

/** Throws INVALID_ARGUMENT unless `store` has the four Store methods. */
export function assertStore(store: unknown, op: string): asserts store is Store {
  const s = store as Partial<Store> | null | undefined;
  if (
    s === null ||
    typeof s !== 'object' ||
    typeof s.get !== 'function' ||
    typeof s.putIfAbsent !== 'function' ||
    typeof s.list !== 'function' ||
    typeof s.delete !== 'function'
  ) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `${op}: store must be a Store (MemoryStore, FileStore, S3Store, or an object with get, putIfAbsent, list and delete)`,
    );
  }
}

/** Returns `options` (an object, or {} for undefined), checking `concurrency` when present. */
export function assertOptions<T extends { concurrency?: number }>(options: T | undefined, op: string): T {
  if (options === undefined) return {} as T;
  if (options === null || typeof options !== 'object')
    throw new StatefoldError('INVALID_ARGUMENT', `${op}: options must be an object`);
  const c = options.concurrency;
  if (c !== undefined && (!Number.isSafeInteger(c) || c < 1)) {
    throw new StatefoldError('INVALID_ARGUMENT', `${op}: concurrency ${String(c)} is not a positive integer`);
  }
  return options;
}

/** Frame limits from an optional maxPayloadBytes. */
export function limitsOf(maxPayloadBytes: number | undefined): FrameLimits {
  if (maxPayloadBytes === undefined) return DEFAULT_LIMITS;
  if (!Number.isSafeInteger(maxPayloadBytes) || maxPayloadBytes < 1) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `maxPayloadBytes ${String(maxPayloadBytes)} is not a positive integer`,
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
