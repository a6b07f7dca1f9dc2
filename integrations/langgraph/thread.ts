/**
 * One (thread_id, checkpoint_ns) of a StatefoldSaver: its stream, the engine that writes it (opened
 * on the first write, re-opened when another replica fenced it), and the reads: the newest
 * checkpoint, a checkpoint id's seq, the state at a seq. Operations on one thread run one at a time,
 * in call order, so a read sees every write called before it.
 */
import {
  isStatefoldError,
  listCheckpoints,
  readCheckpointMeta,
  restore,
  SnapshotEngine,
  type CheckpointEntry,
  type EffectOptions,
  type EngineOptions,
  type ListCheckpointsOptions,
} from '../../engine/index.js';
import { threadMeta, type ThreadMeta, type ThreadState } from './codec.js';

/** A committed seq of a thread's stream with its meta. */
export interface Entry {
  seq: number;
  meta: ThreadMeta;
}

/** A committed seq with its state. */
export interface Head extends Entry {
  state: ThreadState;
}

/** What a write commits: the next state and its meta; undefined commits nothing. */
export type Change = { state: ThreadState; meta: ThreadMeta } | undefined;

/** How many times a write is re-tried after another writer fenced this one (each time after a re-open). */
const FENCED_RETRIES = 3;
/** Entries read per page when a thread's history is scanned. */
export const PAGE = 32;

export class Thread {
  #engine: SnapshotEngine<ThreadState> | undefined;
  #tail: Promise<unknown>;
  /** Operations queued or running, and effects running. */
  #busy = 0;
  /**
   * Checkpoint id -> the newest seq this process saw holding it. Sealed: a later seq holds another
   * id, so no later seq holds this one except as a re-commit, which every later meta's `revs` names.
   */
  readonly #seqs = new Map<string, { seq: number; sealed: boolean }>();

  constructor(
    readonly stream: string,
    readonly thread: string,
    readonly ns: string,
    private readonly engineOptions: Omit<EngineOptions, 'stream'>,
    private readonly reading: Pick<ListCheckpointsOptions, 'encryption' | 'storeTimeoutMs' | 'maxPayloadBytes'>,
    /** What this thread's first operation waits for (a previous writer of the stream closing). */
    after: Promise<unknown> = Promise.resolve(),
  ) {
    this.#tail = after;
  }

  /** Runs `op` after every operation called on this thread before it. */
  run<T>(op: () => Promise<T>): Promise<T> {
    this.#busy++;
    const result = this.#tail.then(op).finally(() => this.#busy--);
    this.#tail = result.catch(() => undefined);
    return result;
  }

  /** Whether an operation is queued or running, or an effect is running. */
  get busy(): boolean {
    return this.#busy > 0;
  }

  /** Whether no operation is queued or running. */
  async idle(): Promise<void> {
    await this.#tail;
  }

  /**
   * Commits what `next` makes of the newest state (undefined for a new stream), from this
   * process's engine. When another writer fenced it, re-opens (taking the stream back) and asks
   * `next` again with the newest state then committed, so a retried write builds on what is there.
   */
  async write(next: (head: Head | undefined) => Promise<Change>): Promise<Head | undefined> {
    for (let attempt = 0; ; attempt++) {
      const engine = await this.#open();
      const head = this.#engineHead(engine);
      const change = await next(head);
      if (change === undefined) return head;
      try {
        const info = await engine.checkpoint(change.state, { meta: change.meta });
        const { id } = change.meta;
        if (id !== null) {
          // Committed right after `head`: head's id, if another, holds no later seq but as a re-commit.
          if (head !== undefined && head.meta.id !== null && head.meta.id !== id)
            this.#seqs.set(head.meta.id, { seq: head.seq, sealed: true });
          this.#seqs.set(id, { seq: info.seq, sealed: false });
        }
        return { seq: info.seq, state: change.state, meta: change.meta };
      } catch (err) {
        if (!isStatefoldError(err, 'FENCED') || attempt >= FENCED_RETRIES) throw err;
        this.#engine = undefined;
      }
    }
  }

