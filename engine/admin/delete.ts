/**
 * deleteStream: removes a stream. It first fences the stream (an engine still writing it fails
 * FENCED at its next commit) and records a retention floor above the fence (from then on readers
 * find no checkpoint, and an interrupted delete leaves a stream that reads as empty, never a
 * partial one), then deletes every object below the floor. It needs no keys: it reads only what
 * frames keep in the clear.
 *
 * The fences and the floor stay, a tombstone of three small objects with no state (see entomb):
 * an engine that held the stream open through the delete (a write held in the store, a process
 * paused) commits, if at all, below the floor, where no reader looks, and is fenced when it
 * reaches the fence; and
 * an engine opened on the id afterwards starts a new stream at the floor's seq, which no such
 * write can collide with. Without them, a write that lands after the delete would bring the
 * stream back (a base) or leave it CORRUPT (a delta).
 *
 * The fence is where the delete takes effect. An engine that opens on the stream after it finds
 * the floor and starts the new stream there: the delete leaves that new stream's objects, all at
 * or above the floor, alone.
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertStore } from '../args.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import { DEFAULT_LIMITS, decodeFrame, encodeFrame } from '../format/frame.js';
import { committedView } from '../log/committed.js';
import { createOrRead } from '../log/create.js';
import { floorAbove, putFloor } from '../log/floor.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { highestKeyEpoch, listLog } from '../log/listing.js';
import { mapLimit } from '../log/read.js';
import { nextFree } from '../open/claim.js';
import { MAX_KEYS_PER_SLOT } from '../open/fence.js';

/** Options of `deleteStream`. */
export interface DeleteStreamOptions {
  /** Aborts the deletes (they then reject ABORTED; what was deleted stays deleted, the stream reads as empty). */
  signal?: AbortSignal;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
  /** Called after each object deleted, with how many are deleted and how many were listed. */
  onProgress?: (progress: { deleted: number; total: number }) => void;
}

/** What `deleteStream` removed. */
export interface DeleteReport {
  /** Objects deleted (checkpoints, fences, hints, floors), besides the three of the tombstone it leaves. */
  deletedKeys: number;
}

const PAGE = 1000;
/** Rounds of listing and deleting what is below the floor before giving up (each finds what raced the last). */
const MAX_ROUNDS = 16;
/** Slots fenced at once ahead of a writer that took the next one, doubled while it keeps winning. */
const FIRST_WINDOW = 8;
const MAX_FENCE_TRIES = 12;
/** Fence writes in flight at once. */
const FENCES_AT_ONCE = 16;

/**
 * Deletes `stream` from `store` (see above). Resolves when no object of the stream as it was when
 * the delete fenced it is left but its tombstone; a stream with none, or deleted already, resolves at once.
 */
export async function deleteStream(
  store: Store,
  stream: string,
  options: DeleteStreamOptions = {},
): Promise<DeleteReport> {
  assertStore(store, 'deleteStream');
  const keys = new StreamKeys(stream);
  // Every option checked before the first delete (a bad onProgress once threw after one).
  options = assertOptions(options, 'deleteStream', keys.stream);
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'deleteStream'));
  const signal = options.signal;
  const opt = signal ? { signal } : undefined;
  // Nothing at or above the floor: never written, or deleted already (only a tombstone is left).
  const before = await listLog(store, keys, signal);
  if (before.slots.length === 0) return { deletedKeys: 0 };
  // A fence that lands in a slot retention deleted meanwhile (a floor above it) fences no one: again.
  let fenced: Fenced | undefined;
  for (let attempt = 0; fenced === undefined; attempt++) {
    if (attempt >= MAX_FENCE_TRIES)
      throw new StatefoldError(
        'STORAGE',
        `deleteStream ${JSON.stringify(stream)}: its fences kept landing below a newer retention floor (a writer is committing and trimming faster than the delete can fence it)`,
        { stream },
      );
    fenced = await fence(store, keys, signal);
  }
  const { floor, tombstone } = await entomb(store, keys, fenced, signal);
  let deletedKeys = 0;
  let total = 0;
  const remove = async (key: string): Promise<void> => {
    await store.delete(key, opt);
    deletedKeys++;
    options.onProgress?.({ deleted: deletedKeys, total });
  };
  const doomed = async (): Promise<string[]> =>
    (await allKeys(store, keys.root, signal)).filter((k) => !tombstone.has(k) && below(keys, k, floor));
  // Checkpoints, hints and older floors go round by round; fences stay until the end, so that an
  // engine they fenced long ago (its write held in the store, say) is still fenced while the
  // delete runs. A writer that had the stream open may commit below the delete's fences until it
  // meets one, and a claim that listed before the floor may land a fence below it: each round
  // takes what the last one did not see. Bounded: no engine commits below the floor once it has
  // met a fence.
  const seen = new Set<string>();
  const kept: string[] = [];
  for (let round = 0; ; round++) {
    const listed = await doomed();
    const fresh = listed.filter((k) => !seen.has(k));
    if (fresh.length === 0) break;
    if (round >= MAX_ROUNDS) {
      throw new StatefoldError(
        'STORAGE',
        `deleteStream ${JSON.stringify(stream)}: objects keep appearing below its fence after ${MAX_ROUNDS} rounds (an engine that was not fenced is writing it?)`,
        { stream },
      );
    }
    const now: string[] = [];
    for (const key of fresh) {
      seen.add(key);
      (mayBeFence(keys, key, listed, fenced) ? kept : now).push(key);
    }
    total = deletedKeys + now.length + kept.length;
    for (const key of now) await remove(key);
  }
  // Then the fences (the tombstone's floor and fence now do their work), and whatever landed
  // since the last round.
  for (const key of kept) await remove(key);
  const late = await doomed();
  total = deletedKeys + late.length;
  for (const key of late) await remove(key);
  // Whatever the store keeps for those keys besides them (temp files, empty directories), unless
  // an engine opened meanwhile has started the stream anew.
  const left = await allKeys(store, keys.root, signal);
  if (left.every((k) => tombstone.has(k))) await store.removeLeftovers(keys.root, opt);
  return { deletedKeys };
}

