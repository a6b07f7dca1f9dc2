/**
 * Retention: delete old checkpoints, only behind a retained base, so that every retained seq
 * stays restorable (Litestream's "missing wal segment" is the bug this avoids).
 */
import type { Store } from '../storage-adapters/store.js';
import { StatefoldError, describeValue } from './errors.js';
import { DEFAULT_LIMITS, type Frame, type FrameLimits } from './format/frame.js';
import { assertOptionalObject, assertOptions, assertStore, invalidArgument, limitsOf } from './args.js';
import { committedView } from './log/committed.js';
import { guardStore, resolveStoreTimeout } from './log/guard.js';
import { StreamKeys } from './log/keys.js';
import { putFloor } from './log/floor.js';
import { listLog, tailKey } from './log/listing.js';
import { readFrame, relistOnVanish } from './log/read.js';

/** Which checkpoints to keep: those among the last `keepLast`, and those younger than `keepForMs`. */
export interface Retention {
  /** Keep at least the newest this many checkpoints. Default 1 when `keepForMs` is given, else required. */
  keepLast?: number;
  /** Keep every checkpoint captured less than this many milliseconds ago. */
  keepForMs?: number;
  /**
   * Grace for readers: never delete a checkpoint that was the newest one less than this many
   * milliseconds ago, so that a restore that listed the stream then can still read its chain.
   * Default 30,000 (30 s); 0 turns it off.
   */
  minAgeMs?: number;
}

/** Options of `gc`. */
export interface GcOptions {
  /** Aborts the reads and deletes (they then reject ABORTED). */
  signal?: AbortSignal;
  /** Largest uncompressed frame payload read back (default 1 GiB). */
  limits?: FrameLimits;
  /** The time retention ages are measured from (default: now). */
  now?: number;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
  /** Called after each checkpoint deleted, with how many are deleted and how many will be. */
  onProgress?: (progress: { deleted: number; total: number }) => void;
}

/** Default grace for readers, in milliseconds. */
export const DEFAULT_MIN_AGE_MS = 30_000;

/** What `gc` did. */
export interface GcReport {
  /** Seqs whose objects were deleted, ascending. */
  deleted: number[];
  /** Number of objects (keys) deleted, fences included. */
  deletedKeys: number;
  /** The oldest seq left; every seq from it to the newest restores. 0 when the stream is empty. */
  oldestRetained: number;
}

/** Validates a retention setting (INVALID_ARGUMENT when malformed). */
export function resolveRetention(r: Retention): Required<Retention> {
  if (r === null || typeof r !== 'object' || Array.isArray(r))
    throw new StatefoldError('INVALID_ARGUMENT', `retention: must be an object, not ${describeValue(r)}`);
  const { keepLast, keepForMs } = r;
  if (keepLast !== undefined && (!Number.isSafeInteger(keepLast) || keepLast < 1)) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `retention.keepLast: ${describeValue(keepLast)} is not a positive integer`,
    );
  }
  if (keepForMs !== undefined && (typeof keepForMs !== 'number' || !(keepForMs >= 0))) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `retention.keepForMs: ${describeValue(keepForMs)} is not a non-negative number`,
    );
  }
  if (keepLast === undefined && keepForMs === undefined) {
    throw new StatefoldError('INVALID_ARGUMENT', 'retention: give keepLast, keepForMs or both');
  }
  const minAgeMs = r.minAgeMs === undefined ? DEFAULT_MIN_AGE_MS : r.minAgeMs;
  if (typeof minAgeMs !== 'number' || !(minAgeMs >= 0)) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `retention.minAgeMs: ${describeValue(r.minAgeMs)} is not a non-negative number`,
    );
  }
  return { keepLast: keepLast ?? 1, keepForMs: keepForMs ?? 0, minAgeMs };
}

/**
 * Deletes the checkpoints of `stream` that the retention does not keep, and only those before
 * the base of the oldest kept one. It first records a floor (`<stream>/gc/<seq>`): readers treat
 * every seq below it as deleted, so an interrupted gc leaves no listed seq that cannot be
 * restored. Fence objects are kept (they are tiny, one per open), so that an engine fenced long
 * ago still finds its next key taken and fails FENCED rather than committing into deleted history.
 * Safe while a writer is active: writers only add seqs past the newest.
 */
export async function gc(
  store: Store,
  stream: string,
  retention: Retention,
  options: GcOptions = {},
): Promise<GcReport> {
  assertStore(store, 'gc');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'gc', keys.stream);
  if (options.now !== undefined && !(typeof options.now === 'number' && Number.isFinite(options.now)))
    invalidArgument('gc', `now ${describeValue(options.now)} is not a time in milliseconds`, keys.stream);
  assertOptionalObject(options.limits, 'limits', 'gc', keys.stream);
  const limits = options.limits === undefined ? DEFAULT_LIMITS : limitsOf(options.limits.maxPayloadBytes);
  const { keepLast, keepForMs, minAgeMs } = resolveRetention(retention);
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'gc'));
  // Another gc (the engine's background retention, or another process) may delete what this one
  // listed before it reads it: list again, as restore does.
  return relistOnVanish(() => collect(store, keys, { keepLast, keepForMs, minAgeMs }, limits, options));
}

