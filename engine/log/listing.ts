/**
 * The log of one stream: its keys grouped into slots, one slot per seq.
 *
 * Slot `seq` normally holds one key, `<log>/<seq>`, whose frame is checkpoint `seq`. When an
 * engine opens a stream it claims the next slot with a fence frame at that slot's next free key;
 * the key after a fence of epoch `e` is `<log>/<seq>.<e>`, and so on. Every key is created only
 * if absent, so of the engines that race for a key exactly one wins, and an engine whose next
 * key was taken by a fence of a higher epoch knows it has been fenced. The last key of a slot
 * decides it: a checkpoint frame means `seq` is committed, a fence means it is not yet.
 */
import type { ListOptions, Store } from '../../storage-adapters/store.js';
import type { StreamKeys } from './keys.js';

/** One seq's keys, in order. */
export interface Slot {
  seq: number;
  keys: string[];
}

/** The listed log of a stream. */
export interface LogListing {
  keys: StreamKeys;
  /** Slots at or above the retention floor, in ascending seq order. */
  slots: Slot[];
  /** Every seq below this was deleted by retention (1 when nothing was). */
  floor: number;
  /** Keys of every floor recorded, ascending (the last one is `floor`). */
  floorKeys: string[];
  /** What is left of the slots below the floor: the fences kept, and leftovers of an interrupted gc. */
  below: Slot[];
  /** Keys of the stream's index objects (keys.index), when the whole stream was listed (no `from`). */
  indexKeys: string[];
  /** Set when only the slots from this seq on were listed (see listLog). */
  from?: number | undefined;
  /** With `bodiesFrom`, on a store that scans: the bytes of the log keys scanned (readFrame takes them from here). */
  bodies?: Map<string, Uint8Array>;
}

/**
 * Lists the log of a stream. Slots below the retention floor are set apart: retention has
 * deleted them, or is deleting them, and keeps their fences (see retention.ts). With `from`, only
 * the slots from seq `from` on are listed (and the floors), not the whole history; with `to` as
 * well, only the slots from `from` to `to`. With `bodiesFrom` as well, for a caller that reads
 * the frames of the slots from that seq on, a store that scans (Store.scan) gives their bytes with
 * their keys, in the same round (the slots below it are listed as keys, beside the scan).
 */
export async function listLog(
  store: Store,
  keys: StreamKeys,
  signal?: AbortSignal,
  from?: number,
  to?: number,
  bodiesFrom?: number,
): Promise<LogListing> {
  const options = signal ? { signal } : undefined;
  let listed: string[];
  const scans = bodiesFrom !== undefined && from !== undefined && typeof store.scan === 'function';
  const bodies = scans ? new Map<string, Uint8Array>() : undefined;
  if (from === undefined) listed = await store.list(keys.root, options);
  else {
    // The slots below bodiesFrom as keys, those from it on with their bytes, side by side.
    const split = scans ? Math.max(from, bodiesFrom!) : Infinity;
    const below = split > from ? logKeys(store, keys, from, Math.min(split - 1, to ?? Infinity), signal) : [];
    const [floors, under, over] = await Promise.all([
      store.list(keys.floors, options),
      below,
      scans && split <= (to ?? Infinity) ? logKeys(store, keys, split, to, signal, bodies) : [],
    ]);
    listed = [...floors, ...under, ...over];
  }
  const all: Slot[] = [];
  const floorKeys: string[] = [];
  const indexKeys: string[] = [];
  let floor = 1;
  for (const key of listed) {
    const parsed = keys.parse(key);
    if (parsed === undefined) {
      const f = keys.parseFloor(key);
      if (f !== undefined) {
        floorKeys.push(key);
        floor = Math.max(floor, f);
      } else if (key.startsWith(keys.index)) indexKeys.push(key);
      continue; // neither (a hint, or a future extension): ignored
    }
    const last = all[all.length - 1];
    if (last !== undefined && last.seq === parsed.seq) last.keys.push(key);
    else all.push({ seq: parsed.seq, keys: [key] });
  }
  const at = all.findIndex((s) => s.seq >= floor);
  const split = at < 0 ? all.length : at;
  const log: LogListing = {
    keys,
    slots: all.slice(split),
    floor,
    floorKeys,
    below: all.slice(0, split),
    indexKeys,
    from,
  };
  if (bodies !== undefined) log.bodies = bodies;
  return log;
}