/**
 * The tombstone a delete leaves: its lowest fence, a delete fence in the slot of its floor, and
 * a floor past it.
 * An engine that held the stream open commits, if at all, below the floor, one slot after the
 * other (once the delete has taken its fences away), and meets that fence before it could write
 * where a new stream of the id starts. A claim that starts a new stream there first holds the
 * slot itself: then it is that stream's fence, and the floor stays. Returns the floor below which
 * the delete removes everything, and the keys it keeps.
 */
async function entomb(
  store: Store,
  keys: StreamKeys,
  fenced: Fenced,
  signal: AbortSignal | undefined,
): Promise<{ floor: number; tombstone: Set<string> }> {
  const at = fenced.floor;
  const key = keys.slot(at);
  const header = {
    stream: keys.stream,
    seq: at,
    epoch: 1,
    writer: fenced.writer,
    createdAt: Date.now(),
    deleted: true,
  };
  const frame = encodeFrame('fence', header, new Uint8Array(0));
  // The lowest of the delete's fences stays too: it holds the next key of the engine that was
  // writing, which is then fenced at its next commit, as during the delete.
  const lowest = fenced.fences[0]!;
  if ((await createOrRead(store, key, frame, signal)) !== 'ours')
    return { floor: at, tombstone: new Set([lowest, fenced.floorKey]) };
  await putFloor(store, keys, at + 1, signal);
  return { floor: at + 1, tombstone: new Set([lowest, key, keys.floor(at + 1)]) };
}

/**
 * Whether a log key may hold a fence, as far as the listing it was seen in tells: every key of a
 * slot but its last is a fence; the last key of a slot at or below the newest seq committed when
 * the delete fenced (and at or above the retention floor, below which retention left only fences)
 * holds that checkpoint. Anything else, and any key of a stream whose newest object was damaged,
 * may be a fence.
 */
function mayBeFence(
  keys: StreamKeys,
  key: string,
  listed: readonly string[],
  at: { committed: number; retained: number },
): boolean {
  const parsed = keys.parse(key);
  if (parsed === undefined) return false; // a hint, an older floor, a key of no known kind
  const { seq } = parsed;
  if (seq < at.retained || seq > at.committed) return true;
  const slot = listed.filter((k) => keys.parse(k)?.seq === seq);
  return slot[slot.length - 1] !== key;
}

/**
 * Whether `key` of the stream is of what the delete removes: a log key or hint below `floor`, an
 * older floor, an index object of a chain that starts below `floor`, or a key of no known kind.
 * Log keys, hints, floors and index objects from `floor` up belong to a stream started anew after
 * the delete took effect.
 */
function below(keys: StreamKeys, key: string, floor: number): boolean {
  const seq = keys.parse(key)?.seq ?? keys.parseHint(key) ?? keys.parseFloor(key) ?? keys.parseIndex(key)?.prev;
  return seq === undefined || seq < floor;
}

/** Every key under `prefix`, a page at a time. */
async function allKeys(store: Store, prefix: string, signal: AbortSignal | undefined): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const page = await store.list(prefix, {
      limit: PAGE,
      ...(out.length > 0 && { startAfter: out[out.length - 1] }),
      ...(signal && { signal }),
    });
    out.push(...page);
    if (page.length < PAGE) return out;
  }
}

/** Where a delete fenced the stream, and what it knew of the log when it did. */
interface Fenced {
  /** The delete's writer id. */
  writer: string;
  /** The keys of its fences, and of its floor (`floor`: every seq below it is deleted history). */
  fences: string[];
  floorKey: string;
  floor: number;
  /** The newest committed seq then (-Infinity if its newest object was damaged), and the retention floor. */
  committed: number;
  retained: number;
}

