/**
 * How a thread's checkpoint ids map to the seqs of its stream: the metas of its seqs, read by page
 * or one at a time, and the lookup of the seq holding a checkpoint id.
 */
import {
  findIndexed,
  isStatefoldError,
  listCheckpoints,
  readCheckpointMeta,
  type CheckpointEntry,
  type ListCheckpointsOptions,
  type Schema,
  type Store,
  newestCheckpoint,
  type Restored,
} from '../../engine/index.js';
import { threadMeta, type ThreadMeta, type ThreadState } from './codec.js';

/** A committed seq of a thread's stream with its meta. */
export interface Entry {
  seq: number;
  meta: ThreadMeta;
  /** The newest seq read from the store: its state, from what that read brought (no round more on a store that scans). */
  restore?: () => Promise<Restored<ThreadState>>;
}

/**
 * The index key of a thread's seq: its running largest checkpoint id, which never decreases along
 * the stream (nextMeta), so that an index object names the window where an id was first put.
 */
export function indexOf(meta: unknown): string | undefined {
  const max = (meta as Partial<ThreadMeta> | null | undefined)?.max;
  return typeof max === 'string' ? max : undefined;
}

/** An id that can be an index key (engine: 1 to 90 printable ASCII characters); others are never indexed. */
const INDEXABLE = /^[\x20-\x7e]{1,90}$/;

/** Whether the newest entry answers a lookup of `id` on its own, with no search (see ThreadLocator.locate). */
export function newestAnswers(id: string, newest: Entry | undefined): boolean {
  if (newest === undefined) return true;
  const { meta } = newest;
  return meta.id === id || meta.revs?.[id] !== undefined || meta.max === null || id > meta.max;
}

/** What a lookup through the index found: checkpoint id's newest seq, its state and the next seq's. */
export interface Indexed {
  seq: number;
  meta: ThreadMeta;
  /** The state at `seq` with the meta stored with it, and the next seq's, if the window read it. */
  at: { state: ThreadState; meta: unknown };
  next: { state: ThreadState; meta: unknown } | undefined;
}

/** What reads of a thread's stream are given (its encryption, limits, timeout, and the engine schema its state is read with). */
export type Reading = Pick<ListCheckpointsOptions, 'encryption' | 'storeTimeoutMs' | 'maxPayloadBytes'> & {
  schema?: Schema;
};

/** Entries read per page when a thread's history is scanned. */
export const PAGE = 32;

/** Metas read at once per round of the search for a checkpoint id's seq (each round cuts the range K + 1 ways). */
export const PROBES = 7;

export class ThreadLocator {
  /**
   * Checkpoint id -> the newest seq this process saw holding it. Sealed: a later seq holds another
   * id, so no later seq holds this one except as a re-commit, which every later meta's `revs` names.
   */
  protected readonly seqs = new Map<string, { seq: number; sealed: boolean }>();

  constructor(
    readonly stream: string,
    protected readonly store: Store,
    protected readonly reading: Reading,
  ) {}

  /** Entries of the stream, newest first, `limit` from below seq `before`. */
  async page(before: number | undefined, limit: number): Promise<Entry[]> {
    const listed = await listCheckpoints(this.store, this.stream, {
      ...this.reading,
      reverse: true,
      limit,
      ...(before === undefined ? {} : { before }),
    });
    return listed.map((entry) => {
      if (entry.damaged) throw entry.error;
      return this.entryOf(entry);
    });
  }

  protected entryOf(entry: Pick<CheckpointEntry, 'seq' | 'meta'>): Entry {
    return { seq: entry.seq, meta: threadMeta(entry.meta, this.stream, entry.seq) };
  }

  /** The newest committed seq and its meta, from the store (another replica may have written since), with a restore of it. */
  async newest(): Promise<Entry | undefined> {
    const found = await newestCheckpoint<ThreadState>(this.store, this.stream, this.reading);
    return found && { ...this.entryOf(found.entry), restore: found.restore };
  }

