/**
 * Views of part of a log, listed by seq range instead of from the start of the history: the chain
 * of one given seq (restore({ seq })), and a page of seqs (listCheckpoints). Each falls back to
 * `undefined` where only the whole log can tell (the seq is missing, below the retention floor,
 * or not a checkpoint), and the caller lists everything as before: a range costs speed when it
 * cannot be used, never a different answer.
 */
import type { Store } from '../../storage-adapters/store.js';
import type { Frame, FrameReading } from '../format/frame.js';
import type { CommittedView } from './committed.js';
import type { StreamKeys } from './keys.js';
import { listLog, tailKey } from './listing.js';
import { readFrame } from './read.js';

/**
 * Slots listed before the frame of the seq to restore is read, so that its base is usually among
 * them and the range need not be listed again: one listing of a few more keys, not a round more.
 * Three quarters of a chain with the default policy (a base at least every 32 checkpoints; bases
 * come sooner when deltas grow), and few enough that a restore still lists little more than its
 * own range.
 */
export const CHAIN_GUESS = 24;

/**
 * The view a restore of `seq` needs: the slots from its base to it, found by reading its frame
 * (which names its base) and listing that range; `undefined` when the whole log must decide. The
 * first listing already takes the CHAIN_GUESS slots up to `seq`; only a base below them is
 * listed again.
 */
export async function seqView(
  store: Store,
  keys: StreamKeys,
  seq: number,
  limits: FrameReading,
  signal?: AbortSignal,
): Promise<CommittedView | undefined> {
  const at = await listLog(store, keys, signal, Math.max(1, seq - CHAIN_GUESS + 1), seq, seq);
  const slot = at.slots[at.slots.length - 1];
  if (slot === undefined || slot.seq !== seq) return undefined;
  const frame = await readFrame(store, keys, seq, tailKey(slot), limits, signal, at.bodies);
  // A fence at the top is an uncommitted claim: the whole log tells what is committed below it.
  if (frame.kind === 'fence') return undefined;
  const base = frame.header.baseSeq;
  if (base === undefined || !Number.isSafeInteger(base) || base > seq || base < at.floor) return undefined;
  const listed = at.from !== undefined && base >= at.from;
  const log = listed
    ? { ...at, slots: at.slots.filter((s) => s.seq >= base), below: at.below.filter((s) => s.seq >= base), from: base }
    : await listLog(store, keys, signal, base, seq, base);
  const frames = new Map<number, Promise<Frame>>([[seq, Promise.resolve(frame)]]);
  return { log, slots: log.slots, tailSlot: undefined, tailFrame: undefined, frames };
}
