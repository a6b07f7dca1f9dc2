/**
 * deleteStream: removes every object of a stream. It first fences the stream (an engine still
 * writing it fails FENCED at its next commit) and records a retention floor above everything (from
 * then on readers find no checkpoint, and an interrupted delete leaves a stream that reads as empty,
 * never a partial one), then deletes the objects, the fence and the floor last. It needs no keys:
 * it reads only what frames keep in the clear.
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
const MAX_FENCE_TRIES = 16;

/** Deletes everything of `stream` from `store`. Resolves when no key of it is left; a stream with none resolves at once. */
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
  let deletedKeys = 0;
  // Each round fences, floors and deletes; a writer that committed below the fence meanwhile leaves
  // keys the next round finds. Bounded: once fenced, no engine commits above the fence.
  for (let round = 0; round < 4; round++) {
    if ((await allKeys(store, keys.root, signal)).length === 0) break;
    const { fenceKey, floorKey } = await fence(store, keys, signal);
    const all = await allKeys(store, keys.root, signal);
    const last = new Set([fenceKey, floorKey]);
    const total = deletedKeys + all.length;
    const done = (): void => {
      deletedKeys++;
      options.onProgress?.({ deleted: deletedKeys, total });
    };
    for (const key of all) {
      if (last.has(key)) continue;
      await store.delete(key, opt);
      done();
    }
    // The fence, then the floor: until the floor goes, readers find no checkpoint.
    for (const key of [fenceKey, floorKey]) {
      await store.delete(key, opt);
      done();
    }
  }
  if ((await allKeys(store, keys.root, signal)).length > 0) {
    throw new StatefoldError(
      'STORAGE',
      `deleteStream ${JSON.stringify(stream)}: keys keep appearing (an engine that was not fenced is writing it?)`,
      { stream },
    );
  }
  // Whatever the store keeps for those keys besides them (temp files, empty directories).
  await inner.removeLeftovers?.(keys.root, opt);
  return { deletedKeys };
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
 * Fences the stream at its next free key (further ahead each time a writer takes that key first)
 * and writes a floor above the fence: the keys of both.
 */
async function fence(
  store: Store,
  keys: StreamKeys,
  signal: AbortSignal | undefined,
): Promise<{ fenceKey: string; floorKey: string }> {
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
  for (let attempt = 0; attempt < MAX_FENCE_TRIES; attempt++) {
    const header = { stream: keys.stream, seq, epoch, writer, createdAt: Date.now() };
    if (await store.putIfAbsent(key, encodeFrame('fence', header, new Uint8Array(0)), opt)) {
      const floorKey = keys.floor(seq + 1);
      await store.putIfAbsent(floorKey, new Uint8Array(0), opt);
      return { fenceKey: key, floorKey };
    }
    // A writer took it: fence further ahead, where it has not reached yet.
    seq += 4 << attempt;
    key = keys.slot(seq);
  }
  throw new StatefoldError(
    'STORAGE',
    `deleteStream ${JSON.stringify(keys.stream)}: could not fence the stream after ${MAX_FENCE_TRIES} tries`,
    { stream: keys.stream },
  );
}