/** The log's keys of the slots from `from` (to `to`); with `bodies`, scanned, their bytes put there. */
async function logKeys(
  store: Store,
  keys: StreamKeys,
  from: number,
  to: number | undefined,
  signal?: AbortSignal,
  bodies?: Map<string, Uint8Array>,
): Promise<string[]> {
  // '~' sorts after '.' and every hex digit: start after every key of slot from - 1.
  if (to !== undefined && to !== Infinity) return listUpTo(store, keys, from, to, signal, bodies);
  const options = { ...(signal && { signal }), startAfter: `${keys.slot(from - 1)}~` };
  if (bodies === undefined) return store.list(keys.log, options);
  // Bytes of at most SCAN_MOST keys (a chain from its hint is shorter); past them (a hint far
  // behind the newest), keys only. (A result longer than the limit is the whole rest.)
  const first = await listing(store, keys.log, { ...options, limit: SCAN_MOST }, bodies);
  if (first.length !== SCAN_MOST) return first;
  return [...first, ...(await store.list(keys.log, { ...options, startAfter: first[first.length - 1]! }))];
}

/** Most keys an open-ended listing scans with their bytes (as many as a hinted read prefetches). */
const SCAN_MOST = 64;

/** `store.list`, or with `bodies`, `store.scan` with each key's bytes put in `bodies`. */
async function listing(
  store: Store,
  prefix: string,
  options: ListOptions,
  bodies: Map<string, Uint8Array> | undefined,
): Promise<string[]> {
  if (bodies === undefined) return store.list(prefix, options);
  const objects = await store.scan!(prefix, options);
  for (const { key, body } of objects) bodies.set(key, body);
  return objects.map((o) => o.key);
}

/**
 * The log's keys of the slots from `from` to `to`, in pages a little longer than the range (a
 * slot holds one key, more after fences), so that a range costs its own length whatever the
 * history above it. Keys of later slots in the last page are left out.
 */
async function listUpTo(
  store: Store,
  keys: StreamKeys,
  from: number,
  to: number,
  signal?: AbortSignal,
  bodies?: Map<string, Uint8Array>,
): Promise<string[]> {
  const out: string[] = [];
  let startAfter = `${keys.slot(from - 1)}~`;
  // Bounded: every full page moves startAfter on by `limit` keys, and stops past `to`.
  for (;;) {
    // (A few keys past the range when scanning, room for a fence or two (one per open): each key read past
    // the range is a body read for nothing, a page too short a round more.)
    const limit = Math.min(1000, to - from + (bodies === undefined ? 9 : 4));
    const page = await listing(store, keys.log, { startAfter, limit, ...(signal ? { signal } : {}) }, bodies);
    for (const key of page) {
      const seq = keys.parse(key)?.seq;
      if (seq !== undefined && seq > to) return out;
      out.push(key);
    }
    // Shorter than asked: the end of the log. Longer: a store that ignores limits listed the rest.
    if (page.length !== limit) return out;
    startAfter = page[page.length - 1]!;
  }
}

/** The seq of the newest slot of the log from seq `from` on (paging through it); `from` when none is listed. */
export async function newestSlotFrom(
  store: Store,
  keys: StreamKeys,
  from: number,
  signal?: AbortSignal,
): Promise<number> {
  let newest = from;
  let startAfter = `${keys.slot(from - 1)}~`;
  for (;;) {
    const page = await store.list(keys.log, { startAfter, limit: 1000, ...(signal && { signal }) });
    for (const key of page) newest = Math.max(newest, keys.parse(key)?.seq ?? 0);
    if (page.length < 1000) return newest;
    startAfter = page[page.length - 1]!;
  }
}

/** The key that decides a slot: its last. */
export function tailKey(slot: Slot): string {
  return slot.keys[slot.keys.length - 1]!;
}

/** The highest fence epoch the keys of `log` name (a key after a fence names its epoch), 0 when none. */
export function highestKeyEpoch(log: LogListing): number {
  let epoch = 0;
  for (const slot of log.slots)
    for (const key of slot.keys) epoch = Math.max(epoch, log.keys.parse(key)?.afterEpoch ?? 0);
  return epoch;
}
