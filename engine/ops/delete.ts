/**
 * deleteStream: removes every object of a stream. It first fences the stream (an engine still
 * writing it fails FENCED at its next commit) and records a retention floor above the fence (from
 * then on readers find no checkpoint, and an interrupted delete leaves a stream that reads as empty,
 * never a partial one), then deletes every object below the floor, the fences and the floor last.
 * It needs no keys: it reads only what frames keep in the clear.
 *
 * The fence is where the delete takes effect. An engine that opens on the stream after it finds
 * the floor, and starts a new stream at the floor's seq (log/listing.ts): the delete leaves that
 * new stream's objects, all at or above the floor, alone.
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../storage-adapters/store.js';
import { assertStore } from '../args.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import { DEFAULT_LIMITS, encodeFrame } from '../format/frame.js';
import { committedView } from '../log/committed.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { highestKeyEpoch, listLog } from '../log/listing.js';
import { nextFree } from '../writer/claim.js';

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
  /** Objects deleted (checkpoints, fences, hints, floors). */
  deletedKeys: number;
}

const PAGE = 1000;
/** Rounds of listing and deleting what is below the floor before giving up (each finds what raced the last). */
const MAX_ROUNDS = 16;
/** Slots fenced at once ahead of a writer that took the next one, doubled while it keeps winning. */
const FIRST_WINDOW = 8;
const MAX_FENCE_TRIES = 12;

/**
 * Deletes everything of `stream` from `store` (see above). Resolves when no object of the stream
 * as it was when the delete fenced it is left; a stream with none resolves at once.
 */
export async function deleteStream(
  store: Store,
  stream: string,
  options: DeleteStreamOptions = {},
): Promise<DeleteReport> {
  assertStore(store, 'deleteStream');
  if (options === null || typeof options !== 'object')
    throw new StatefoldError('INVALID_ARGUMENT', 'deleteStream: options must be an object');
  const inner = store;
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'deleteStream'));
  const keys = new StreamKeys(stream);
  const signal = options.signal;
  const opt = signal ? { signal } : undefined;
  if ((await allKeys(store, keys.root, signal)).length === 0) return { deletedKeys: 0 };
  const { fences, floorKey, floor } = await fence(store, keys, signal);
  const ours = new Set([...fences, floorKey]);
  let deletedKeys = 0;
  let total = 0;
  const done = (): void => {
    deletedKeys++;
    options.onProgress?.({ deleted: deletedKeys, total });
  };
  // A writer that had the stream open may still commit below the fences until it reaches one,
  // and a claim that listed before the floor may land a fence below it: each round deletes what
  // the last one did not see. Bounded: no engine commits below the floor once it has met a fence.
  for (let round = 0; ; round++) {
    const doomed = (await allKeys(store, keys.root, signal)).filter((k) => !ours.has(k) && below(keys, k, floor));
    if (doomed.length === 0) break;
    if (round >= MAX_ROUNDS) {
      throw new StatefoldError(
        'STORAGE',
        `deleteStream ${JSON.stringify(stream)}: objects keep appearing below its fence after ${MAX_ROUNDS} rounds (an engine that was not fenced is writing it?)`,
        { stream },
      );
    }
    total = deletedKeys + doomed.length + ours.size;
    for (const key of doomed) {
      await store.delete(key, opt);
      done();
    }
  }
  total = deletedKeys + ours.size;
  // The fences, then the floor: until the floor goes, readers find no checkpoint.
  for (const key of [...fences, floorKey]) {
    await store.delete(key, opt);
    done();
  }
  // Whatever the store keeps for those keys besides them (temp files, empty directories), unless
  // an engine opened meanwhile has started the stream anew.
  if ((await allKeys(store, keys.root, signal)).length === 0) await inner.removeLeftovers?.(keys.root, opt);
  return { deletedKeys };
}

/**
 * Whether `key` of the stream is of what the delete removes: a log key or hint below `floor`, an
 * older floor, or a key of no known kind. Log keys, hints and floors from `floor` up belong to a
 * stream started anew after the delete took effect.
 */
function below(keys: StreamKeys, key: string, floor: number): boolean {
  const seq = keys.parse(key)?.seq ?? keys.parseHint(key) ?? keys.parseFloor(key);
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

/**
 * Fences the stream at its next free key, and writes a floor above the fence. When a writer takes
 * that key first it is committing: the delete then fences a window of slots after it at once (it
 * stops at the first it meets), wider each time it wins them all. Returns the keys of the fences
 * that stand, the floor's key, and the floor.
 */
async function fence(
  store: Store,
  keys: StreamKeys,
  signal: AbortSignal | undefined,
): Promise<{ fences: string[]; floorKey: string; floor: number }> {
  const opt = signal ? { signal } : undefined;
  const writer = randomBytes(8).toString('hex');
  const log = await listLog(store, keys, signal);
  let seq: number;
  let key: string;
  let epoch: number;
  try {
    const tail = (await committedView(store, log, DEFAULT_LIMITS, signal)).tailFrame;
    epoch = (tail?.header.epoch ?? 0) + 1;
    ({ seq, key } = nextFree(keys, tail, log.floor));
  } catch (err) {
    if (!isStatefoldError(err, 'CORRUPT')) throw err;
    // The newest object is damaged (the streams that most need deleting): fence the slot above every listed one.
    seq = (log.slots[log.slots.length - 1]?.seq ?? 0) + 1;
    key = keys.slot(seq);
    epoch = highestKeyEpoch(log) + 1;
  }
  const put = async (s: number, k: string): Promise<boolean> => {
    const header = { stream: keys.stream, seq: s, epoch, writer, createdAt: Date.now() };
    return store.putIfAbsent(k, encodeFrame('fence', header, new Uint8Array(0)), opt);
  };
  const withFloor = async (fences: string[], top: number) => {
    const floorKey = keys.floor(top + 1);
    await store.putIfAbsent(floorKey, new Uint8Array(0), opt);
    return { fences, floorKey, floor: top + 1 };
  };
  if (await put(seq, key)) return withFloor([key], seq);
  // A writer took it: fence the slots after it, all at once.
  for (let attempt = 0, width = FIRST_WINDOW; attempt < MAX_FENCE_TRIES; attempt++, width *= 2) {
    const window = Array.from({ length: width }, (_, i) => seq + 1 + i);
    const won = await Promise.all(window.map((s) => put(s, keys.slot(s))));
    const fences = window.filter((_, i) => won[i]).map((s) => keys.slot(s));
    if (fences.length > 0) return withFloor(fences, seq + width);
    seq += width;
  }
  throw new StatefoldError(
    'STORAGE',
    `deleteStream ${JSON.stringify(keys.stream)}: could not fence the stream after ${MAX_FENCE_TRIES} tries`,
    { stream: keys.stream },
  );
}
