/**
 * What a write of a StatefoldSaver thread is (see Thread.write): the function that makes the next
 * state from the newest, what it returns, and a write as it waits in its batch.
 */
import type { ThreadMeta, ThreadState } from './codec.js';
import type { Entry } from './locate.js';

/** A committed seq with its state. */
export interface Head extends Entry {
  state: ThreadState;
}

/** What a write commits: the next state and its meta; undefined commits nothing. */
export type Change = { state: ThreadState; meta: ThreadMeta } | undefined;

/** What a write's `next` returns to be asked again once the batch so far is committed. */
export const AFTER_COMMIT: unique symbol = Symbol('after commit');

/**
 * What a write makes of `head` (the newest state with the writes before it in its batch applied)
 * given `committed` (the newest durable state; `head === committed` when nothing is pending).
 */
export type Next = (head: Head | undefined, committed: Head | undefined) => Promise<Change | typeof AFTER_COMMIT>;

export interface Queued {
  next: Next;
  /** The last write of its batch (a step's put): the commit starts without waiting for the turn's end. */
  last: boolean;
  resolve(): void;
  reject(err: unknown): void;
  settled: boolean;
}
