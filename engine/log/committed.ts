/**
 * The committed part of a listed log. A slot is committed when its last key holds a checkpoint;
 * only the newest slot can end in a fence (an engine claimed it and has not committed yet), so
 * reading the tail frame is enough to tell.
 */
import type { Store } from '../../storage-adapters/store.js';
import type { Frame, FrameReading } from '../format/frame.js';
import type { LogListing, Slot } from './listing.js';
import { tailKey } from './listing.js';
import { readFrame } from './read.js';

/** The committed part of a log: every slot up to the newest committed one. */
export interface CommittedView {
  log: LogListing;
  /** Committed slots, ascending (a trailing slot that holds only a fence is left out). */
  slots: Slot[];
  /** The last listed slot and its decoding frame, read to tell a fence from a checkpoint. */
  tailSlot: Slot | undefined;
  tailFrame: Frame | undefined;
  /** Frames already being read, by seq (the hinted listing reads them all at once); readers use them. */
  frames?: Map<number, Promise<Frame>>;
  /** The slot of a delete fence found above every committed slot: the stream was deleted up to it (admin/delete.ts). */
  deletedAt?: number;
}

/**
 * Reads the tail of a listed log to tell which slots are committed: every slot up to the newest
 * one whose last key holds a checkpoint. Normally only the newest slot can end in a fence; after a
 * claim jumped ahead of a busy writer and crashed before filling (or two claims jumped at once), a
 * few slots below it can too, until the next claim fills them: each is read, from the top down.
 * A delete fence met on the way down ends it: nothing below it is committed any more.
 */
export async function committedView(
  store: Store,
  log: LogListing,
  limits: FrameReading,
  signal?: AbortSignal,
  frames?: Map<number, Promise<Frame>>,
): Promise<CommittedView> {
  const read = (slot: Slot): Promise<Frame> =>
    frames?.get(slot.seq) ?? readFrame(store, log.keys, slot.seq, tailKey(slot), limits, signal, log.bodies);
  const tailSlot = log.slots[log.slots.length - 1];
  if (tailSlot === undefined) return { log, slots: [], tailSlot: undefined, tailFrame: undefined };
  const tailFrame = await read(tailSlot);
  // Down the fences to the newest checkpoint; a delete fence on the way means none is left.
  let end = log.slots.length;
  let frame = tailFrame;
  while (frame.kind === 'fence' && frame.header.deleted !== true && end > 1) frame = await read(log.slots[--end - 1]!);
  const deleted = frame.kind === 'fence' && frame.header.deleted === true;
  const view: CommittedView = { log, slots: log.slots.slice(0, frame.kind === 'fence' ? 0 : end), tailSlot, tailFrame };
  if (deleted) view.deletedAt = log.slots[end - 1]!.seq;
  if (frames !== undefined) view.frames = frames;
  return view;
}