  /** Runs an effect on this thread's engine (see SnapshotEngine.effect). */
  async effect<T>(token: string, fn: (token: string) => T | Promise<T>, options?: EffectOptions<ThreadState, T>) {
    this.#busy++;
    try {
      const engine = await this.run(() => this.#open());
      return await engine.effect(token, fn, options);
    } finally {
      this.#busy--;
    }
  }

  async #open(): Promise<SnapshotEngine<ThreadState>> {
    if (this.#engine === undefined || this.#engine.fenced) {
      this.#engine = await SnapshotEngine.open<ThreadState>({
        ...this.engineOptions,
        stream: this.stream,
        updates: 'immutable',
      });
    }
    return this.#engine;
  }

  #engineHead(engine: SnapshotEngine<ThreadState>): Head | undefined {
    const state = engine.state;
    if (state === undefined) return undefined;
    return { seq: engine.seq, state, meta: threadMeta(engine.meta, this.stream, engine.seq) };
  }

  /** Closes this thread's engine, if it has one (after every queued operation). */
  async release(): Promise<void> {
    await this.run(async () => {
      const engine = this.#engine;
      this.#engine = undefined;
      if (engine === undefined) return;
      try {
        await engine.close();
      } catch (err) {
        // A fenced engine has nothing left to commit: another replica owns the thread now.
        if (!isStatefoldError(err, 'FENCED')) throw err;
      }
    });
  }

  /** Entries of the stream, newest first, `limit` from below seq `before`. */
  async page(before: number | undefined, limit: number): Promise<Entry[]> {
    const listed = await listCheckpoints(this.#store, this.stream, {
      ...this.reading,
      reverse: true,
      limit,
      ...(before === undefined ? {} : { before }),
    });
    return listed.map((entry) => {
      if (entry.damaged) throw entry.error;
      return this.#entry(entry);
    });
  }

  #entry(entry: CheckpointEntry): Entry {
    return { seq: entry.seq, meta: threadMeta(entry.meta, this.stream, entry.seq) };
  }

  get #store() {
    return this.engineOptions.store;
  }

  /** The newest committed seq and its meta, from the store (another replica may have written since). */
  async newest(): Promise<Entry | undefined> {
    return (await this.page(undefined, 1))[0];
  }

  /**
   * The newest committed seq with its state: this process's engine's when nothing was committed
   * since (one look at the store's newest seq), else restored from the store in one call.
   */
  async latest(): Promise<Head | undefined> {
    const engine = this.#engine;
    const state = engine?.state;
    if (engine !== undefined && state !== undefined && !engine.fenced && engine.pending === 0) {
      const newest = await this.newest();
      if (newest === undefined || newest.seq === engine.seq) return newest && { ...newest, state };
    }
    try {
      const restored = await restore<ThreadState>(this.engineOptions.store, this.stream, this.reading);
      return { seq: restored.seq, state: restored.state, meta: threadMeta(restored.meta, this.stream, restored.seq) };
    } catch (err) {
      if (isStatefoldError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  /** The state at `seq`: this process's engine's when it committed it, else restored from the store. */
  async stateAt(seq: number): Promise<ThreadState> {
    const engine = this.#engine;
    if (engine !== undefined && !engine.fenced && engine.seq === seq && engine.pending === 0) {
      const state = engine.state;
      if (state !== undefined) return state;
    }
    const restored = await restore<ThreadState>(this.#store, this.stream, { ...this.reading, seq });
    return restored.state;
  }

  /** The state at `seq`, or undefined when it is no longer stored (retention deleted it since it was located). */
  async keptStateAt(seq: number): Promise<ThreadState | undefined> {
    try {
      return await this.stateAt(seq);
    } catch (err) {
      if (isStatefoldError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  /** The meta at committed `seq` (usually one store read: the binary search in locate probes many), or undefined. */
  async metaAt(seq: number): Promise<Entry | undefined> {
    try {
      const meta = await readCheckpointMeta(this.#store, this.stream, seq, this.reading);
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
    const known = this.#seqs.get(id);
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
    this.#seqs.set(id, { seq: found, sealed });
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
    const listed = await listCheckpoints(this.#store, this.stream, {
      ...this.reading,
      limit,
      ...(after === undefined ? {} : { after }),
    });
    return listed.map((entry) => {
      if (entry.damaged) throw entry.error;
      return this.#entry(entry);
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
