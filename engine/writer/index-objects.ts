/**
 * Writes an index object after each base of a stream opened with an index (EngineOptions.index):
 * in the background, in order, never failing a checkpoint. See restore/indexed.ts for how readers
 * use them and why a missing or wrong one costs a search, never a wrong answer.
 */
import type { Store } from '../../storage-adapters/store.js';
import { decodeValue } from '../format/values.js';
import { indexKeyError, type StreamKeys } from '../log/keys.js';

/** Gives the index key of a checkpoint from its meta (undefined: none); keys must never decrease along a stream. */
export type IndexOf = (meta: unknown) => string | undefined;

/** Most seqs one merged object may span (a lookup reads it and 8 seqs more, at most 64). */
const MERGED_MOST = 48;

/** Queues and writes one stream's index objects. */
export class IndexWriter {
  readonly #queue: { key: string; prev: number; base: number }[] = [];
  #running: Promise<void> | undefined;

  constructor(
    private readonly store: Store,
    private readonly keys: StreamKeys,
    private readonly indexOf: IndexOf,
  ) {}

  /**
   * Base `base` committed, its chain following the chain of base `prev` (0: none), with `meta`
   * (as stored): queue the object that says no checkpoint from `prev` to `base - 1` has a key above
   * `base`'s. Nothing is queued for the first base, a meta without a key, or a key out of bounds.
   */
  afterBase(base: number, prev: number, meta: Uint8Array | undefined): void {
    if (prev < 1 || prev >= base) return;
    let key: string | undefined;
    try {
      key = this.indexOf(meta === undefined ? undefined : decodeValue(meta));
    } catch {
      return; // (the caller's function: a key it cannot give is no key)
    }
    if (key === undefined || indexKeyError(key) !== undefined) return;
    // Bases faster than the store takes objects: the queued object just before this one merges
    // into it ((K1, P, B1) and (K2, B1, B2) say what (K2, P, B2) says), over a window a lookup
    // still reads in one range.
    const last = this.#queue[this.#queue.length - 1];
    if (last !== undefined && last.base === prev && base - last.prev <= MERGED_MOST) {
      last.key = key;
      last.base = base;
      return;
    }
    this.#queue.push({ key, prev, base });
    this.#running ??= this.#write().finally(() => (this.#running = undefined));
  }

  /** Resolves when no object is queued or being written. */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async #write(): Promise<void> {
    for (let next = this.#queue.shift(); next !== undefined; next = this.#queue.shift()) {
      try {
        await this.store.putIfAbsent(this.keys.indexEntry(next.key, next.prev, next.base), new Uint8Array(0));
      } catch {
        // Only an index: a reader without this object searches that chain instead.
      }
    }
  }
}
