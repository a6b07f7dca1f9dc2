/**
 * findIndexed: the checkpoint where a stream's index key first reaches a given key, found through
 * the index objects an engine opened with `index` writes after each base (writer/index-objects.ts),
 * in two dependent store rounds whatever the length of history: the index page beside the floors
 * and hints, then one read of a window of the log.
 *
 * An index object `(K, P, B)` says: base `B` has key `K`, and the chain from base `P` to `B - 1`
 * has no key above it. Keys never decrease along a stream, so the first object whose key is at
 * least the one sought names a window `[P, B + 8]` that holds the **transition**: the first seq
 * whose key reaches it. An object is only a hint. An answer comes from a window only when its
 * frames show the transition in it (the seq before has a lower key, or is deleted history), with
 * frames at or above the retention floor listed in the same round; anything else (no object, a
 * lost or stale or forged one, a window that does not show it) answers undefined, and the caller
 * searches the stream as it would without an index. A wrong object costs a search, never a wrong
 * answer.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertStore, invalidArgument, readingOf } from '../args.js';
import { isStatefoldError } from '../errors.js';
import { decodeMeta, type Frame } from '../format/frame.js';
import { committedView } from '../log/committed.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { indexKeyError, StreamKeys } from '../log/keys.js';
import { listLog, tailKey } from '../log/listing.js';
import { readFrame, vanished } from '../log/read.js';
import { MAX_RANGE } from './range.js';
import { readChain } from './read-chain.js';
import { resolveSchema } from '../schema.js';
import type { Restored, RestoreOptions } from './types.js';

/** A committed checkpoint of the window read, with its meta. */
export interface IndexedEntry {
  seq: number;
  meta: unknown;
}

/** Options of `findIndexed`. */
export interface FindIndexedOptions extends Omit<RestoreOptions, 'seq' | 'skipDamaged'> {
  /** The key sought: the transition is the first checkpoint whose index key is at least this. */
  key: string;
  /** The stream's index (the function its engines are opened with: EngineOptions.index). */
  index: (meta: unknown) => string | undefined;
  /**
   * Given the window's checkpoints from the transition on (ascending, consecutive, each with its
   * meta), the seqs among them to restore; `[]` when what is sought is not there; undefined when
   * the window cannot tell (findIndexed then answers undefined).
   */
  select: (entries: IndexedEntry[]) => number[] | undefined | Promise<number[] | undefined>;
}

/** What `findIndexed` found: the window's checkpoints from the transition on, and the states selected. */
export interface IndexedFind<S> {
  entries: IndexedEntry[];
  /** The selected seqs restored, ascending. */
  restored: Restored<S>[];
}

/** Seqs read past an index object's base: the run of the transition's checkpoint (its writes, its effects). */
const RUN = 8;
/** Index objects listed at once (several when objects of deleted history sort first). */
const PAGE = 8;

/**
 * Finds the first checkpoint of `stream` whose index key (`options.index` of its meta) is at
 * least `options.key`, and restores what `options.select` picks from there, in two dependent store
 * rounds on a store that scans (three on one that does not). Undefined when the index cannot
 * answer: the stream has no index objects, they are lost or wrong, or the window read does not
 * show the transition. Then search the stream (listCheckpoints) as without an index. A damaged
 * checkpoint in the window rejects CORRUPT, as restore does.
 */
