/**
 * How a LangGraph thread is laid out in a statefold stream. One stream per (thread_id,
 * checkpoint_ns); each LangGraph checkpoint is a statefold checkpoint whose state is that
 * checkpoint with its channel values as plain JSON (LangGraph's serde, parsed), so that a changed
 * message list is a delta of the messages that changed, not a new blob. Its meta (read by listings
 * without folding any state) names the checkpoint id, its parent, its metadata and the largest id
 * committed so far, which is what lets a lookup by id binary-search the stream.
 */
import {
  JsonPlusSerializer,
  type ChannelVersions,
  type Checkpoint,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import { load } from '@langchain/core/load';
import { StatefoldError } from '../../engine/index.js';
import { snapshotOf, unchanged, type Snap } from './items.js';

/** A serialized value: the JSON LangGraph's serde made, parsed (`j`), or its bytes and type. */
export type Plain = { j: unknown } | { t: string; b: Uint8Array };

/** One pending write: task id, channel, value, index and task path. */
export type WriteRecord = readonly [taskId: string, channel: string, value: Plain, idx: number, taskPath: string];

/** Pending writes of one checkpoint, by `${taskId},${idx}` (as MemorySaver keys them). */
export type Writes = Readonly<Record<string, WriteRecord>>;

/** A LangGraph checkpoint with its channel values serialized. */
export interface StoredCheckpoint {
  readonly v: number;
  readonly id: string;
  readonly ts: string;
  readonly channel_values: Readonly<Record<string, Plain>>;
  readonly channel_versions: ChannelVersions;
  readonly versions_seen: Readonly<Record<string, ChannelVersions>>;
}

/**
 * The state of a thread's stream at one seq: the checkpoint this seq holds (null before the first
 * put), its parent, and pending writes by checkpoint id: those of `cp`, and writes LangGraph put
 * for checkpoints it has not put yet (it fires writes before the put they belong to).
 */
export interface ThreadState {
  readonly cp: StoredCheckpoint | null;
  readonly parent: string | null;
  readonly writes: Readonly<Record<string, Writes>>;
}

/** The meta of each statefold checkpoint of a thread's stream. */
export interface ThreadMeta {
  /** The checkpoint id this seq holds (null: only early writes, no checkpoint yet). */
  id: string | null;
  parent: string | null;
  /** The checkpoint's metadata, serialized. */
  md: Plain | null;
  /** The largest checkpoint id committed at or before this seq: non-decreasing, so seqs can be searched by id. */
  max: string | null;
  /**
   * Checkpoints re-committed after another one (writes put to a checkpoint that was not the newest):
   * id -> its newest seq, for every such seq before this one.
   */
  revs?: Record<string, number>;
  /** This seq re-commits a checkpoint after another one: a search by `max` would not find it. */
  rev?: true;
  /**
   * This seq was committed together with writes to its parent (one commit for a LangGraph step's
   * putWrites and put): its state's `writes[parent]` holds the parent's writes, a superset of what
   * the seq before (the parent's) holds.
   */
  pw?: true;
}

const PREFIX_PATTERN = /^[^\u0000]*$/;

/** Checks a stream prefix: any string without NUL (default 'langgraph/'). */
export function assertPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix)) {
    throw new StatefoldError('INVALID_ARGUMENT', `StatefoldSaver: prefix must be a string without NUL characters`);
  }
  return prefix;
}

/**
 * The stream of (thread, ns): the prefix and a JSON array, so that one thread's streams share a
 * prefix no other thread's can (`["1",` never starts `["10",`), and listing gives back both parts.
 */
export function streamOf(prefix: string, thread: string, ns: string): string {
  return prefix + JSON.stringify([thread, ns]);
}

/** The prefix every stream of `thread` starts with. */
export function threadPrefix(prefix: string, thread: string): string {
  return `${prefix}[${JSON.stringify(thread)},`;
}

/** The (thread, ns) of a stream id listed under `prefix`, or undefined for a stream that is not a thread's. */
export function parseStream(prefix: string, stream: string): { thread: string; ns: string } | undefined {
  if (!stream.startsWith(prefix)) return undefined;
  try {
    const parsed: unknown = JSON.parse(stream.slice(prefix.length));
    if (Array.isArray(parsed) && parsed.length === 2 && typeof parsed[0] === 'string' && typeof parsed[1] === 'string')
      return { thread: parsed[0], ns: parsed[1] };
  } catch {
    // Not one of ours: another stream under the same prefix.
  }
  return undefined;
}

const decoder = new TextDecoder();

