/** Listing a stream's retained checkpoints: seq, kind, size, meta and effect records of each. */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertStore, limitsOf } from '../args.js';
import { EMPTY_LEDGER } from '../effects/ledger.js';
import type { FrameLimits } from '../format/frame.js';
import { decodeMeta } from '../format/frame.js';
import { committedView } from '../log/committed.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { listLog, tailKey } from '../log/listing.js';
import { mapLimit, readFrame, relistOnVanish } from '../log/read.js';
import { applyLedger, checkpointKind } from './chain.js';
import type { CheckpointEntry, ListCheckpointsOptions } from './types.js';

/** Lists the retained committed checkpoints of a stream, ascending by seq (empty for an unknown stream). */
export async function listCheckpoints(
  store: Store,
  stream: string,
  options: ListCheckpointsOptions = {},
): Promise<CheckpointEntry[]> {
  assertStore(store, 'listCheckpoints');
  options = assertOptions(options, 'listCheckpoints');
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
): Promise<CheckpointEntry[]> {
  const stream = keys.stream;
  const log = await listLog(store, keys, options.signal);
  const view = await committedView(store, log, limits, options.signal);
  const slots = view.slots;
  return mapLimit(slots, options.concurrency ?? 16, async (slot) => {
    const key = tailKey(slot);
    const frame =
      slot === view.tailSlot && view.tailFrame
        ? view.tailFrame
        : await readFrame(store, keys, slot.seq, key, limits, options.signal);
    const kind = checkpointKind(frame, keys, slot.seq, key);
    return {
      seq: slot.seq,
      kind,
      bytes: frame.bytes,
      createdAt: frame.header.createdAt,
      meta: decodeMeta(frame, { stream, key, seq: slot.seq }),
      base: frame.header.baseSeq!,
      epoch: frame.header.epoch,
      effects: [...applyLedger(frame, keys, slot.seq, key, EMPTY_LEDGER).values()],
      filler: frame.header.filler === true,
    };
  });
}
