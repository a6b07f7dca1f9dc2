/**
 * StatefoldSaver: a LangGraph JS checkpointer on statefold streams, one per (thread_id,
 * checkpoint_ns); each LangGraph checkpoint is a statefold checkpoint of its channel values as
 * plain JSON, stored as JSON Patch deltas of what changed. See README, LangGraph.
 */
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
} from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  checkEngineOptions,
  deleteStream,
  isStatefoldError,
  listStreams,
  StatefoldError,
  type EngineOptions,
  type PendingPolicy,
  type Store,
} from '../../engine/index.js';
import {
  assertPrefix,
  channelToPlain,
  type ItemCache,
  streamOf,
  threadPrefix,
  toPlain,
  type Plain,
  type StoredCheckpoint,
  type ThreadMeta,
  type ThreadState,
  type Writes,
} from './codec.js';
import { idOf, missing, nsOf, threadsOf, type StatefoldSaverOptions } from './config.js';
import { checkpointOf } from './history.js';
import { checkpointById } from './lookup.js';
import { threadSchema } from './schema.js';
export { saverMigrations } from './schema.js';
import { Threads } from './pool.js';
import { AFTER_COMMIT, type Entry, type Head, type Thread } from './thread.js';
import { entryOf, keptValue, matching, mergeWrites, nextMeta, toRecords, toTuple } from './tuple.js';

/** A LangGraph checkpointer that stores each thread as a statefold stream of deltas. */
export class StatefoldSaver extends BaseCheckpointSaver {
  readonly store: Store;
  readonly prefix: string;
  /** The options every thread's engine opens with. */
  readonly #engine: Omit<EngineOptions, 'stream'>;
  readonly #threads: Threads;
  readonly #items: ItemCache = new WeakMap();

