/**
 * Reading frames of a listed log: one verified frame per key, and many with bounded concurrency.
 * A listed object may vanish before it is read (retention deleted it behind a newer base); that is
 * told apart from damage so that readers can list again.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import { decodeFrame, unsealFrame, type Frame, type FrameOrigin, type FrameReading } from '../format/frame.js';
import { floorAbove } from './floor.js';
import type { StreamKeys } from './keys.js';

/**
 * The NOT_FOUND of an object that was listed and then deleted before it could be read: its class
 * is how readers tell it from any other NOT_FOUND (then they list again). Not exported: callers see
 * a StatefoldError.
 */
class Vanished extends StatefoldError {}

/** True when `err` says a listed object was deleted before it could be read (list again). */
export function vanished(err: unknown): boolean {
  return err instanceof Vanished;
}

/**
 * Reads and verifies the frame at `key` of slot `seq`; CORRUPT if damaged, NOT_FOUND if it
 * vanished. `bodies`: what a listing that scanned already read (LogListing.bodies), used first.
 */
export async function readFrame(
  store: Store,
  keys: StreamKeys,
  seq: number,
  key: string,
  limits: FrameReading,
  signal?: AbortSignal,
  bodies?: ReadonlyMap<string, Uint8Array>,
): Promise<Frame> {
  const bytes = bodies?.get(key) ?? (await store.get(key, signal ? { signal } : undefined));
  if (bytes === undefined) throw vanishedError(keys, seq, key);
  return openFrame(bytes, { stream: keys.stream, key, seq }, limits);
}

/** The NOT_FOUND of an object listed at `key` of slot `seq` and gone before it was read (see vanished). */
export function vanishedError(keys: StreamKeys, seq: number, key: string): StatefoldError {
  return new Vanished(
    'NOT_FOUND',
    `stream ${JSON.stringify(keys.stream)} seq ${seq}: object ${key} vanished while reading (removed by retention?)`,
    { stream: keys.stream, seq, key },
  );
}

/**
 * The one rule for an object a listing named (or a seq it had) that is not there when read: it
 * is deleted history when a retention floor above `seq` is recorded now (retention and
 * deleteStream write one before deleting anything below it), and then this returns the NOT_FOUND
 * that makes readers list again. Otherwise undefined: the stream's own rules never deleted it, and
 * the caller throws the error that fits (a gap in a chain is CORRUPT).
 */
export async function listedThenGone(
  store: Store,
  keys: StreamKeys,
  seq: number,
  key: string,
  signal?: AbortSignal,
): Promise<StatefoldError | undefined> {
  return (await floorAbove(store, keys, seq, signal)) ? vanishedError(keys, seq, key) : undefined;
}

/**
 * Verifies and parses a stored frame (decodeFrame) and, when it is sealed and `reading` has keys,
 * opens it. Read without keys, a sealed frame stays locked: its kind, seqs and times are there,
 * its state, meta and ledger are not (reading them fails KEY_UNAVAILABLE).
 */
export async function openFrame(bytes: Uint8Array, origin: FrameOrigin, reading: FrameReading): Promise<Frame> {
  return unlockFrame(decodeFrame(bytes, origin, reading), origin, reading);
}

/** Opens a sealed frame with the key its header names, when `reading` has keys; returns it. */
export async function unlockFrame(frame: Frame, origin: FrameOrigin, reading: FrameReading): Promise<Frame> {
  if (frame.locked !== undefined && reading.keyring !== undefined) {
    const key = await reading.keyring.key(frame.keyId!, origin.stream, { seq: origin.seq, key: origin.key });
    unsealFrame(frame, key, origin, reading);
  }
  return frame;
}

/** Runs `fn` over `items` with at most `limit` at once, keeping order in the result. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failed: unknown;
  const worker = async (): Promise<void> => {
    while (next < items.length && failed === undefined) {
      const i = next++;
      try {
        out[i] = await fn(items[i]!, i);
      } catch (err) {
        failed ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed !== undefined) throw failed;
  return out;
}

/**
 * Runs a read that lists the log first, again from a new listing when an object it listed was
 * deleted before it could be read: a writer's retention deletes behind a newer base, which the
 * new listing shows. Bounded; the last attempt's error stands.
 */
export async function relistOnVanish<T>(read: () => Promise<T>): Promise<T> {
  const attempts = 10;
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (!vanished(err)) throw err;
      if (attempt >= attempts) {
        // Not NOT_FOUND: the stream exists, and a caller must not take it for a new one.
        const e = err as StatefoldError;
        throw new StatefoldError(
          'STORAGE',
          `${e.message}; retention deleted what ${attempts} listings in a row named before it could be read: the stream is trimmed faster than it can be read (keep more history, or retry)`,
          { stream: e.stream, seq: e.seq, key: e.key, cause: err },
        );
      }
    }
  }
}
