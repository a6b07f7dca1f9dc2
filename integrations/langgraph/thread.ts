/**
 * One (thread_id, checkpoint_ns) of a StatefoldSaver: its stream, the engine that writes it (opened
 * on the first write, re-opened when another replica fenced it), and the reads: the newest
 * checkpoint, a checkpoint id's seq, the state at a seq. Operations on one thread run one at a time,
 * in call order, so a read sees every write called before it; writes called together are committed
 * together (see `write`).
 */
import assert from 'node:assert';
import {
  isStatefoldError,
  restore,
  SnapshotEngine,
  type EffectOptions,
  type EngineOptions,
  type ListCheckpointsOptions,
} from '../../engine/index.js';
import { threadMeta, type ThreadMeta, type ThreadState, type Writes } from './codec.js';
import { AFTER_COMMIT, type Change, type Head, type Next, type Queued } from './writes.js';
import { carries, checkpointOf, restoreRun, Windows } from './history.js';
import { indexOf, ThreadLocator, type Entry, type Reading } from './locate.js';
import { coalescing } from './coalesce.js';

export { PAGE, type Entry } from './locate.js';

export { AFTER_COMMIT, type Change, type Head, type Next } from './writes.js';

/** How many times a write is re-tried after another writer fenced this one (each time after a re-open). */
const FENCED_RETRIES = 3;

export class Thread extends ThreadLocator {
  #engine: SnapshotEngine<ThreadState> | undefined;
  #tail: Promise<unknown>;
  /** Operations queued or running, and effects running. */
  #busy = 0;
  /** The batch of writes a write called now joins: queued, its commit not started. */
  #batch: Queued[] | undefined;
  /** Starts the waiting batch's commit now, instead of at the turn's end. */
  #go: (() => void) | undefined;

  constructor(
    stream: string,
    readonly thread: string,
    readonly ns: string,
    private readonly engineOptions: Omit<EngineOptions, 'stream'>,
    reading: Reading,
    /** What this thread's first operation waits for (a previous writer of the stream closing). */
    after: Promise<unknown> = Promise.resolve(),
  ) {
    super(stream, coalescing(engineOptions.store), reading);
    this.#tail = after;
  }

