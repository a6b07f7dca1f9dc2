/**
 * A thread's checkpoints read by runs of seqs: a checkpoint with the seq after it (which holds its
 * writes when the two were committed together), and a `list` page a window of seqs at a time,
 * each chain of the stream read and folded once (restoreRange) instead of once per checkpoint.
 */
import { restoreRange, type Store } from '../../engine/index.js';
import { threadMeta, type ThreadMeta, type ThreadState } from './codec.js';
import type { Entry, Reading } from './locate.js';

export type { Reading } from './locate.js';

/** A seq's state with the meta stored with it (as stored, not checked). */
export interface Stored {
  state: ThreadState;
  meta: unknown;
}

/** Most seqs restored together (restoreRange's limit). */
const WINDOW = 64;

/** Whether `after`, the entry of the seq after checkpoint `id`'s, was committed with `id`'s writes. */
export function carries(after: Entry, id: string): boolean {
  return after.meta.pw === true && after.meta.parent === id;
}

/** The retained seqs from `from` to `to` (at most 64), restored together, by seq. */
export async function restoreRun(
  store: Store,
  stream: string,
  reading: Reading,
  from: number,
  to: number,
): Promise<Map<number, Stored>> {
  const run = await restoreRange<ThreadState>(store, stream, { ...reading, from, to });
  return new Map(run.map((r) => [r.seq, { state: r.state, meta: r.meta }]));
}

/**
 * Checkpoint `id` at `seq`, from what its seq (`at`) and the next (`next`) hold: the state with
 * the checkpoint's own writes (the next seq's when it was committed with them), and its meta
 * (`known`, or the one stored with the state); undefined when `at` is gone or holds another id.
 */
export function checkpointOf(
  stream: string,
  id: string,
  seq: number,
  known: ThreadMeta | undefined,
  at: Stored | undefined,
  next: Stored | undefined,
): { state: ThreadState; meta: ThreadMeta } | undefined {
  if (at === undefined) return undefined;
  const meta = known ?? threadMeta(at.meta, stream, seq);
  if (meta.id !== id) return undefined;
  const { state } = at;
  const after = next === undefined ? undefined : { seq: seq + 1, meta: threadMeta(next.meta, stream, seq + 1) };
  const writes = (after !== undefined && carries(after, id) ? next!.state.writes[id] : undefined) ?? state.writes[id];
  return {
    state: writes === state.writes[id] ? state : { ...state, writes: { ...state.writes, [id]: writes! } },
    meta,
  };
}

/**
 * The seqs of a `list` page in windows of at most 64 (each seq with the one after it), each
 * window restored together when one of its seqs is first asked for: a page costs a chain read per
 * window, not one per checkpoint, and a caller that stops early restores no more windows.
 */
export class Windows {
  readonly #windows = new Map<number, { from: number; to: number; run?: Promise<Map<number, Stored>> }>();

  constructor(
    readonly store: Store,
    readonly stream: string,
    readonly reading: Reading,
    seqs: number[],
  ) {
    let window: { from: number; to: number } | undefined;
    for (const seq of [...seqs].sort((a, b) => a - b)) {
      if (window === undefined || seq + 1 - window.from >= WINDOW) window = { from: seq, to: seq + 1 };
      window.to = seq + 1;
      this.#windows.set(seq, window);
    }
  }

  /** The restored run holding `seq` and the seq after it. */
  run(seq: number): Promise<Map<number, Stored>> {
    const window = this.#windows.get(seq);
    if (window === undefined) return restoreRun(this.store, this.stream, this.reading, seq, seq + 1);
    return (window.run ??= restoreRun(this.store, this.stream, this.reading, window.from, window.to));
  }
}
