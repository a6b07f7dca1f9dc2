/** Building what LangGraph reads (checkpoint tuples) and merging what it writes (pending writes). */
import {
  compareWritesSortKeys,
  maxChannelVersion,
  TASKS,
  WRITES_IDX_MAP,
  writesSortKey,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import { isDeepStrictEqual } from 'node:util';
import {
  fromPlain,
  toCheckpoint,
  toPlain,
  type Plain,
  type StoredCheckpoint,
  type ThreadMeta,
  type ThreadState,
  type WriteRecord,
  type Writes,
} from './codec.js';
import { PAGE, type Entry } from './locate.js';
import type { Head, Thread } from './thread.js';

/** Where a tuple was read from: its thread, namespace and what the stream holds at its seq. */
export interface TupleSource {
  thread: string;
  ns: string;
  state: ThreadState;
  meta: ThreadMeta;
  /** The pending writes of the parent checkpoint, for a checkpoint of format v < 4 (pending sends). */
  parentWrites?: () => Promise<Writes | undefined>;
}

/** The writes of one checkpoint in `writesSortKey` order (the order LangGraph applies them in). */
export function ordered(writes: Writes | undefined): WriteRecord[] {
  if (writes === undefined) return [];
  return Object.values(writes).sort((a, b) =>
    compareWritesSortKeys(writesSortKey(a[4], a[0], a[3]), writesSortKey(b[4], b[0], b[3])),
  );
}

/** The checkpoint tuple LangGraph expects for the checkpoint a stream holds at one seq. */
export async function toTuple(serde: SerializerProtocol, source: TupleSource): Promise<CheckpointTuple> {
  const { state, meta, thread, ns } = source;
  const cp = state.cp!;
  const checkpoint = await toCheckpoint(serde, cp);
  if (cp.v < 4 && state.parent !== null && source.parentWrites !== undefined) {
    // Before format 4, sends were pending writes of the parent; LangGraph reads them as a channel.
    const sends = ordered(await source.parentWrites()).filter((w) => w[1] === TASKS);
    checkpoint.channel_values[TASKS] = await Promise.all(sends.map((w) => fromPlain(serde, w[2])));
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : 1;
  }
  const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
    ordered(state.writes[cp.id]).map(async ([taskId, channel, value]): Promise<CheckpointPendingWrite> => [
      taskId,
      channel,
      await fromPlain(serde, value),
    ]),
  );
  const tuple: CheckpointTuple = {
    config: { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: cp.id } },
    checkpoint,
    metadata: meta.md === null ? undefined : ((await fromPlain(serde, meta.md)) as CheckpointTuple['metadata']),
    pendingWrites,
  };
  if (state.parent !== null) {
    tuple.parentConfig = { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: state.parent } };
  }
  return tuple;
}

/** Serializes writes of one task as records (the index of special channels is theirs, as in MemorySaver). */
export async function toRecords(
  serde: SerializerProtocol,
  writes: PendingWrite[],
  taskId: string,
  taskPath: string,
): Promise<WriteRecord[]> {
  return Promise.all(
    writes.map(async ([channel, value], i): Promise<WriteRecord> => [
      taskId,
      channel,
      await toPlain(serde, value),
      WRITES_IDX_MAP[channel] ?? i,
      taskPath,
    ]),
  );
}

/**
 * `stored` with `records` added; a regular write already stored for the same task and index is
 * kept (a retried task writes the same), a special one (error, interrupt) replaced. Undefined when
 * nothing changes.
 */
export function mergeWrites(stored: Writes | undefined, records: WriteRecord[]): Writes | undefined {
  const next: Record<string, WriteRecord> = { ...stored };
  let changed = false;
  for (const record of records) {
    const key = `${record[0]},${record[3]}`;
    if (record[3] >= 0 && stored !== undefined && key in stored) continue;
    next[key] = record;
    changed = true;
  }
  return changed ? next : undefined;
}

/** The value `cp` holds for `channel` at `version`, if it holds one. */
export function keptValue(
  cp: StoredCheckpoint | null | undefined,
  channel: string,
  version: unknown,
): Plain | undefined {
  if (cp == null || version === undefined || cp.channel_versions[channel] !== version) return undefined;
  return Object.hasOwn(cp.channel_values, channel) ? cp.channel_values[channel] : undefined;
}

export function entryOf(head: Head | undefined): Entry | undefined {
  return head === undefined ? undefined : { seq: head.seq, meta: head.meta };
}

/** The meta of the seq after `head`: the running largest id, and which checkpoints were re-committed where. */
export function nextMeta(
  head: Head | undefined,
  at: Pick<ThreadMeta, 'id' | 'parent' | 'md'> & { rev: boolean },
): ThreadMeta {
  const prev = head?.meta;
  const revs = { ...prev?.revs };
  if (prev?.rev && prev.id !== null) revs[prev.id] = head!.seq;
  if (at.id !== null) delete revs[at.id];
  const max = prev?.max == null || (at.id !== null && at.id > prev.max) ? at.id : prev.max;
  const meta: ThreadMeta = { id: at.id, parent: at.parent, md: at.md, max };
  if (Object.keys(revs).length > 0) meta.revs = revs;
  if (at.rev) meta.rev = true;
  return meta;
}

/** Whether a checkpoint's metadata has every key of `filter` with an equal value (list's filter). */
export async function matchesFilter(
  serde: SerializerProtocol,
  md: Plain | null,
  filter: Record<string, unknown>,
): Promise<boolean> {
  const metadata = (md === null ? {} : await fromPlain(serde, md)) as Record<string, unknown>;
  return Object.entries(filter).every(([key, value]) => isDeepStrictEqual(metadata[key], value));
}

/**
 * The checkpoints of one thread that pass list's options, largest id first, as entries of their
 * newest seq. Pages through the stream from its newest seq and stops once `limit` matches are
 * found whose ids all beat the running largest id of the seqs not read yet.
 */
export async function matching(
  serde: SerializerProtocol,
  t: Thread,
  o: { beforeId?: string; onlyId?: string; filter?: Record<string, unknown>; limit: number },
  /** Gets every entry read, by seq. */
  read?: Map<number, Entry>,
): Promise<Entry[]> {
  const seen = new Set<string>();
  const found: Entry[] = [];
  for (let before: number | undefined; ;) {
    const page = await t.page(before, PAGE);
    for (const entry of page) {
      read?.set(entry.seq, entry);
      const { id, md } = entry.meta;
      if (id === null || seen.has(id)) continue;
      seen.add(id);
      if (o.beforeId !== undefined && id >= o.beforeId) continue;
      if (o.onlyId !== undefined && id !== o.onlyId) continue;
      if (o.filter !== undefined && !(await matchesFilter(serde, md, o.filter))) continue;
      found.push(entry);
    }
    found.sort((a, b) => (a.meta.id! < b.meta.id! ? 1 : -1));
    const last = page[page.length - 1];
    if (page.length < PAGE || last === undefined) break;
    const nth = found[o.limit - 1];
    if (nth !== undefined && (last.meta.max === null || nth.meta.id! >= last.meta.max)) break;
    before = last.seq;
  }
  return found.slice(0, o.limit);
}