  constructor(options: StatefoldSaverOptions) {
    if (options === null || typeof options !== 'object')
      throw new StatefoldError('INVALID_ARGUMENT', 'new StatefoldSaver: options must be an object with a store');
    super(options.serde);
    this.store = options.store;
    this.prefix = assertPrefix(options.prefix ?? 'langgraph/');
    const maxOpen = options.maxOpenThreads ?? 256;
    if (!Number.isSafeInteger(maxOpen) || maxOpen < 1)
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new StatefoldSaver: maxOpenThreads ${maxOpen} is not a positive integer`,
      );
    const { policy, retention, encryption, storeTimeoutMs, onPendingEffect, effectRetention } = options;
    const schema = threadSchema(options.schema, this.serde);
    this.#engine = {
      store: options.store,
      ...(schema !== undefined && { schema }),
      policy,
      retention,
      encryption,
      storeTimeoutMs,
      onPendingEffect,
      effectRetention,
    };
    try {
      // Checked now, with the checks SnapshotEngine.open makes: a bad option fails here, not at the first put.
      checkEngineOptions({ ...this.#engine, stream: streamOf(this.prefix, '', '') });
    } catch (err) {
      if (!isStatefoldError(err)) throw err;
      const why = err.message.replace(/^SnapshotEngine\.open: /, '');
      throw new StatefoldError(err.code, `new StatefoldSaver: ${why}`, { cause: err });
    }
    this.#threads = new Threads(this.prefix, this.#engine, maxOpen);
  }

  #thread(thread: string, ns: string): Thread {
    return this.#threads.get(thread, ns);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const thread = idOf(config.configurable?.thread_id, 'getTuple', 'thread_id', true);
    if (thread === undefined) return undefined;
    const ns = nsOf(config);
    const wanted = idOf(config.configurable?.checkpoint_id, 'getTuple', 'checkpoint_id', true);
    const deleting = this.#threads.deletionOf(thread);
    if (deleting !== undefined) await deleting;
    const t = this.#thread(thread, ns);
    return t.run(async () => {
      if (wanted === undefined) {
        // The latest is the largest id: normally the newest seq's own checkpoint.
        const head = await t.latest();
        if (head === undefined || head.meta.max === null) return undefined;
        if (head.meta.id === head.meta.max && head.state.cp !== null) return this.#tuple(t, head.state, head.meta);
        const seq = await t.locate(head.meta.max, entryOf(head));
        return seq === undefined ? undefined : this.#tupleAt(t, head.meta.max, seq, undefined, entryOf(head));
      }
      const at = await checkpointById(t, wanted);
      return at === undefined ? undefined : this.#tuple(t, at.state, at.meta);
    });
  }

  /** Checkpoint `id` at `seq`, or undefined when that seq no longer holds it (deleted since it was located). */
  async #tupleAt(
    t: Thread,
    id: string,
    seq: number,
    known?: ThreadMeta,
    /** An entry already read: the newest, or the one after `seq`. */
    newest?: Entry,
  ): Promise<CheckpointTuple | undefined> {
    const at = await t.checkpointAt(id, seq, known, newest);
    return at === undefined ? undefined : this.#tuple(t, at.state, at.meta);
  }

  #tuple(t: Thread, state: ThreadState, meta: ThreadMeta): Promise<CheckpointTuple> {
    const parentWrites = async (): Promise<Writes | undefined> => {
      const parent = state.parent!;
      const newest = await t.newest();
      const at = await t.locate(parent, newest);
      const stored = at === undefined ? undefined : await t.keptStateAt(at);
      return stored === undefined ? undefined : t.writesAt(parent, at!, stored, newest);
    };
    return toTuple(this.serde, { thread: t.thread, ns: t.ns, state, meta, parentWrites });
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let remaining = options.limit ?? Infinity;
    const beforeId = idOf(before?.configurable?.checkpoint_id, 'list', 'before.checkpoint_id', true);
    const onlyId = idOf(config.configurable?.checkpoint_id, 'list', 'checkpoint_id', true);
    for (const { thread, ns } of await threadsOf(this.store, this.prefix, config)) {
      if (remaining <= 0) return;
      const deleting = this.#threads.deletionOf(thread);
      if (deleting !== undefined) await deleting;
      // Read without keeping the thread open: a listing of many threads closes no writer.
      const t = this.#threads.reader(thread, ns);
      const found = await t.run(() => matching(this.serde, t, { beforeId, onlyId, filter, limit: remaining }));
      // Their states (with the seq after each, which may hold its writes) a window of seqs at a time.
      const windows = t.windows(found.map((entry) => entry.seq));
      for (const { seq, meta } of found) {
        if (remaining <= 0) break;
        const tuple = await t.run(async () => {
          const run = await windows.run(seq);
          const at = checkpointOf(t.stream, meta.id!, seq, meta, run.get(seq), run.get(seq + 1));
          return at === undefined ? undefined : this.#tuple(t, at.state, at.meta);
        });
        if (tuple === undefined) continue;
        remaining--;
        yield tuple;
      }
    }
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    if (config?.configurable === undefined) throw missing('put', 'thread_id');
    const thread = idOf(config.configurable.thread_id, 'put', 'thread_id')!;
    const ns = nsOf(config);
    const parent = idOf(config.configurable.checkpoint_id, 'put', 'checkpoint_id', true) ?? null;
    const id = idOf(checkpoint?.id, 'put', 'checkpoint.id')!;
    const deleting = this.#threads.deletionOf(thread);
    if (deleting !== undefined) await deleting;
    // Serialized now, awaited in the write: the put takes its place in the thread's queue at once.
    const metaPlain = toPlain(this.serde, metadata);
    metaPlain.catch(() => undefined); // (its error is the write's)
    const t = this.#thread(thread, ns);
    await t.writeLast(async (head, committed) => {
      const md = await metaPlain;
      const headId = head?.state.cp?.id;
      const max = head?.meta.max ?? null;
      const reput = max !== null && id <= max && id !== headId;
      // Committed with the writes pending before it only as a child of the checkpoint they add to,
      // put after it (the lookups the other cases make read the store, which lacks what is pending).
      const pending = head !== committed;
      if (pending && (head?.meta !== committed?.meta || parent !== (headId ?? null) || reput || id === headId))
        return AFTER_COMMIT;
      const cp: StoredCheckpoint = {
        v: checkpoint.v,
        id,
        ts: checkpoint.ts,
        channel_values: await this.#values(t, checkpoint, newVersions ?? {}, head, parent),
        channel_versions: { ...checkpoint.channel_versions },
        versions_seen: structuredClone(checkpoint.versions_seen),
      };
      // Waiting writes for ids below this one are orphans: LangGraph puts a run's checkpoints in id
      // order, so theirs would have come first (a run killed between its writes and its put).
      const writes: Record<string, Writes> = {};
      for (const [key, w] of Object.entries(head?.state.writes ?? {})) if (key >= id && key !== headId) writes[key] = w;
      if (headId === id && head?.state.writes[id] !== undefined) writes[id] = head.state.writes[id];
      // The parent's writes not committed yet go with this seq, marked so that lookups of the parent find them.
      const carried = pending && headId !== undefined && head!.state.writes[headId] !== committed!.state.writes[headId];
      if (carried) writes[headId] = head!.state.writes[headId]!;
      if (reput) {
        // A checkpoint put again after others: its writes stay with it.
        const at = await t.locate(id, entryOf(head));
        const stored = at === undefined ? undefined : await t.keptStateAt(at);
        const storedWrites = stored === undefined ? undefined : await t.writesAt(id, at!, stored, entryOf(head));
        if (storedWrites !== undefined) writes[id] = { ...storedWrites, ...writes[id] };
      }
      const state: ThreadState = { cp, parent, writes };
      // Put again onto its own re-commit, it stays a re-commit (lookups by id rely on the mark).
      const rev = reput || (id === headId && head?.meta.rev === true);
      const meta = nextMeta(head, { id, parent, md, rev });
      if (carried) meta.pw = true;
      return { state, meta };
    });
    return { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: id } };
  }

  /**
   * The channel values to store, as LangGraph's other savers do: a channel in `newVersions` is
   * serialized; any other keeps the value the parent (else the newest checkpoint) stored for its
   * version, unchanged and not serialized again, or is left out when none is stored. Only the
   * parent's count on a fork: integer versions of two branches collide. A parent no longer stored
   * (deleted by retention or deleteThread) leaves nothing to keep: every value is serialized.
   */
  async #values(
    t: Thread,
    checkpoint: Checkpoint,
    newVersions: ChannelVersions,
    head: Head | undefined,
    parent: string | null,
  ): Promise<Record<string, Plain>> {
    const values: Record<string, Plain> = {};
    let looked = false;
    let source: StoredCheckpoint | null | undefined;
    for (const [channel, value] of Object.entries(checkpoint.channel_values ?? {})) {
      const unchanged = !Object.hasOwn(newVersions, channel);
      if (unchanged && !looked) {
        looked = true;
        source = await this.#parentOf(t, head, parent);
      }
      if (!unchanged || source === undefined) {
        values[channel] = await channelToPlain(this.serde, value, this.#items);
        continue;
      }
      const kept = keptValue(source, channel, checkpoint.channel_versions?.[channel]);
      if (kept !== undefined) values[channel] = kept;
    }
    return values;
  }

  /** The stored checkpoint `parent` (the newest when none is named); undefined when it is no longer stored. */
  async #parentOf(t: Thread, head: Head | undefined, parent: string | null) {
    const headCp = head?.state.cp ?? null;
    if (parent === null || parent === headCp?.id) return headCp;
    const at = await t.locate(parent, entryOf(head));
    const cp = at === undefined ? undefined : (await t.keptStateAt(at))?.cp;
    return cp?.id === parent ? cp : undefined; // (another process may have deleted and rewritten the thread)
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ''): Promise<void> {
    const thread = idOf(config?.configurable?.thread_id, 'putWrites', 'thread_id')!;
    const id = idOf(config.configurable?.checkpoint_id, 'putWrites', 'checkpoint_id')!;
    const task = idOf(taskId, 'putWrites', 'taskId')!;
    const deleting = this.#threads.deletionOf(thread);
    if (deleting !== undefined) await deleting;
    const serialized = toRecords(this.serde, writes, task, taskPath);
    serialized.catch(() => undefined); // (its error is the write's)
    const t = this.#thread(thread, nsOf(config));
    await t.write(async (head, committed) => {
      const records = await serialized;
      const cp = head?.state.cp ?? null;
      const own = cp === null || cp.id === id;
      // (A lookup reads the store, which lacks what is pending: it waits for that to be committed.)
      if (!own && head !== committed) return AFTER_COMMIT;
      const at = own ? undefined : await t.locate(id, entryOf(head));
      const stored = at === undefined ? undefined : await t.keptStateAt(at);
      const storedMeta = stored === undefined ? undefined : (await t.metaAt(at!))?.meta;
      // (A seq this process located may hold another checkpoint since another process deleted the thread.)
      if (stored === undefined || stored.cp?.id !== id || storedMeta?.id !== id) {
        // Writes for the newest checkpoint, or for one not put (or no longer stored): they wait in the newest state.
        const merged = mergeWrites(head?.state.writes[id], records);
        if (merged === undefined) return undefined;
        const base: ThreadState = head?.state ?? { cp: null, parent: null, writes: {} };
        const state = { ...base, writes: { ...base.writes, [id]: merged } };
        return { state, meta: head?.meta ?? { id: null, parent: null, md: null, max: null } };
      }
      // Writes for an older checkpoint: it is committed again, with them, as the newest seq.
      const merged = mergeWrites(await t.writesAt(id, at!, stored, entryOf(head)), records);
      if (merged === undefined) return undefined;
      const early = { ...head!.state.writes };
      delete early[cp!.id];
      const state: ThreadState = { cp: stored.cp, parent: stored.parent, writes: { ...early, [id]: merged } };
      const { md, parent } = storedMeta;
      return { state, meta: nextMeta(head, { id, parent, md, rev: true }) };
    });
  }

  async deleteThread(threadId: string): Promise<void> {
    const thread = idOf(threadId, 'deleteThread', 'threadId')!;
    await this.#threads.deleting(thread, async () => {
      for (const stream of await listStreams(this.store, { prefix: threadPrefix(this.prefix, thread) })) {
        await this.#threads.drop(stream);
        await deleteStream(this.store, stream);
      }
    });
  }

  /**
   * Runs `fn(token)` at most once per token per thread (see SnapshotEngine.effect), recorded in
   * the thread's root stream: a node that charges a card or sends an email calls it with its
   * config, and a graph resumed after a crash gets the recorded result instead of a second call.
   * `onPending` overrides the saver's `onPendingEffect`; the engine's `state` and `meta` options
   * are not offered, as the thread's checkpoints are the saver's to write.
   */
  async effect<T>(
    config: RunnableConfig,
    token: string,
    fn: (token: string) => T | Promise<T>,
    options?: { onPending?: PendingPolicy<T> },
  ): Promise<T> {
    const thread = idOf(config?.configurable?.thread_id, 'effect', 'thread_id')!;
    const onPending = options?.onPending;
    const deleting = this.#threads.deletionOf(thread);
    if (deleting !== undefined) await deleting;
    return this.#thread(thread, '').effect(token, fn, onPending === undefined ? undefined : { onPending });
  }

  /** Closes every open thread writer, after what is queued on each. */
  async close(): Promise<void> {
    await this.#threads.close();
  }
}
