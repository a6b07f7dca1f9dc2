/**
 * Listing a stream's retained checkpoints: seq, kind, size, meta and effect records of each, a page
 * at a time. It lists the keys of the page's seqs (the newest chain from its hint, older seqs by
 * range), then reads only the objects it returns; one that fails verification is listed as
 * damaged, with its error, instead of failing the whole listing.
 */
import type { Store } from '../../storage-adapters/store.js';
import {
  assertOptionalBoolean,
  assertOptionalPositiveInt,
  assertOptions,
  assertSeq,
  assertStore,
  readingOf,
} from '../args.js';
import { EMPTY_LEDGER } from '../effects/ledger.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import { decodeMeta, type Frame, type FrameReading } from '../format/frame.js';
import { committedView, type CommittedView } from '../log/committed.js';
import { newestView } from '../log/hint.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { listLog, tailKey, type Slot } from '../log/listing.js';
import { floorAbove } from '../log/floor.js';
import { mapLimit, readFrame, relistOnVanish, vanished, vanishedError } from '../log/read.js';
import { applyLedger, checkpointKind } from '../log/frames.js';
import { resolveSchema } from '../schema.js';
import type { CheckpointEntry, ListCheckpointsOptions, ListedCheckpoint } from './types.js';

/**
 * Lists the retained committed checkpoints of a stream (empty for an unknown stream), oldest first
 * or with `reverse` newest first, between `after` and `before`, at most `limit` of them.
 */
export async function listCheckpoints(
  store: Store,
  stream: string,
  options: ListCheckpointsOptions = {},
): Promise<ListedCheckpoint[]> {
  assertStore(store, 'listCheckpoints');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'listCheckpoints', keys.stream);
  if (options.after !== undefined) assertSeq(options.after, keys.stream, 'listCheckpoints', 'after');
  if (options.before !== undefined) assertSeq(options.before, keys.stream, 'listCheckpoints', 'before');
  assertOptionalPositiveInt(options.limit, 'limit', 'listCheckpoints', keys.stream);
  assertOptionalBoolean(options.reverse, 'reverse', 'listCheckpoints', keys.stream);
  resolveSchema(options.schema, 'listCheckpoints', keys.stream);
  const limits = readingOf(options, 'listCheckpoints');
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'listCheckpoints'));
  return relistOnVanish(() => listFrom(store, keys, limits, options));
}

/**
 * Lists a page from the newest chain's view (hinted) and, for seqs below it, from a listing of just
 * their range: seqs are contiguous from the retention floor to the newest checkpoint, so the page's
 * seqs are known before anything older is listed. A hint that does not hold, or damage at the top,
 * lists the whole log instead (listWhole).
 */
async function listFrom(
  store: Store,
  keys: StreamKeys,
  limits: FrameReading,
  options: ListCheckpointsOptions,
): Promise<ListedCheckpoint[]> {
  let view: CommittedView;
  try {
    view = await newestView(
      store,
      keys,
      limits,
      options.signal,
      options.reverse !== true ? false : options.before === undefined ? 'scan' : 'deltas',
    );
  } catch (err) {
    if (isStatefoldError(err, 'CORRUPT')) return listWhole(store, keys, limits, options);
    throw err;
  }
  const newest = view.slots[view.slots.length - 1]?.seq;
  if (newest === undefined) return [];
  const lo = Math.max(view.log.floor, (options.after ?? 0) + 1);
  const hi = Math.min(newest, (options.before ?? Infinity) - 1);
  if (lo > hi) return [];
  const limit = options.limit ?? Infinity;
  const [from, to] = options.reverse ? [Math.max(lo, hi - limit + 1), hi] : [lo, Math.min(hi, lo + limit - 1)];
  const viewFrom = view.slots[0]!.seq;
  const slots = view.slots.filter((s) => s.seq >= from && s.seq <= to);
  if (from < viewFrom) {
    const older = await listLog(store, keys, options.signal, from, Math.min(to, viewFrom - 1));
    slots.unshift(...older.slots.filter((s) => s.seq >= from && s.seq < viewFrom));
  }
  if (options.reverse) slots.reverse();
  return mapLimit(slots, options.concurrency ?? 16, async (slot): Promise<ListedCheckpoint> => {
    try {
      const frame =
        slot === view.tailSlot && view.tailFrame
          ? view.tailFrame
          : await (view.frames?.get(slot.seq) ??
              readFrame(store, keys, slot.seq, tailKey(slot), limits, options.signal, view.log.bodies));
      return entry(keys, slot, frame);
    } catch (err) {
      if (vanished(err) || !isStatefoldError(err, 'CORRUPT')) throw err;
      return { seq: slot.seq, damaged: true, error: err };
    }
  });
}

