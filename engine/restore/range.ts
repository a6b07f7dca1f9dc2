/**
 * restoreRange: the states of a run of consecutive seqs, each chain read and folded once. A
 * restore of each seq on its own reads its base and every delta up to it again: for the seqs of
 * one chain that is the same objects read and decoded once per seq. Here the newest seq of the
 * range is restored, the states the fold passes through on the way are copied out, and only seqs
 * it did not pass through (below its base, or passed over by a span delta) need another chain.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertSeq, assertStore, invalidArgument, readingOf } from '../args.js';
import type { Frame, FrameReading } from '../format/frame.js';
import { committedView, type CommittedView } from '../log/committed.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { listLog, tailKey } from '../log/listing.js';
import { CHAIN_GUESS, seqView } from '../log/range.js';
import { readFrame, relistOnVanish } from '../log/read.js';
import { readChain } from './read-chain.js';
import { resolveSchema } from '../schema.js';
import type { Restored, RestoreOptions } from './types.js';

/** Most seqs one call restores: each state but the newest is copied out of the fold. */
export const MAX_RANGE = 64;

/** Options of `restoreRange`. */
export interface RestoreRangeOptions extends Omit<RestoreOptions, 'seq' | 'skipDamaged'> {
  /** The first seq of the range. */
  from: number;
  /** The last seq of the range (at most MAX_RANGE - 1 after `from`). */
  to: number;
}

/**
 * Restores every committed checkpoint from seq `from` to seq `to` (at most 64 seqs), ascending.
 * Seqs the range holds no checkpoint for (never committed, or deleted by retention) are left
 * out, so the result may be shorter than the range or empty; a damaged checkpoint rejects CORRUPT,
 * as `restore` does. Each state is its own copy. Reading the states of consecutive seqs this way
 * reads and decodes each chain once, where a `restore` per seq reads the chain again for each.
 */
export async function restoreRange<S = unknown>(
  store: Store,
  stream: string,
  options: RestoreRangeOptions = {} as RestoreRangeOptions,
): Promise<Restored<S>[]> {
  assertStore(store, 'restoreRange');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'restoreRange', keys.stream);
  const { from, to } = options;
  assertSeq(from, keys.stream, 'restoreRange', 'from');
  assertSeq(to, keys.stream, 'restoreRange', 'to');
  if (to < from) invalidArgument('restoreRange', `to ${to} is below from ${from}`, keys.stream);
  if (to - from >= MAX_RANGE)
    invalidArgument('restoreRange', `${to - from + 1} seqs from ${from} to ${to}: at most ${MAX_RANGE}`, keys.stream);
  const limits = readingOf(options, 'restoreRange');
  const schema = resolveSchema(options.schema, 'restoreRange', keys.stream);
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'restoreRange'));
  const { signal } = options;
  return relistOnVanish(async () => {
    const found = new Map<number, Restored<S>>();
    const read = async (view: CommittedView, target: number): Promise<void> => {
      const chain = await readChain<S>(store, view, target, limits, {
        ...options,
        keepFrom: from,
        schema,
        op: 'restoreRange',
      });
      for (const restored of [...chain.kept, chain.restored]) found.set(restored.seq, restored);
    };
    /** A seq's chain on its own, listed from the base its frame names (as `restore({ seq })` lists it). */
    const alone = async (seq: number): Promise<void> =>
      read(
        (await seqView(store, keys, seq, limits, signal)) ??
          (await committedView(store, await listLog(store, keys, signal), limits, signal)),
        seq,
      );
    // One listing of the range and of CHAIN_GUESS slots below it, where its bases usually are;
    // then every frame of the range at once: they tell which slots are committed, and where each
    // chain starts; then the chains, together.
    const listed = await listLog(store, keys, signal, Math.max(1, from - CHAIN_GUESS + 1), to, from);
    const frames = new Map<number, Promise<Frame>>();
    for (const slot of listed.slots) {
      if (slot.seq < from) continue;
      const frame = readFrame(store, keys, slot.seq, tailKey(slot), limits, signal, listed.bodies);
      frame.catch(() => undefined); // (surfaces where it is used)
      frames.set(slot.seq, frame);
    }
    const view = await committedView(store, listed, limits, signal, frames);
    const committed = view.slots.map((slot) => slot.seq).filter((seq) => seq >= from && seq <= to);
    const chains: Promise<void>[] = [];
    let below = Infinity; // (seqs from here up are in a chain already started)
    for (const seq of [...committed].reverse()) {
      if (seq >= below) continue;
      const base = (await frames.get(seq)!).header.baseSeq;
      const listedBase = base !== undefined && Number.isSafeInteger(base) && base <= seq && base >= (listed.from ?? 1);
      chains.push(listedBase ? read(view, seq) : alone(seq));
      below = listedBase ? base : seq;
    }
    await Promise.all(chains);
    // Seqs a span delta jumped over: each on its own.
    for (const seq of committed) if (!found.has(seq)) await alone(seq);
    return [...found.values()].sort((a, b) => a.seq - b.seq);
  });
}
