/**
 * A damaged newest chain, as a claim sees it: the error that says how to open anyway
 * (`repair: true`), and where a repairing claim fences when the newest object cannot be read.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import type { CommittedView } from '../log/committed.js';
import { decodeFrame, type FrameReading } from '../format/frame.js';
import type { StreamKeys } from '../log/keys.js';
import { highestKeyEpoch, listLog, tailKey } from '../log/listing.js';
import { listedThenGone } from '../log/read.js';

/** A CORRUPT error of the newest chain, telling how to open anyway. */
export function withRepairHint(err: StatefoldError): StatefoldError {
  return new StatefoldError(
    'CORRUPT',
    `${err.message} (SnapshotEngine.open with repair: true starts a new base after the newest intact checkpoint)`,
    {
      ...(err.stream !== undefined && { stream: err.stream }),
      ...(err.seq !== undefined && { seq: err.seq }),
      ...(err.key !== undefined && { key: err.key }),
      cause: err,
    },
  );
}

/** Where a repairing claim fences: the damaged newest seq's view, and the slot and key after it. */
export interface DamagedTail {
  /** Every slot up to the damaged one, taken as committed; the damaged one last (no tail frame). */
  view: CommittedView;
  nextSeq: number;
  nextKey: string;
  /** An epoch above every one the key names show. */
  epoch: number;
}

/**
 * Where a claim that repairs fences, when the newest object of a log, at `seq`, cannot be read:
 * the slot after it, or, when an engine that never committed left a fence there, the key after
 * that fence. Fences further up (claims that jumped ahead of a writer and crashed) are refused.
 */
export async function damagedTail(
  store: Store,
  keys: StreamKeys,
  seq: number,
  limits: FrameReading,
): Promise<DamagedTail> {
  const log = await listLog(store, keys);
  const slots = log.slots.filter((s) => s.seq <= seq);
  const tailSlot = slots[slots.length - 1];
  const above = log.slots.filter((s) => s.seq > seq);
  const fail = (why: string): never => {
    throw new StatefoldError(
      'CORRUPT',
      `open stream ${JSON.stringify(keys.stream)} (repair): seq ${seq} is damaged ${why}`,
      {
        stream: keys.stream,
        seq,
      },
    );
  };
  if (tailSlot?.seq !== seq) fail('and not listed');
  let epoch = highestKeyEpoch(log);
  let nextKey = keys.slot(seq + 1);
  if (above.length > 1 || (above.length === 1 && above[0]!.seq !== seq + 1))
    fail(
      `and fences stand at seqs ${above.map((s) => s.seq).join(', ')} above it (claims that never committed): fork or delete the stream`,
    );
  if (above.length === 1) {
    const key = tailKey(above[0]!);
    const bytes = await store.get(key);
    if (bytes === undefined) {
      const gone = await listedThenGone(store, keys, seq + 1, key);
      if (gone !== undefined) throw gone;
      fail(`and the fence above it vanished while reading (open again)`);
    }
    const frame = decodeFrame(bytes!, { stream: keys.stream, key, seq: seq + 1 }, limits);
    if (frame.kind !== 'fence') fail(`yet seq ${seq + 1} holds a checkpoint`);
    nextKey = keys.afterFence(seq + 1, frame.header.epoch);
    epoch = Math.max(epoch, frame.header.epoch);
  }
  return { view: { log, slots, tailSlot, tailFrame: undefined }, nextSeq: seq + 1, nextKey, epoch: epoch + 1 };
}
