/**
 * How a thread's checkpoint ids map to the seqs of its stream: the metas of its seqs, read by page
 * or one at a time, and the lookup of the seq holding a checkpoint id.
 */
import {
  isStatefoldError,
  listCheckpoints,
  readCheckpointMeta,
  type CheckpointEntry,
  type ListCheckpointsOptions,
  type Store,
} from '../../engine/index.js';
import { threadMeta, type ThreadMeta } from './codec.js';

/** A committed seq of a thread's stream with its meta. */
export interface Entry {
  seq: number;
  meta: ThreadMeta;
}

/** Entries read per page when a thread's history is scanned. */
export const PAGE = 32;

export class ThreadLocator {
  /**
   * Checkpoint id -> the newest seq this process saw holding it. Sealed: a later seq holds another
   * id, so no later seq holds this one except as a re-commit, which every later meta's `revs` names.
   */
  protected readonly seqs = new Map<string, { seq: number; sealed: boolean }>();

  constructor(
    readonly stream: string,
    protected readonly store: Store,
    protected readonly reading: Pick<ListCheckpointsOptions, 'encryption' | 'storeTimeoutMs' | 'maxPayloadBytes'>,
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

  protected entryOf(entry: CheckpointEntry): Entry {
    return { seq: entry.seq, meta: threadMeta(entry.meta, this.stream, entry.seq) };
  }

  /** The newest committed seq and its meta, from the store (another replica may have written since). */
  async newest(): Promise<Entry | undefined> {
    return (await this.page(undefined, 1))[0];
  }

  /** The meta at committed `seq` (usually one store read: the binary search in locate probes many), or undefined. */
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
   * running largest id each meta carries finds the first, reads forward the newest. A stream
   * whose ids were not put in increasing order falls back to a scan. What this process saw is
   * remembered: a sealed seq answers at once, another is read forward from (another replica may
   * have committed the same id after it).
   */
  async locate(id: string, newest: Entry | undefined): Promise<number | undefined> {
    if (newest === undefined) return undefined;
    const { meta } = newest;
    if (meta.id === id) return newest.seq;
    const revised = meta.revs?.[id];
    if (revised !== undefined) return revised;
    if (meta.max === null || id > meta.max) return undefined;
    const known = this.seqs.get(id);
    if (known?.sealed) return known.seq;
    const lo = known?.seq ?? (await this.#firstWithMax(id, newest.seq));
    if (lo === undefined) return this.#scan(id, newest.seq);
    let found: number | undefined;
    let sealed = false;
    for (let seq = lo; seq <= newest.seq; seq++) {
      const entry = seq === newest.seq ? newest : await this.metaAt(seq);
      if (entry === undefined) break;
      if (entry.meta.id !== id || (entry.meta.rev && seq !== lo)) {
        sealed = true;
        break;
      }
      found = seq;
    }
    if (found === undefined) return this.#scan(id, newest.seq);
    this.seqs.set(id, { seq: found, sealed });
    return found;
  }

  /** The first seq whose running largest id is at least `id` (binary search), or undefined when a seq is missing. */
  async #firstWithMax(id: string, newest: number): Promise<number | undefined> {
    const oldest = (await this.forward(undefined, 1))[0];
    if (oldest === undefined) return undefined;
    let lo = oldest.seq;
    let hi = newest;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const probe = await this.metaAt(mid);
      if (probe === undefined) return undefined;
      if (probe.meta.max !== null && probe.meta.max >= id) hi = mid;
      else lo = mid + 1;
    }
    return lo;
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