export async function findIndexed<S = unknown>(
  store: Store,
  stream: string,
  options: FindIndexedOptions,
): Promise<IndexedFind<S> | undefined> {
  assertStore(store, 'findIndexed');
  const keys = new StreamKeys(stream);
  assertOptions(options, 'findIndexed', keys.stream);
  const wrong = indexKeyError(options?.key);
  if (wrong !== undefined) invalidArgument('findIndexed', `key ${wrong}`, keys.stream);
  if (typeof options.index !== 'function' || typeof options.select !== 'function')
    invalidArgument('findIndexed', 'index and select must be functions', keys.stream);
  const limits = readingOf(options, 'findIndexed');
  const schema = resolveSchema(options.schema, 'findIndexed', keys.stream);
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'findIndexed'));
  const { signal, key } = options;
  const opt = signal ? { signal } : {};
  // Round 1: the first index objects from the key on, the floors, and the hints (whose newest base
  // starts the window when no object reaches the key: the newest chain has none yet).
  const [page, floors, hints] = await Promise.all([
    store.list(keys.index, { ...opt, startAfter: keys.indexFrom(key), limit: PAGE }),
    store.list(keys.floors, opt),
    store.list(keys.hints, opt),
  ]);
  let floor = 1;
  for (const k of floors) floor = Math.max(floor, keys.parseFloor(k) ?? 1);
  let from: number | undefined;
  let to = 0;
  for (const k of page) {
    const object = keys.parseIndex(k);
    if (object === undefined || object.key < key || object.base <= floor) continue; // (deleted history)
    from = object.prev;
    to = Math.min(object.base + RUN, object.prev + MAX_RANGE - 1);
    break;
  }
  if (from === undefined) {
    if (page.length === PAGE) return undefined; // (a page of deleted history: search)
    let hinted = 0;
    for (const k of hints) hinted = Math.max(hinted, keys.parseHint(k) ?? 0);
    if (hinted < floor) return undefined;
    from = hinted;
    to = hinted + MAX_RANGE - 1;
  }
  const index = (meta: unknown): string | undefined => {
    try {
      return options.index(meta);
    } catch {
      return undefined;
    }
  };
  try {
    // Round 2: the window, its frames with their keys on a store that scans, and the floors again
    // (a floor that moved since round 1 sets what is below it apart: no answer from deleted history).
    const listed = await listLog(store, keys, signal, from, to, from);
    const frames = new Map<number, Promise<Frame>>();
    for (const slot of listed.slots) {
      const frame = readFrame(store, keys, slot.seq, tailKey(slot), limits, signal, listed.bodies);
      frame.catch(() => undefined); // (surfaces where it is used)
      frames.set(slot.seq, frame);
    }
    const view = await committedView(store, listed, limits, signal, frames);
    // The window's checkpoints, up to the first that cannot be read (damaged: the search that
    // follows decides whether the answer needs it) or that a race left as a fence (retention or a
    // delete moved the floor between the listing and the scan) or a gap.
    const entries: (IndexedEntry & { key: string | undefined; frame: Frame })[] = [];
    for (const slot of view.slots) {
      if (entries.length > 0 && slot.seq !== entries[entries.length - 1]!.seq + 1) break;
      const frame = await frames.get(slot.seq)!.catch((err: unknown) => {
        if (isStatefoldError(err, 'CORRUPT')) return undefined;
        throw err;
      });
      if (frame === undefined || frame.kind === 'fence') break;
      let meta: unknown;
      try {
        meta = decodeMeta(frame, { stream: keys.stream, key: tailKey(slot), seq: slot.seq });
      } catch (err) {
        if (isStatefoldError(err, 'CORRUPT')) break;
        throw err;
      }
      entries.push({ seq: slot.seq, meta, key: index(meta), frame });
    }
    const at = entries.findIndex((e) => e.key !== undefined && e.key >= key);
    if (at < 0) return undefined;
    const before = entries[at - 1];
    const t = entries[at]!.seq;
    // The transition is shown by the seq before it, or by being the oldest retained seq (the
    // floor listed in this round: everything below it is deleted history, or there is none).
    const shown =
      before !== undefined ? before.seq === t - 1 && before.key !== undefined && before.key < key : t === listed.floor;
    if (!shown) return undefined;
    const run = entries.slice(at).map(({ seq, meta }) => ({ seq, meta }));
    const picked = await options.select(run);
    if (picked === undefined) return undefined;
    const wanted = [...new Set(picked)].sort((a, b) => a - b);
    const bySeq = new Map(entries.map((e) => [e.seq, e]));
    for (const seq of wanted) {
      const entry = bySeq.get(seq);
      if (entry === undefined || seq < t) invalidArgument('findIndexed', `select gave seq ${seq}, not of the window`);
      // A chain whose base the window did not read (span deltas, a pile): not answered here.
      if ((entry.frame.header.baseSeq ?? 0) < from) return undefined;
    }
    const found = new Map<number, Restored<S>>();
    for (const seq of [...wanted].reverse()) {
      if (found.has(seq)) continue;
      const chain = await readChain<S>(store, view, seq, limits, {
        ...opt,
        keepFrom: wanted[0]!,
        schema,
        op: 'findIndexed',
      });
      for (const r of [...chain.kept, chain.restored]) if (wanted.includes(r.seq)) found.set(r.seq, r);
    }
    if (found.size !== wanted.length) return undefined; // (a span delta jumped over one)
    return { entries: run, restored: wanted.map((seq) => found.get(seq)!) };
  } catch (err) {
    // Deleted while read (retention moved on): the search that follows lists again.
    if (vanished(err) || isStatefoldError(err, 'NOT_FOUND')) return undefined;
    throw err;
  }
}
