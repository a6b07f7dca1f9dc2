/**
 * Hints: after each base it commits, a writer records `<stream>/hint/<seq>` (and drops the older
 * ones), so that a reader after the newest checkpoint lists the log from that base instead of its
 * whole history (Delta Lake's `_last_checkpoint`). A hint is only ever a hint: the listing from it
 * must start with that base, else (a stale or damaged hint) the whole log is listed. A hint whose
 * base and everything after it are gone means the newest objects were deleted: CORRUPT.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import type { Frame, FrameReading } from '../format/frame.js';
import { spanPath } from './chain.js';
import { committedView, type CommittedView } from './committed.js';
import type { StreamKeys } from './keys.js';
import { listLog, tailKey, type Slot } from './listing.js';
import { readFrame } from './read.js';

/** Most slots read at once after a hinted listing (a fresh hint lists one chain: baseEvery slots, plus fences). */
const PREFETCH = 64;

/** Starts reading the frame of every slot; a failure surfaces only where that frame is used. */
function prefetch(
  store: Store,
  keys: StreamKeys,
  slots: Slot[],
  limits: FrameReading,
  signal?: AbortSignal,
  bodies?: ReadonlyMap<string, Uint8Array>,
): Map<number, Promise<Frame>> {
  const frames = new Map<number, Promise<Frame>>();
  for (const slot of slots) {
    const frame = readFrame(store, keys, slot.seq, tailKey(slot), limits, signal, bodies);
    frame.catch(() => undefined);
    frames.set(slot.seq, frame);
  }
  return frames;
}

/** The newest base seq a hint names, with its chain's span length; undefined when there is none. */
export async function readHint(
  store: Store,
  keys: StreamKeys,
  signal?: AbortSignal,
): Promise<{ seq: number; span: number | undefined } | undefined> {
  let newest: { seq: number; span: number | undefined } | undefined;
  for (const key of await store.list(keys.hints, signal ? { signal } : undefined)) {
    const hint = keys.parseHintKey(key);
    if (hint !== undefined && (newest === undefined || hint.seq > newest.seq)) newest = hint;
  }
  return newest;
}

/**
 * The slots a restore of the newest listed seq reads, for a chain from `base` with span length
 * `span` (see restore/read-chain.ts): the base, each span position, the seqs after the last; every
 * slot when there are no span deltas.
 */
function pathOf(slots: Slot[], base: number, span: number | undefined): Slot[] {
  if (span === undefined) return slots;
  const path = new Set(spanPath(base, span, slots[slots.length - 1]!.seq));
  return slots.filter((s) => path.has(s.seq));
}

/**
 * The committed view as far as the newest checkpoint needs it: from the hinted base on when there
 * is a hint that holds, the whole log otherwise. Every seq from the view's first slot on restores.
 * With `readAhead` (the default) every frame of a hinted listing is requested at once, for a
 * caller that reads the whole newest chain.
 */
export async function newestView(
  store: Store,
  keys: StreamKeys,
  limits: FrameReading,
  signal?: AbortSignal,
  /**
   * true: every frame of the hinted listing, requested at once; 'scan': on a store that scans, the
   * frames' bytes with their keys (none requested); 'deltas': the same but the base's (a page of
   * older entries, which reads the newest only to know where it is); false: keys only.
   */
  readAhead: boolean | 'scan' | 'deltas' = true,
): Promise<CommittedView> {
  const hinted = await readHint(store, keys, signal);
  if (hinted !== undefined) {
    const hint = hinted.seq;
    // (A store that scans gives the frames with their keys, for a caller that reads them all: not
    // with span deltas, whose restore reads only the span path. A caller that reads the newest
    // entries gets the base's bytes too: when the base is the newest checkpoint, its frame tells
    // that it is committed, and a get after the listing would be one dependent round more.)
    const log = await listLog(
      store,
      keys,
      signal,
      hint,
      undefined,
      hinted.span !== undefined
        ? undefined
        : readAhead === true || readAhead === 'scan'
          ? hint
          : readAhead === 'deltas'
            ? hint + 1
            : undefined,
    );
    // Nothing from the hinted base on. Deleted history, when a floor above the hint says so or
    // the hint itself has gone since (a deleteStream, or retention behind a newer base): the whole
    // listing tells what is left. Otherwise the newest objects were deleted.
    const empty = log.slots.length === 0 && log.below.length === 0;
    if (empty && log.floor <= hint && (await readHint(store, keys, signal))?.seq === hint) {
      throw new StatefoldError(
        'CORRUPT',
        `stream ${JSON.stringify(keys.stream)}: a hint says seq ${hint} was committed as a base, but no object from seq ${hint} on is left (the newest objects were deleted?)`,
        { stream: keys.stream, seq: hint, key: keys.hint(hint, hinted.span) },
      );
    }
    if (log.slots[0]?.seq === hint) {
      // The chain of the newest checkpoint is at most these slots: read the ones its restore
      // reads in one round (should the newest slot turn out uncommitted, the chain reads the rest).
      const path = pathOf(log.slots, hint, hinted.span);
      const frames =
        readAhead === true && path.length <= PREFETCH
          ? prefetch(store, keys, path, limits, signal, log.bodies)
          : undefined;
      const view = await committedView(store, log, limits, signal, frames);
      if (view.slots.length > 0) return view;
    }
  }
  return committedView(store, await listLog(store, keys, signal), limits, signal);
}
