/**
 * Listing a stream's retained checkpoints: seq, kind, size, meta and effect records of each, a page
 * at a time. It lists the log's keys, then reads only the objects it returns; one that fails
 * verification is listed as damaged, with its error, instead of failing the whole listing.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertSeq, assertStore, limitsOf } from '../args.js';
import { EMPTY_LEDGER } from '../effects/ledger.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import { decodeMeta, type Frame, type FrameLimits } from '../format/frame.js';
import { committedView, type CommittedView } from '../log/committed.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { listLog, tailKey, type Slot } from '../log/listing.js';
import { mapLimit, readFrame, relistOnVanish, vanished } from '../log/read.js';
import { applyLedger, checkpointKind } from './chain.js';
import type { ListCheckpointsOptions, ListedCheckpoint } from './types.js';

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
  options = assertOptions(options, 'listCheckpoints');
  if (options.after !== undefined) assertSeq(options.after, stream);
  if (options.before !== undefined) assertSeq(options.before, stream);
  const limit = options.limit;
  if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) {
    throw new StatefoldError('INVALID_ARGUMENT', `listCheckpoints: limit ${String(limit)} is not a positive integer`, {
      stream,
    });
  }
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'listCheckpoints'));
  const keys = new StreamKeys(stream);
  const limits = limitsOf(options.maxPayloadBytes);
  return relistOnVanish(() => listFrom(store, keys, limits, options));
}

async function listFrom(
  store: Store,
  keys: StreamKeys,
  limits: FrameLimits,
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
      return entry(
        keys,
        slot,
        slot === view.tailSlot && view.tailFrame
          ? view.tailFrame
          : await readFrame(store, keys, seq, tailKey(slot), limits, options.signal),
      );
    } catch (err) {
      if (vanished(err) || !isStatefoldError(err, 'CORRUPT')) throw err;
      return { seq, damaged: true, error: err };
    }
  });
}

function entry(keys: StreamKeys, slot: Slot, frame: Frame): ListedCheckpoint {
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
    damaged: false,
  };
}