async function collect(
  store: Store,
  keys: StreamKeys,
  retention: Required<Retention>,
  limits: FrameLimits,
  options: Pick<GcOptions, 'signal' | 'now' | 'onProgress'>,
): Promise<GcReport> {
  const { keepLast, keepForMs, minAgeMs } = retention;
  const log = await listLog(store, keys, options.signal);
  const view = await committedView(store, log, limits, options.signal);
  const slots = view.slots;
  if (slots.length === 0) return { deleted: [], deletedKeys: 0, oldestRetained: 0 };
  // The oldest seq to keep: the newest keepLast, and any younger than keepForMs.
  let keep = Math.max(0, slots.length - keepLast);
  const now = options.now ?? Date.now();
  const frames = new Map<number, Promise<Frame>>();
  const read = (i: number): Promise<Frame> => {
    let frame = frames.get(i);
    if (frame === undefined) {
      const slot = slots[i]!;
      frame =
        slot === view.tailSlot && view.tailFrame
          ? Promise.resolve(view.tailFrame)
          : readFrame(store, keys, slot.seq, tailKey(slot), limits, options.signal);
      frames.set(i, frame);
    }
    return frame;
  };
  // createdAt grows with seq, so the checkpoints younger than an age are a suffix: find where it
  // starts by bisection (a few reads, not one per young checkpoint).
  const firstYounger = async (ageMs: number): Promise<number> => {
    let lo = 0;
    let hi = slots.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (now - (await read(mid)).header.createdAt < ageMs) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  if (keepForMs > 0) keep = Math.min(keep, await firstYounger(keepForMs));
  if (minAgeMs > 0) {
    // Every checkpoint that was the newest within the grace: those younger than it, and the one
    // that was newest when the grace began.
    const young = await firstYounger(minAgeMs);
    if (young < slots.length) keep = Math.min(keep, Math.max(0, young - 1));
  }
  const keepFrom = slots[keep]!.seq;
  // Keep the base of the oldest kept checkpoint, so that it still restores.
  const first = await read(keep);
  // The committed view holds checkpoints only; a fence here would put the floor above history.
  if (first.kind === 'fence') return { deleted: [], deletedKeys: 0, oldestRetained: log.floor };
  const cut = Math.min(keepFrom, first.header.baseSeq ?? keepFrom);
  const signalOpt = options.signal ? { signal: options.signal } : undefined;
  // First the floor: from the moment it exists, readers treat every seq below it as deleted, so
  // an interrupted gc never leaves a listed seq that cannot be restored.
  const floor = Math.max(cut, log.floor);
  if (cut > log.floor) await putFloor(store, keys, cut, options.signal);
  // Fences stay: in a slot every key but the last is a fence, and a fence is the key that the
  // engine it fenced would write next; deleting it would let that engine, if it still runs,
  // commit. So only each slot's last key, its checkpoint, is deleted.
  let deletedKeys = 0;
  const deleted: number[] = [];
  const doomed = slots.filter((s) => s.seq < floor).reverse();
  for (const slot of doomed) {
    await store.delete(tailKey(slot), signalOpt);
    deletedKeys++;
    deleted.unshift(slot.seq);
    options.onProgress?.({ deleted: deleted.length, total: doomed.length });
  }
  // An earlier gc interrupted after its floor: its older floor key is still there, and slots
  // between the two floors may keep a checkpoint (or only their fences): read to tell.
  const floors = log.floorKeys.map((k) => keys.parseFloor(k)!).sort((a, b) => a - b);
  if (floors.length >= 2) {
    for (const slot of log.below.filter((s) => s.seq >= floors[0]!)) {
      const key = tailKey(slot);
      const frame = await readFrame(store, keys, slot.seq, key, limits, options.signal).catch(() => undefined);
      if (frame !== undefined && frame.kind !== 'fence') {
        await store.delete(key, signalOpt);
        deletedKeys++;
      }
    }
  }
  // Index objects of chains wholly below the floor point at deleted history (whatever their order:
  // keys increase within one life of a stream only).
  for (const key of log.indexKeys) {
    const object = keys.parseIndex(key);
    if (object !== undefined && object.base <= floor) {
      await store.delete(key, signalOpt);
      deletedKeys++;
    }
  }
  // The floor just written supersedes the older ones.
  for (const key of log.floorKeys) if (key !== keys.floor(floor)) await store.delete(key, signalOpt);
  return { deleted, deletedKeys, oldestRetained: floor };
}