/**
 * Fences the stream at its next free key, and writes a floor above the fence. When a writer takes
 * that key first it is committing: the delete then fences a window of slots after it at once (it
 * stops at the first it meets), wider each time it wins them all. Returns the keys of the fences
 * that stand, the floor's key, and the floor; undefined when the fences landed below a retention
 * floor written meanwhile (slots retention deleted, where they fence no one: fence again).
 */
async function fence(store: Store, keys: StreamKeys, signal: AbortSignal | undefined): Promise<Fenced | undefined> {
  const writer = randomBytes(8).toString('hex');
  const log = await listLog(store, keys, signal);
  let seq: number;
  let key: string;
  let epoch: number;
  /** The newest committed seq: -Infinity when the newest object is damaged (then no key is known to hold a checkpoint). */
  let committed = -Infinity;
  try {
    const view = await committedView(store, log, DEFAULT_LIMITS, signal);
    const tail = view.tailFrame;
    committed = view.slots[view.slots.length - 1]?.seq ?? 0;
    epoch = (tail?.header.epoch ?? 0) + 1;
    ({ seq, key } = nextFree(keys, tail, log.floor));
  } catch (err) {
    if (!isStatefoldError(err, 'CORRUPT') && !isStatefoldError(err, 'UNSUPPORTED')) throw err;
    // The newest object is damaged (the streams that most need deleting), or a newer statefold's:
    // fence the slot above every listed one, which needs no frame read.
    seq = (log.slots[log.slots.length - 1]?.seq ?? 0) + 1;
    key = keys.slot(seq);
    epoch = highestKeyEpoch(log) + 1;
  }
  /**
   * Puts a delete fence in slot `s` at its first free key, after the fences already there (of
   * claims, which it fences in turn): its key, or 'checkpoint' when a checkpoint decides the slot.
   * A delete fence of another delete there is taken as this one's: they delete at the same seq.
   */
  const fenceIn = async (s: number, first: string): Promise<string | 'checkpoint'> => {
    let k = first;
    let e = epoch;
    for (let i = 0; i < MAX_KEYS_PER_SLOT; i++) {
      const header = { stream: keys.stream, seq: s, epoch: e, writer, createdAt: Date.now(), deleted: true };
      const there = await createOrRead(store, k, encodeFrame('fence', header, new Uint8Array(0)), signal);
      if (there === 'ours') return k;
      if (there === undefined) continue; // never read back (S3's 409 again and again): try again
      const frame = decodeFrame(there, { stream: keys.stream, key: k, seq: s }, DEFAULT_LIMITS);
      if (frame.kind !== 'fence') return 'checkpoint';
      if (frame.header.deleted === true || frame.header.writer === writer) return k;
      e = frame.header.epoch + 1;
      k = keys.afterFence(s, frame.header.epoch);
    }
    throw new StatefoldError(
      'STORAGE',
      `deleteStream ${JSON.stringify(keys.stream)} seq ${s}: more than ${MAX_KEYS_PER_SLOT} fences in one slot`,
      { stream: keys.stream, seq: s },
    );
  };
  const withFloor = async (fences: string[], top: number): Promise<Fenced | undefined> => {
    if (await floorAbove(store, keys, top, signal)) return undefined;
    const floorKey = keys.floor(top + 1);
    await putFloor(store, keys, top + 1, signal);
    return { writer, fences, floorKey, floor: top + 1, committed, retained: log.floor };
  };
  const placed = await fenceIn(seq, key);
  if (placed !== 'checkpoint') {
    // Slots between the newest checkpoint and the tail that hold only fences (of claims that
    // jumped ahead of a writer and crashed before filling): the writer's next key is down there,
    // not above the tail. Fence each of them too, so that it meets a delete fence first.
    const from = Number.isFinite(committed) ? committed + 1 : seq;
    const gap = Array.from({ length: Math.max(0, seq - from) }, (_, i) => from + i);
    const below = await mapLimit(gap, FENCES_AT_ONCE, (s) => fenceIn(s, keys.slot(s)));
    return withFloor([...below.filter((k): k is string => k !== 'checkpoint'), placed], seq);
  }
  // A writer took it: fence the slots after it, all at once.
  for (let attempt = 0, width = FIRST_WINDOW; attempt < MAX_FENCE_TRIES; attempt++, width = Math.min(2 * width, 64)) {
    const window = Array.from({ length: width }, (_, i) => seq + 1 + i);
    const placedIn = await mapLimit(window, FENCES_AT_ONCE, (s) => fenceIn(s, keys.slot(s)));
    const won = window.filter((_, i) => placedIn[i] !== 'checkpoint');
    if (won.length > 0)
      return withFloor(
        won.map((s) => placedIn[s - seq - 1] as string),
        won[won.length - 1]!,
      );
    seq += width;
  }
  throw new StatefoldError(
    'STORAGE',
    `deleteStream ${JSON.stringify(keys.stream)}: could not fence the stream after ${MAX_FENCE_TRIES} tries`,
    { stream: keys.stream },
  );
}
