/**
 * Opening a stream whose newest chain is damaged: the error that says how (`repair: true`), the
 * claim's view of a log whose newest object cannot be read, and where a repaired engine starts
 * from: the newest intact checkpoint, its first checkpoint a base at the next seq.
 */
import type { Store } from '../../storage-adapters/store.js';
import { createCapturer } from '../capture/index.js';
import type { Ledger } from '../effects/ledger.js';
import { StatefoldError } from '../errors.js';
import type { SealingKey } from '../format/keyring.js';
import { encodeValue } from '../format/values.js';
import type { CommittedView } from '../log/committed.js';
import { decodeFrame, type FrameReading } from '../format/frame.js';
import type { StreamKeys } from '../log/keys.js';
import { highestKeyEpoch, listLog, tailKey } from '../log/listing.js';
import type { ResolvedEngineOptions } from '../options.js';
import { restoreIntact } from '../restore/skip-damaged.js';
import type { Claim } from './claim.js';
import type { Head } from './head.js';
import type { Opened } from './resume.js';

/** What `SnapshotEngine.open({ repair: true })` did about a damaged newest chain (see `engine.repaired`). */
export interface Repair {
  /** The newest intact checkpoint: the engine's state is its state, its next checkpoint a base. */
  restoredSeq: number;
  /** The committed seqs after it that do not restore (they stay in the store; `verifyStream` lists them). */
  skipped: number[];
  /** The CORRUPT errors that made the engine pass them over. */
  damage: StatefoldError[];
}

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
    if (bytes === undefined) fail(`and the fence above it vanished while reading (open again)`);
    const frame = decodeFrame(bytes!, { stream: keys.stream, key, seq: seq + 1 }, limits);
    if (frame.kind !== 'fence') fail(`yet seq ${seq + 1} holds a checkpoint`);
    nextKey = keys.afterFence(seq + 1, frame.header.epoch);
    epoch = Math.max(epoch, frame.header.epoch);
  }
  return { view: { log, slots, tailSlot, tailFrame: undefined }, nextSeq: seq + 1, nextKey, epoch: epoch + 1 };
}

/**
 * Opens on the newest intact checkpoint below a damaged newest chain: its state, meta and effect
 * ledger, with the head still at the newest committed seq, so the first checkpoint is a base at the
 * next seq and every restore from then on reads past the damage.
 */
export async function repair(
  options: ResolvedEngineOptions,
  claim: Claim,
  sealing: SealingKey | undefined,
  err: StatefoldError,
): Promise<Opened> {
  const newest = claim.view.slots[claim.view.slots.length - 1]!.seq;
  const log = await listLog(options.store, options.keys);
  const restored = await restoreIntact<unknown>(options.store, log, newest, options.limits, {});
  const capturer = createCapturer(options.updates);
  capturer.seed(restored.state);
  const skipped: number[] = [];
  for (let s = restored.seq + 1; s <= newest; s++) skipped.push(s);
  const head: Head = {
    seq: newest,
    crc: 0,
    state: capturer.state,
    meta: restored.meta === undefined ? undefined : encodeValue(restored.meta),
    baseSeq: newest,
    baseBytes: 0,
    deltaBytes: 0,
  };
  const ledger: Ledger = new Map(restored.effects.map((r) => [r.token, r]));
  const damage = restored.damage.length > 0 ? restored.damage : [err];
  return { head, capturer, ledger, sealing, needBase: true, repaired: { restoredSeq: restored.seq, skipped, damage } };
}