  /** Runs `op` after every operation called on this thread before it. */
  run<T>(op: () => Promise<T>): Promise<T> {
    this.#batch = undefined; // a write called after `op` commits after it
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
   * Commits what `next` makes of the newest state (undefined for a new stream). Writes called
   * together (in one turn of the event loop, or while this thread was busy) are one batch, whose
   * commit starts after that turn: each `next` is asked in call order with the head the ones
   * before it made (`head`, not yet committed) and the newest committed head (`committed`), and
   * all their changes land in one engine checkpoint, one durable commit; each caller's promise
   * settles once that commit is durable, and rejects if it fails. A `next` that needs the store
   * to hold what `head` holds (a lookup by id) returns AFTER_COMMIT: what the batch has so far is
   * committed, and it is asked again with that head. A `next` that throws fails only its caller.
   * When another writer fenced this one, the thread re-opens (taking the stream back) and every
   * write not yet durable is asked again from the newest state then committed, so it builds on
   * what is there. See docs/langgraph.md, One commit per step.
   */
  write(next: Next, options?: { last?: boolean }): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const op: Queued = { next, last: options?.last === true, resolve, reject, settled: false };
      if (this.#batch !== undefined) {
        this.#batch.push(op);
        if (op.last) this.#go?.();
        return;
      }
      const batch = [op];
      this.run(() => this.#commitBatch(batch)).catch(() => undefined);
      this.#batch = batch; // (after run, which closes the batch before it to later writes)
    });
  }

  /** `write` of the last write of a batch (a step's put): the batch's commit starts once it joins. */
  writeLast(next: Next): Promise<void> {
    return this.write(next, { last: true });
  }

  async #commitBatch(batch: Queued[]): Promise<void> {
    // Writes called later in this turn (LangGraph's put right after a step's putWrites) join the
    // batch; a put ends it (LangGraph writes nothing more for the step), so the commit starts then,
    // not after whatever else the turn does.
    if (!batch.some((op) => op.last)) {
      await new Promise<void>((resolve) => {
        const timer = setImmediate(resolve);
        this.#go = () => {
          clearImmediate(timer);
          resolve();
        };
      });
      this.#go = undefined;
    }
    const settle = (ops: Queued[], err?: unknown) => {
      for (const op of ops) {
        if (op.settled) continue;
        op.settled = true;
        if (err === undefined) op.resolve();
        else op.reject(err);
      }
    };
    for (let attempt = 0, from = 0; ; attempt++) {
      let group: Queued[] = [];
      try {
        const engine = await this.#open();
        let committed = this.#engineHead(engine);
        let head = committed;
        for (let i = from; i < batch.length;) {
          const op = batch[i]!;
          let change: Change | typeof AFTER_COMMIT;
          try {
            change = op.settled ? undefined : await op.next(head, committed);
          } catch (err) {
            settle([op], err);
            change = undefined;
          }
          if (change === AFTER_COMMIT) {
            // (A saver bug, not a condition to handle: a write asks this only when something is pending.)
            assert(head !== committed, 'AFTER_COMMIT with nothing pending');
            committed = head = await this.#commit(engine, committed, head!);
            settle(group);
            group = [];
            from = i;
            continue;
          }
          if (change !== undefined) {
            const seq = change.meta === committed?.meta ? committed.seq : engine.seq + 1;
            head = { seq, state: change.state, meta: change.meta };
          }
          group.push(op);
          i++;
        }
        if (this.#batch === batch) this.#batch = undefined; // no write joins once its commit starts
        if (head !== committed) await this.#commit(engine, committed, head!);
        settle(group);
        return;
      } catch (err) {
        if (this.#batch === batch) this.#batch = undefined;
        if (!isStatefoldError(err, 'FENCED') || attempt >= FENCED_RETRIES) {
          settle(batch.slice(from), err);
          return;
        }
        this.#engine = undefined;
      }
    }
  }

  /** Commits `head` right after `committed` as one checkpoint; returns it as committed. */
  async #commit(engine: SnapshotEngine<ThreadState>, committed: Head | undefined, head: Head): Promise<Head> {
    const info = await engine.checkpoint(head.state, { meta: head.meta });
    const { id } = head.meta;
    if (id !== null) {
      // Committed right after `committed`: its id, if another, holds no later seq but as a re-commit.
      if (committed !== undefined && committed.meta.id !== null && committed.meta.id !== id)
        this.seqs.set(committed.meta.id, { seq: committed.seq, sealed: true });
      this.seqs.set(id, { seq: info.seq, sealed: false });
    }
    return { seq: info.seq, state: head.state, meta: head.meta };
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
        ...(this.indexed && { index: indexOf }),
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

  /**
   * The newest committed seq with its state: this process's engine's when nothing was committed
   * since (one look at the store's newest seq), else restored from the store: from what that look
   * read, or in one call.
   */
  async latest(): Promise<Head | undefined> {
    const engine = this.#engine;
    const state = engine?.state;
    let newest: Entry | undefined;
    if (engine !== undefined && state !== undefined && !engine.fenced && engine.pending === 0) {
      newest = await this.newest();
      if (newest === undefined || newest.seq === engine.seq)
        return newest && { seq: newest.seq, meta: newest.meta, state };
    }
    try {
      const fresh = () => restore<ThreadState>(this.engineOptions.store, this.stream, this.reading);
      // (What the look read may be gone since, retention behind a newer base: then read the newest again.)
      const restored = newest?.restore
        ? await newest.restore().catch((err: unknown) => {
            if (isStatefoldError(err, 'NOT_FOUND')) return fresh();
            throw err;
          })
        : await fresh();
      return { seq: restored.seq, state: restored.state, meta: threadMeta(restored.meta, this.stream, restored.seq) };
    } catch (err) {
      if (isStatefoldError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  /** The state at `seq`: this process's engine's when it committed it, else restored from the store. */
  async stateAt(seq: number): Promise<ThreadState> {
    return (await this.#at(seq)).state;
  }

  /** The state at `seq`, or undefined when it is no longer stored (retention deleted it since it was located). */
  async keptStateAt(seq: number): Promise<ThreadState | undefined> {
    return (await this.#keptAt(seq))?.state;
  }

  /** The state at `seq` with the meta stored with it (as given, not checked), as stateAt reads them. */
  async #at(seq: number, newest?: Entry): Promise<{ state: ThreadState; meta: unknown }> {
    const engine = this.#engine;
    if (engine !== undefined && !engine.fenced && engine.seq === seq && engine.pending === 0) {
      const state = engine.state;
      if (state !== undefined) return { state, meta: engine.meta };
    }
    const restored =
      newest?.seq === seq && newest.restore !== undefined
        ? await newest.restore()
        : await restore<ThreadState>(this.store, this.stream, { ...this.reading, seq });
    return { state: restored.state, meta: restored.meta };
  }

  async #keptAt(seq: number, newest?: Entry): Promise<{ state: ThreadState; meta: unknown } | undefined> {
    try {
      return await this.#at(seq, newest);
    } catch (err) {
      if (isStatefoldError(err, 'NOT_FOUND')) return undefined;
      throw err;
    }
  }

  /**
   * Checkpoint `id` at `seq`: the state there with the checkpoint's own writes, and its meta;
   * undefined when that seq no longer holds it (deleted since it was located). `known` is its meta
   * when already read; `newest`, an entry already read (the newest, or the one after `seq`).
   * The seq after it may hold its writes (committed with the next checkpoint): unless `newest`
   * says it does not, both seqs are restored together, their chain read and folded once.
   */
  async checkpointAt(
    id: string,
    seq: number,
    known?: ThreadMeta,
    newest?: Entry,
  ): Promise<{ state: ThreadState; meta: ThreadMeta } | undefined> {
    if (newest?.seq === seq || (newest?.seq === seq + 1 && !carries(newest, id)))
      return checkpointOf(this.stream, id, seq, known, await this.#keptAt(seq, newest), undefined);
    const run = await restoreRun(this.store, this.stream, this.reading, seq, seq + 1);
    return checkpointOf(this.stream, id, seq, known, run.get(seq), run.get(seq + 1));
  }

  /** The seqs of a `list` page in windows restored together (see history.ts). */
  windows(seqs: number[]): Windows {
    return new Windows(this.store, this.stream, this.reading, seqs);
  }

  /**
   * The pending writes of checkpoint `id`, which `seq` (holding `state`) holds: at the next seq
   * when that was committed with them (a step's putWrites and put in one commit), else at `seq`.
   * `known`, an entry already read (the newest, or the one after `seq`), saves reading the next
   * seq's meta; `carried`, what `carriedWrites` started for it, reading its state again.
   */
  async writesAt(
    id: string,
    seq: number,
    state: ThreadState,
    known?: Entry,
    carried?: Promise<Writes | undefined>,
  ): Promise<Writes | undefined> {
    if (known?.seq === seq) return state.writes[id]; // (the newest: nothing after it)
    const after = known?.seq === seq + 1 ? known : await this.metaAt(seq + 1);
    return (await (carried ?? this.carriedWrites(id, seq, after))) ?? state.writes[id];
  }

  /**
   * The writes of checkpoint `id` (at `seq`) that the seq after it holds, `after` being that seq's
   * entry: undefined when it was not committed with them (or is gone).
   */
  async carriedWrites(id: string, seq: number, after: Entry | undefined): Promise<Writes | undefined> {
    if (after?.seq !== seq + 1 || !carries(after, id)) return undefined;
    return (await this.keptStateAt(seq + 1))?.writes[id];
  }
}