/** Lists from a listing of the whole log (when the newest chain's view cannot be had). */
async function listWhole(
  store: Store,
  keys: StreamKeys,
  limits: FrameReading,
  options: ListCheckpointsOptions,
): Promise<ListedCheckpoint[]> {
  const log = await listLog(store, keys, options.signal);
  let view: CommittedView;
  const unreadable = new Map<number, StatefoldError>();
  try {
    view = await committedView(store, log, limits, options.signal);
  } catch (err) {
    if (!isStatefoldError(err, 'CORRUPT') || err.seq === undefined) throw err;
    // A damaged slot at the top cannot be told committed: list it as damaged, and what is below it.
    unreadable.set(err.seq, err);
    view = { log, slots: log.slots.filter((s) => s.seq < err.seq!), tailSlot: undefined, tailFrame: undefined };
  }
  const bySeq = new Map<number, Slot>(view.slots.map((s) => [s.seq, s]));
  let seqs = [...bySeq.keys(), ...unreadable.keys()].sort((a, b) => a - b);
  if (options.after !== undefined) seqs = seqs.filter((s) => s > options.after!);
  if (options.before !== undefined) seqs = seqs.filter((s) => s < options.before!);
  if (options.reverse) seqs.reverse();
  if (options.limit !== undefined) seqs = seqs.slice(0, options.limit);
  return mapLimit(seqs, options.concurrency ?? 16, async (seq): Promise<ListedCheckpoint> => {
    const known = unreadable.get(seq);
    if (known) return { seq, damaged: true, error: known };
    const slot = bySeq.get(seq)!;
    try {
      const frame =
        slot === view.tailSlot && view.tailFrame
          ? view.tailFrame
          : await readFrame(store, keys, seq, tailKey(slot), limits, options.signal);
      // A fence where the listing had a checkpoint: deleted since, behind a floor: list again.
      if (frame.kind === 'fence' && (await floorAbove(store, keys, seq, options.signal)))
        throw vanishedError(keys, seq, tailKey(slot));
      return entry(keys, slot, frame);
    } catch (err) {
      if (vanished(err) || !isStatefoldError(err, 'CORRUPT')) throw err;
      return { seq, damaged: true, error: err };
    }
  });
}

/** The entry of a committed checkpoint's frame (CORRUPT for a fence there). */
export function entry(keys: StreamKeys, slot: Slot, frame: Frame): CheckpointEntry {
  const key = tailKey(slot);
  const seq = slot.seq;
  return {
    seq,
    kind: checkpointKind(frame, keys, seq, key),
    bytes: frame.bytes,
    createdAt: frame.header.createdAt,
    meta: decodeMeta(frame, { stream: keys.stream, key, seq }),
    base: frame.header.baseSeq!,
    epoch: frame.header.epoch,
    effects: [...applyLedger(frame, keys, seq, key, EMPTY_LEDGER).values()],
    filler: frame.header.filler === true,
    ...(frame.keyId !== undefined && { keyId: frame.keyId }),
    schemaVersion: frame.header.schemaVersion ?? 1,
    readableFrom: frame.header.readableFrom ?? frame.header.schemaVersion ?? 1,
    damaged: false,
  };
}