  /** The meta at committed `seq` (one store read), or undefined. */
  async metaAt(seq: number): Promise<Entry | undefined> {
    try {
      const meta = await readCheckpointMeta(this.store, this.stream, seq, this.reading);
      return { seq, meta: threadMeta(meta, this.stream, seq) };
    } catch (err) {
      if (isStatefoldError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  /**
   * The newest seq holding checkpoint `id`, or undefined when none does. The newest entry and its
   * record of re-committed checkpoints answer most lookups. Else the checkpoint was put as a new
   * largest id and its seqs follow each other (its writes, its effects): a binary search on the
   * running largest id each meta carries (several metas a round)
   * finds the first, reads forward the newest. `probed` collects the metas read, for the caller to reuse. A stream
   * whose ids were not put in increasing order falls back to a scan. What this process saw is
   * remembered: a sealed seq answers at once, another is read forward from (another replica may
   * have committed the same id after it).
   */
  async locate(
    id: string,
    newest: Entry | undefined,
    probed = new Map<number, Entry>(),
    /** The oldest retained entry, when the caller already started reading it (else read when needed). */
    oldest?: Promise<Entry | undefined>,
  ): Promise<number | undefined> {
    if (newest === undefined) return undefined;
    const { meta } = newest;
    if (meta.id === id) return newest.seq;
    const revised = meta.revs?.[id];
    if (revised !== undefined) return revised;
    if (meta.max === null || id > meta.max) return undefined;
    const known = this.seqs.get(id);
    if (known?.sealed) return known.seq;
    probed.set(newest.seq, newest);
    const lo = known?.seq ?? (await this.#firstWithMax(id, newest.seq, probed, oldest));
    if (lo === undefined) return this.#scan(id, newest.seq);
    let found: number | undefined;
    let sealed = false;
    // The seqs after the first are read a round at a time (a checkpoint's run is short: its writes,
    // its effects); metas the search read answer first, without a round.
    walk: for (let from = lo; from <= newest.seq;) {
      const seen = probed.has(from);
      const seqs = seen ? [from] : Array.from({ length: Math.min(PROBES, newest.seq - from + 1) }, (_, i) => from + i);
      const entries = seen ? [probed.get(from)] : await this.#metas(seqs, probed);
      for (const [i, entry] of entries.entries()) {
        const seq = seqs[i]!;
        if (entry === undefined) break walk;
        if (entry.meta.id !== id || (entry.meta.rev && seq !== lo)) {
          sealed = true;
          break walk;
        }
        found = seq;
      }
      from += seqs.length;
    }
    if (found === undefined) return this.#scan(id, newest.seq);
    this.seqs.set(id, { seq: found, sealed });
    return found;
  }

  /** Whether the thread's stream is written with an index (not when sealed: index keys are in the clear). */
  get indexed(): boolean {
    return this.reading.encryption === undefined;
  }

  /**
   * Checkpoint `id` found through the stream's index, beside the read of the newest entry
   * (`newest`, which answers first: its own id, a re-commit, an id above every one put):
   * `'absent'` when the index shows it was never put the ordinary way, undefined when the index
   * cannot tell (then `locate` searches). Two dependent store rounds on a store that scans.
   */
  async viaIndex(id: string, newest: Promise<Entry | undefined>): Promise<Indexed | 'absent' | undefined> {
    // (An id the index cannot hold, over 90 characters or not printable ASCII, was never indexed.)
    if (!this.indexed || !INDEXABLE.test(id)) return undefined;
    let sealed = false;
    const found = await findIndexed<ThreadState>(this.store, this.stream, {
      ...this.reading,
      key: id,
      index: indexOf,
      select: async (entries) => {
        // Nothing to restore when the newest seq answers on its own (the caller takes it from there).
        if (newestAnswers(id, await newest)) return undefined;
        // The transition: the first seq whose largest id reaches `id`. It holds `id`, or `id` was
        // not put as a new checkpoint; its run (its writes, its effects) follows it.
        const first = this.entryOf(entries[0]!);
        // (Not the id: it was never put as a new checkpoint, and every re-commit of it is in the
        // newest meta's `revs`, checked above.)
        if (first.meta.id !== id) return [];
        let last = first.seq;
        for (const entry of entries.slice(1)) {
          const meta = threadMeta(entry.meta, this.stream, entry.seq);
          if (meta.id !== id || meta.rev) {
            sealed = true;
            break;
          }
          last = entry.seq;
        }
        // A run that reaches the window's end goes on past it unless that is the newest seq.
        if (!sealed && (await newest)?.seq !== last) return undefined;
        return sealed ? [last, last + 1] : [last];
      },
    });
    if (found === undefined) return undefined;
    const [at, next] = found.restored;
    if (at === undefined) return 'absent';
    this.seqs.set(id, { seq: at.seq, sealed });
    return {
      seq: at.seq,
      meta: threadMeta(at.meta, this.stream, at.seq),
      at: { state: at.state, meta: at.meta },
      next: next && { state: next.state, meta: next.meta },
    };
  }

  /** Whether a lookup of `id` searches the stream (this process has not seen a seq holding it). */
  searches(id: string): boolean {
    return !this.seqs.has(id);
  }

  /** The metas at `seqs`, read in one round (those in `probed` are not read again; what is read is added to it). */
  async #metas(seqs: number[], probed: Map<number, Entry>): Promise<(Entry | undefined)[]> {
    return Promise.all(
      seqs.map(async (seq) => {
        const seen = probed.get(seq);
        if (seen !== undefined) return seen;
        const entry = await this.metaAt(seq);
        if (entry !== undefined) probed.set(seq, entry);
        return entry;
      }),
    );
  }

  /**
   * The first seq whose running largest id is at least `id`, or undefined when a seq is missing: a
   * search that reads PROBES metas at once per round, so that it takes log_{PROBES+1} dependent
   * rounds rather than log_2 (the metas are read anyway: reading them together costs no more calls).
   */
  async #firstWithMax(
    id: string,
    newest: number,
    probed: Map<number, Entry>,
    oldestRead: Promise<Entry | undefined> = this.oldest(),
    /** Whether the first round waits for the oldest seq (else only when it can matter, checked at the end). */
    wait = false,
  ): Promise<number | undefined> {
    // The oldest retained seq is looked up during the first round, not before it: seqs below it
    // (deleted by retention) read as missing there, and lie below the answer. Unless told to, the
    // first round waits for it only when a probe is missing or the answer may lie below the
    // lowest probe; the search then goes on, and the oldest is checked at its end: when it lies
    // above the lowest probe after all (retention; a stale seq below its floor may read), the
    // search is made again from it, as it would have been.
    oldestRead.catch(() => undefined); // (checked at the end)
    let lo = 1;
    let hi = newest;
    let lowestProbe: number | undefined;
    for (let round = 0; lo < hi || round === 0; round++) {
      // Probes split [lo, hi) evenly; the answer is in [lo, hi].
      const span = hi - lo;
      // A range the probes cover: every seq of it, and those after it up to a round's worth (the
      // walk from the answer reads them next), in this round.
      const covers = round > 0 && span < PROBES;
      const count = covers ? Math.min(PROBES, newest - lo + 1) : Math.min(PROBES, span);
      const seqs = covers
        ? Array.from({ length: count }, (_, i) => lo + i)
        : [...new Set(Array.from({ length: count }, (_, i) => lo + Math.floor(((i + 1) * span) / (count + 1))))];
      const entries = await this.#metas(seqs, probed);
      if (round === 0) {
        const lowest = entries[0]?.meta.max;
        if (wait || entries.includes(undefined) || lowest === undefined || lowest === null || lowest >= id) {
          const oldest = await oldestRead;
          if (oldest === undefined) return undefined;
          lo = Math.max(lo, oldest.seq);
        } else lowestProbe = seqs[0];
      }
      let nextLo = lo;
      let nextHi = hi;
      for (const [i, entry] of entries.entries()) {
        const seq = seqs[i]!;
        if (seq < lo) continue; // (below the oldest: deleted)
        if (seq > hi) break; // (read for the walk)
        if (entry === undefined) return undefined;
        if (entry.meta.max !== null && entry.meta.max >= id) {
          nextHi = Math.min(nextHi, seq);
          break;
        }
        nextLo = seq + 1;
      }
      lo = nextLo;
      hi = nextHi;
    }
    if (lowestProbe !== undefined) {
      const oldest = await oldestRead;
      if (oldest === undefined) return undefined;
      if (oldest.seq > lowestProbe) return this.#firstWithMax(id, newest, probed, oldestRead, true);
    }
    return lo;
  }

  /** The oldest retained seq and its meta. */
  async oldest(): Promise<Entry | undefined> {
    return (await this.forward(undefined, 1))[0];
  }

  /** Entries of the stream, oldest first, `limit` from above seq `after`. */
  async forward(after: number | undefined, limit: number): Promise<Entry[]> {
    const listed = await listCheckpoints(this.store, this.stream, {
      ...this.reading,
      limit,
      ...(after === undefined ? {} : { after }),
    });
    return listed.map((entry) => {
      if (entry.damaged) throw entry.error;
      return this.entryOf(entry);
    });
  }

  async #scan(id: string, from: number): Promise<number | undefined> {
    let before = from + 1;
    for (;;) {
      const entries = await this.page(before, PAGE);
      for (const entry of entries) if (entry.meta.id === id) return entry.seq;
      if (entries.length < PAGE) return undefined;
      before = entries[entries.length - 1]!.seq;
    }
  }
}