/** Serializes a value with LangGraph's serde; JSON is kept as a plain value so that it diffs. */
export async function toPlain(serde: SerializerProtocol, value: unknown): Promise<Plain> {
  const [type, bytes] = await serde.dumpsTyped(value);
  if (type === 'json') {
    try {
      return { j: JSON.parse(decoder.decode(bytes)) as unknown };
    } catch {
      // Not JSON after all (a serde that says json but writes something else): kept as bytes.
    }
  }
  return { t: type, b: bytes };
}

/** List items by item: what each was when last serialized (see items.ts), and the plain value it serialized to. */
export type ItemCache = WeakMap<object, { snap: Snap; plain: unknown }>;

/**
 * `toPlain` for a channel value. A list (a message history) under LangGraph's own serializer is
 * serialized item by item, which gives the same JSON; an item that is the same object as at an
 * earlier put and unchanged since (every own property at every depth, see items.ts) keeps the
 * plain value it serialized to without being serialized again, so the capture also sees the same
 * object and skips it. An item changed in place, or one a snapshot cannot vouch for, is serialized.
 */
export async function channelToPlain(serde: SerializerProtocol, value: unknown, cache: ItemCache): Promise<Plain> {
  if (!Array.isArray(value) || value.length === 0 || !dumpsItemwise(serde)) return toPlain(serde, value);
  const items: unknown[] = [];
  for (const item of value) {
    const cacheable = item !== null && typeof item === 'object';
    const hit = cacheable ? cache.get(item) : undefined;
    if (hit !== undefined && unchanged(item, hit.snap)) {
      items.push(hit.plain);
      continue;
    }
    // What the item is before it is serialized: kept only if it still is after (it could change
    // in place while serialization is awaited, and the text would then be of the item before).
    const snap = cacheable ? snapshotOf(item) : undefined;
    const [type, bytes] = await serde.dumpsTyped(item);
    if (type !== 'json') return toPlain(serde, value);
    const text = decoder.decode(bytes);
    // A cycle back through the list is cut at another place when the items are serialized one by
    // one: such a list is serialized whole, as the other savers serialize it.
    if (text.includes(CIRCULAR)) return toPlain(serde, value);
    let plain: unknown;
    try {
      plain = JSON.parse(text);
    } catch {
      return toPlain(serde, value); // not JSON after all: the whole value is kept as toPlain keeps it
    }
    if (snap !== undefined && unchanged(item, snap)) cache.set(item, { snap, plain });
    else if (hit !== undefined) cache.delete(item);
    items.push(plain);
  }
  return { j: items };
}

/** What LangGraph's serializer writes in place of a reference back to an object it is inside. */
const CIRCULAR = '"[Circular]"';

/**
 * Whether `serde` is LangGraph's JsonPlusSerializer itself (not a subclass, which may wrap what
 * it writes; nothing overridden on the instance): then a list's JSON is the list of its items'
 * JSON, as channelToPlain relies on.
 */
function dumpsItemwise(serde: SerializerProtocol): boolean {
  return (
    Object.getPrototypeOf(serde) === JsonPlusSerializer.prototype &&
    !Object.hasOwn(serde, 'dumpsTyped') &&
    !Object.hasOwn(serde, '_dumps')
  );
}

/** The value `toPlain` serialized. */
export function fromPlain(serde: SerializerProtocol, plain: Plain): Promise<unknown> {
  if ('j' in plain)
    return revivesPlain(serde) ? revive(serde, plain.j) : serde.loadsTyped('json', JSON.stringify(plain.j));
  return serde.loadsTyped(plain.t, plain.b);
}

/**
 * Whether `serde` is LangGraph's JsonPlusSerializer as published (not a subclass, nothing
 * overridden on the instance): then what its loadsTyped makes of a value's JSON text is known,
 * and `revive` makes the same from the parsed value without the text.
 */
function revivesPlain(serde: SerializerProtocol): boolean {
  const s = serde as unknown as { loadsTyped: unknown; _loads?: unknown };
  return (
    Object.getPrototypeOf(s) === JsonPlusSerializer.prototype && s.loadsTyped === LOADS_TYPED && s._loads === LOADS
  );
}

const LOADS_TYPED = JsonPlusSerializer.prototype.loadsTyped;
const LOADS: unknown = (JsonPlusSerializer.prototype as unknown as { _loads?: unknown })._loads;

/**
 * What `serde.loadsTyped('json', JSON.stringify(value))` gives, for a JsonPlusSerializer, without
 * the JSON text of the whole value. Its reviver is compositional: it copies plain objects and
 * arrays and revives their parts, and a LangChain object (`{ lc: 1, type: 'constructor', id,
 * ... }`) with no other such record inside is `load(JSON.stringify(it))` from @langchain/core,
 * which is what is called here. Any other object with an `lc` (or `__proto__`) key is a subtree
 * given to loadsTyped as text, exactly as before.
 */
