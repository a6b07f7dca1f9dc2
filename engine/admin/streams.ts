/**
 * listStreams: the streams a store holds, found by listing keys a page at a time and skipping the
 * rest of each stream's keys once it is seen, so the requests grow with the number of streams,
 * not with their history. Ids too long for a key segment are stored under a hash; their id is read
 * from one of their objects (every frame header names its stream in full).
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertStore, invalidArgument } from '../args.js';
import { describeValue } from '../errors.js';
import { frameStream } from '../format/frame.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { decodeStreamSegment, encodeStreamId, hex16 } from '../log/keys.js';

/** Options of `listStreams`. */
export interface ListStreamsOptions {
  /** Only streams whose id starts with this string. */
  prefix?: string;
  /** Aborts the listing (it then rejects ABORTED). */
  signal?: AbortSignal;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
  /** Called after each listing request, with the streams found so far. */
  onProgress?: (progress: { found: number }) => void;
}

/** Keys asked for per listing request. */
const PAGE = 1000;

/**
 * The ids of the streams in `store` (those with at least one object, not counting the tombstone
 * deleteStream leaves), in key order of their encoded ids.
 */
export async function listStreams(store: Store, options: ListStreamsOptions = {}): Promise<string[]> {
  assertStore(store, 'listStreams');
  options = assertOptions(options, 'listStreams');
  const { prefix = '', signal } = options;
  if (typeof prefix !== 'string')
    invalidArgument('listStreams', `prefix must be a string, not ${describeValue(prefix)}`);
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'listStreams'));
  const ids: string[] = [];
  // Readable ids: their encoding keeps prefixes (one escape per byte), so the listing can start at the prefix.
  const readable = prefix === '' ? 's.' : encodeStreamId(prefix);
  if (readable.startsWith('s.')) {
    for (const [segment, floored] of await segments(store, readable, signal, (n) =>
      options.onProgress?.({ found: n }),
    )) {
      const id = decodeStreamSegment(segment);
      if (id !== undefined && id.startsWith(prefix) && (!floored || (await live(store, segment, signal)))) ids.push(id);
    }
  }
  // Hashed ids: read each one's id from its first object.
  const before = ids.length;
  for (const [segment, floored] of await segments(store, 'h.', signal, (n) =>
    options.onProgress?.({ found: before + n }),
  )) {
    const id = await hashedId(store, segment, signal);
    if (id !== undefined && id.startsWith(prefix) && (!floored || (await live(store, segment, signal)))) ids.push(id);
  }
  return ids;
}

/**
 * The distinct first segments of the keys under `prefix`, each listed once, each with whether its
 * first key is a retention floor (`gc/` sorts before `hint/` and `log/`, and a segment's keys are
 * always listed from its first).
 */
async function segments(
  store: Store,
  prefix: string,
  signal: AbortSignal | undefined,
  progress: (found: number) => void,
): Promise<Map<string, boolean>> {
  const out = new Map<string, boolean>();
  let startAfter: string | undefined;
  for (;;) {
    const page = { limit: PAGE, ...(startAfter !== undefined && { startAfter }), ...(signal && { signal }) };
    const keys = await store.list(prefix, page);
    let tail: string | undefined;
    for (const key of keys) {
      const slash = key.indexOf('/');
      if (slash <= 0) continue;
      tail = key.slice(0, slash);
      if (!out.has(tail)) out.set(tail, key.startsWith('gc/', slash + 1));
    }
    progress(out.size);
    if (keys.length < PAGE || tail === undefined) return out;
    // Past every key of the last segment seen ('0' sorts right after '/'), so a long history is skipped.
    startAfter = `${tail}0`;
  }
}

/**
 * Whether the stream under key segment `segment` holds a log key at or above its newest retention
 * floor: a stream that deleteStream removed keeps only its tombstone (a floor and fences below
 * it), and is not listed. (Hashed ids have no StreamKeys here: the segment is all there is.)
 */
export async function live(store: Store, segment: string, signal?: AbortSignal): Promise<boolean> {
  const opt = signal ? { signal } : {};
  let floor = 1;
  for (const key of await store.list(`${segment}/gc/`, opt)) {
    const name = key.slice(segment.length + 4);
    if (/^[0-9a-f]{16}$/.test(name)) floor = Math.max(floor, parseInt(name, 16));
  }
  return (
    (await store.list(`${segment}/log/`, { ...opt, startAfter: `${segment}/log/${hex16(floor - 1)}~`, limit: 1 }))
      .length > 0
  );
}

/** Log objects read, at most, to find a hashed stream's id (one damaged object must not hide it). */
const ID_TRIES = 5;

/**
 * The id a hashed segment stands for, from the header of one of its first log objects that names
 * it (undefined when none does: no log objects, or all of the first few damaged or foreign).
 */
async function hashedId(store: Store, segment: string, signal: AbortSignal | undefined): Promise<string | undefined> {
  const keys = await store.list(`${segment}/log/`, { limit: ID_TRIES, ...(signal && { signal }) });
  for (const key of keys.slice(0, ID_TRIES)) {
    const bytes = await store.get(key, signal ? { signal } : undefined);
    if (bytes === undefined) continue; // deleted by retention meanwhile
    const stream = frameStream(bytes);
    // The segment its id encodes to must be this one: a damaged or foreign object does not name the stream.
    if (stream !== undefined && encodeStreamId(stream) === segment) return stream;
  }
  return undefined;
}
