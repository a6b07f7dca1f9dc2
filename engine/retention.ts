/**
 * Retention: delete old checkpoints, only behind a retained base, so that every retained seq
 * stays restorable (Litestream's "missing wal segment" is the bug this avoids).
 */
import type { Store } from '../storage-adapters/store.js';
import { StatefoldError } from './errors.js';
import { DEFAULT_LIMITS, type FrameLimits } from './frame.js';
import { StreamKeys } from './keys.js';
import { listLog, readFrame, tailKey } from './log.js';
import { committedView } from './restorer.js';

/** Which checkpoints to keep: those among the last `keepLast`, and those younger than `keepForMs`. */
export interface Retention {
  /** Keep at least the newest this many checkpoints. Default 1 when `keepForMs` is given, else required. */
  keepLast?: number;
  /** Keep every checkpoint captured less than this many milliseconds ago. */
  keepForMs?: number;
}

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
  if (r === null || typeof r !== 'object') throw new StatefoldError('INVALID_ARGUMENT', 'retention: must be an object');
  const { keepLast, keepForMs } = r;
  if (keepLast !== undefined && (!Number.isSafeInteger(keepLast) || keepLast < 1)) {
    throw new StatefoldError('INVALID_ARGUMENT', `retention.keepLast: ${String(keepLast)} is not a positive integer`);
  }
  if (keepForMs !== undefined && (typeof keepForMs !== 'number' || !(keepForMs >= 0))) {
    throw new StatefoldError('INVALID_ARGUMENT', `retention.keepForMs: ${String(keepForMs)} is not a non-negative number`);
  }
  if (keepLast === undefined && keepForMs === undefined) {
    throw new StatefoldError('INVALID_ARGUMENT', 'retention: give keepLast, keepForMs or both');
  }
  return { keepLast: keepLast ?? 1, keepForMs: keepForMs ?? 0 };
}

/**
 * Deletes the checkpoints of `stream` that the retention does not keep, and only those before
 * the base of the oldest kept one, oldest first (a crash midway leaves a restorable suffix).
 * Safe while a writer is active: writers only add seqs past the newest.
 */
export async function gc(store: Store, stream: string, retention: Retention, options: { signal?: AbortSignal; limits?: FrameLimits; now?: number } = {}): Promise<GcReport> {
  const keys = new StreamKeys(stream);
  const { keepLast, keepForMs } = resolveRetention(retention);
  const limits = options.limits ?? DEFAULT_LIMITS;
  const log = await listLog(store, keys, options.signal);
  const view = await committedView(store, log, limits, options.signal);
  const slots = view.slots;
  if (slots.length === 0) return { deleted: [], deletedKeys: 0, oldestRetained: 0 };
  // The oldest seq to keep: the newest keepLast, and any younger than keepForMs.
  let keepFrom = slots[Math.max(0, slots.length - keepLast)]!.seq;
  const now = options.now ?? Date.now();
  const read = (i: number) => {
    const slot = slots[i]!;
    return slot === view.tailSlot && view.tailFrame ? Promise.resolve(view.tailFrame) : readFrame(store, keys, slot.seq, tailKey(slot), limits, options.signal);
  };
  if (keepForMs > 0) {
    // createdAt grows with seq: walk back from the first slot kept by count while younger.
    let i = slots.findIndex((s) => s.seq === keepFrom) - 1;
    while (i >= 0 && now - (await read(i)).header.createdAt < keepForMs) {
      keepFrom = slots[i]!.seq;
      i--;
    }
  }
  // Keep the base of the oldest kept checkpoint, so that it still restores.
  const first = await read(slots.findIndex((s) => s.seq === keepFrom));
  const cut = Math.min(keepFrom, first.header.base ?? keepFrom);
  const deleted: number[] = [];
  let deletedKeys = 0;
  for (const slot of slots) {
    if (slot.seq >= cut) break;
    // Within a slot the checkpoint is the last key: deleting in order, a crash midway leaves it
    // (still a committed seq), never a fence standing alone before later seqs.
    for (const key of slot.keys) {
      await store.delete(key, options.signal ? { signal: options.signal } : undefined);
      deletedKeys++;
    }
    deleted.push(slot.seq);
  }
  return { deleted, deletedKeys, oldestRetained: cut };
}