async function revive(serde: SerializerProtocol, value: unknown): Promise<unknown> {
  const pending: Promise<void>[] = [];
  // Copies `v`, to be stored at `at[key]`; a record is stored there once revived.
  const copy = (v: unknown, at: Record<string, unknown> | unknown[], key: string | number): unknown => {
    if (typeof v !== 'object' || v === null) return v === 0 ? 0 : v; // (-0 reads back as 0 from JSON text)
    if (Array.isArray(v)) {
      const out: unknown[] = new Array(v.length);
      for (let i = 0; i < v.length; i++) out[i] = copy(v[i], out, i);
      return out;
    }
    const record = v as Record<string, unknown>;
    if (Object.hasOwn(record, 'lc') || Object.hasOwn(record, '__proto__')) {
      // A LangChain object is revived after what is inside it: with no record inside, it is
      // loaded from its JSON as it is; an undefined value inside (a ToolMessage's artifact) is
      // revived to undefined first, which its JSON then leaves out (or writes null in an array).
      const inside = isLangChainObject(record) ? recordsIn(Object.values(record)) : OTHER;
      const revived =
        inside === OTHER
          ? serde.loadsTyped('json', JSON.stringify(record))
          : load(inside === NONE ? JSON.stringify(record) : JSON.stringify(record, undefinedRecordsOut));
      pending.push(revived.then((r: unknown) => void ((at as Record<string | number, unknown>)[key] = r)));
      return undefined;
    }
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(record)) out[k] = copy(record[k], out, k);
    return out;
  };
  const root: Record<string, unknown> = {};
  root.value = copy(value, root, 'value');
  await Promise.all(pending);
  return root.value;
}

/** A record JsonPlusSerializer gives to @langchain/core's load (`isLangChainSerializedObject`). */
function isLangChainObject(record: Record<string, unknown>): boolean {
  return record.lc === 1 && record.type === 'constructor' && Array.isArray(record.id);
}

/** What `recordsIn` finds: no record; only records of an undefined value; another record. */
const NONE = 0;
const UNDEFINED = 1;
const OTHER = 2;

/**
 * The records (objects with an `lc` or `__proto__` key, which JsonPlusSerializer's reviver may
 * treat as records) `v` holds: NONE, UNDEFINED when each is `{ lc: 2, type: 'undefined' }` (any
 * other keys holding no record), which the reviver makes undefined, else OTHER.
 */
function recordsIn(v: unknown): number {
  if (typeof v !== 'object' || v === null) return NONE;
  if (Array.isArray(v)) {
    let found = NONE;
    for (const item of v) if ((found = Math.max(found, recordsIn(item))) === OTHER) break;
    return found;
  }
  const values = Object.values(v);
  if (!Object.hasOwn(v, 'lc') && !Object.hasOwn(v, '__proto__')) return recordsIn(values);
  return isUndefinedRecord(v) && recordsIn(values) === NONE ? UNDEFINED : OTHER;
}

/** JsonPlusSerializer's record of an undefined value (`isUndefinedRecord`, on a record without `__proto__`). */
function isUndefinedRecord(v: object): boolean {
  const r = v as Record<string, unknown>;
  return r.lc === 2 && r.type === 'undefined' && !Object.hasOwn(r, '__proto__');
}

/** A JSON.stringify replacer that writes each record of an undefined value as undefined. */
function undefinedRecordsOut(_key: string, value: unknown): unknown {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && isUndefinedRecord(value)
    ? undefined
    : value;
}

/** A checkpoint as LangGraph gives it back: values deserialized, everything else copied out of the (frozen) state. */
export async function toCheckpoint(serde: SerializerProtocol, cp: StoredCheckpoint): Promise<Checkpoint> {
  const names = Object.keys(cp.channel_values);
  const values = await Promise.all(names.map((name) => fromPlain(serde, cp.channel_values[name]!)));
  const channel_values: Record<string, unknown> = {};
  names.forEach((name, i) => (channel_values[name] = values[i]));
  const versions_seen: Record<string, ChannelVersions> = {};
  for (const [node, seen] of Object.entries(cp.versions_seen)) versions_seen[node] = { ...seen };
  return {
    v: cp.v,
    id: cp.id,
    ts: cp.ts,
    channel_values,
    channel_versions: { ...cp.channel_versions },
    versions_seen,
  };
}

/** Checks that a listed entry's meta is a thread meta (else the stream is not a saver's). */
export function threadMeta(meta: unknown, stream: string, seq: number): ThreadMeta {
  const m = meta as ThreadMeta | undefined;
  if (m === null || typeof m !== 'object' || !('id' in m) || !('max' in m)) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `StatefoldSaver: stream ${JSON.stringify(stream)} seq ${seq} was not written by a StatefoldSaver (its meta is not a thread's)`,
      { stream, seq },
    );
  }
  return m;
}
