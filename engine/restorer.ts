/**
 * Restore: list the stream's log, find the checkpoint asked for (the newest committed one by
 * default), read its base and the deltas after it in parallel, verify each, and fold the deltas
 * onto the base in order.
 */
import type { Store } from '../storage-adapters/store.js';
import { assertOptions, assertSeq, assertStore, limitsOf } from './args.js';
import { StatefoldError, isStatefoldError } from './errors.js';
import { decodeMeta, decodePayload, type Frame, type FrameKind, type FrameLimits } from './format/frame.js';
import { committedView, type CommittedView } from './log/committed.js';
import { StreamKeys } from './log/keys.js';
import { listLog, tailKey, type LogListing } from './log/listing.js';
import { mapLimit, readFrame, vanished } from './log/read.js';
import { PatchMismatch, applyOps } from './patch.js';
import type { Op } from './format/ops.js';
import { EMPTY_LEDGER, applyEntries, type EffectRecord, type Ledger } from './effects.js';

/** Options of `restore`. */
export interface RestoreOptions {
  /** The seq to restore; the newest committed checkpoint when absent. */
  seq?: number;
  /** Aborts the reads. */
  signal?: AbortSignal;
  /** Largest uncompressed frame payload accepted (default 1 GiB): a guard against damaged lengths. */
  maxPayloadBytes?: number;
  /** How many objects are read at once (default 16). */
  concurrency?: number;
  /**
   * When the checkpoint asked for (or one its chain needs) is damaged or missing, restore the
   * newest intact checkpoint before it instead of rejecting CORRUPT, and report what was skipped
   * in `skipped` and `damage`. Off by default: damage is an error.
   */
  skipDamaged?: boolean;
}

/** A restored checkpoint. */
export interface Restored<S = unknown> {
  /** The state as it was captured at `seq`. */
  state: S;
  seq: number;
  /** The meta given to `checkpoint`, or undefined. */
  meta: unknown;
  kind: 'base' | 'delta';
  /** When the checkpoint was captured (ms since the epoch). */
  createdAt: number;
  /** The effect ledger as of `seq`: every token with its status (see `engine.effect`). */
  effects: EffectRecord[];
  /** With `skipDamaged`: the seqs newer than `seq`, up to the one asked for, that were passed over (empty otherwise). */
  skipped: number[];
  /** With `skipDamaged`: the CORRUPT errors that made restore pass them over. */
  damage: StatefoldError[];
}

/** One entry of `listCheckpoints`. */
export interface CheckpointEntry {
  seq: number;
  kind: 'base' | 'delta';
  /** Size of the stored object in bytes. */
  bytes: number;
  /** When the checkpoint was captured (ms since the epoch). */
  createdAt: number;
  meta: unknown;
  /** The seq of the base this checkpoint's chain starts from (its own seq for a base). */
  base: number;
  /** Writer epoch of the engine that committed it. */
  epoch: number;
  /** Effect records this checkpoint wrote (intents and outcomes); a base lists the whole ledger. */
  effects: EffectRecord[];
}

/** Options of `listCheckpoints`. */
export interface ListCheckpointsOptions {
  signal?: AbortSignal;
  maxPayloadBytes?: number;
  concurrency?: number;
}

/** Restores the state of a stream's newest committed checkpoint, or of `options.seq`. */
export async function restore<S = unknown>(store: Store, stream: string, options: RestoreOptions = {}): Promise<Restored<S>> {
  assertStore(store, 'restore');
  options = assertOptions(options, 'restore');
  const keys = new StreamKeys(stream);
  if (options.seq !== undefined) assertSeq(options.seq, stream);
  const limits = limitsOf(options.maxPayloadBytes);
  return relistOnVanish(async () => {
    const log = await listLog(store, keys, options.signal);
    if (!options.skipDamaged) {
      const view = await committedView(store, log, limits, options.signal);
      return restoreFrom<S>(store, view, options.seq, limits, options);
    }
    return restoreIntact<S>(store, log, options.seq, limits, options);
  });
}

/**
 * Runs a read that lists the log first, again from a new listing when an object it listed was
 * deleted before it could be read: a writer's retention deletes behind a newer base, which the
 * new listing shows. Bounded; the last attempt's error stands.
 */
async function relistOnVanish<T>(read: () => Promise<T>): Promise<T> {
  const attempts = 10;
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (!vanished(err)) throw err;
      if (attempt >= attempts) {
        // Not NOT_FOUND: the stream exists, and a caller must not take it for a new one.
        const e = err as StatefoldError;
        throw new StatefoldError('STORAGE', `${e.message}; retention deleted what ${attempts} listings in a row named before it could be read: the stream is trimmed faster than it can be read (keep more history, or retry)`, { stream: e.stream, seq: e.seq, key: e.key, cause: err });
      }
    }
  }
}

/** Restores the newest intact checkpoint at or before `seq`, passing over damaged ones. */
async function restoreIntact<S>(store: Store, log: LogListing, seq: number | undefined, limits: FrameLimits, options: RestoreOptions): Promise<Restored<S>> {
  const damage: StatefoldError[] = [];
  let view: CommittedView;
  try {
    view = await committedView(store, log, limits, options.signal);
  } catch (err) {
    if (!isStatefoldError(err, 'CORRUPT')) throw err;
    // The last slot cannot be read, so it cannot be told committed: pass it over.
    damage.push(err);
    const slots = log.slots.slice(0, -1);
    view = { log, slots, tailSlot: undefined, tailFrame: undefined };
  }
  const newest = view.slots[view.slots.length - 1]?.seq ?? 0;
  const asked = seq ?? Math.max(newest, log.slots[log.slots.length - 1]?.seq ?? 0);
  let target = Math.min(seq ?? newest, newest);
  const oldest = view.slots[0]?.seq ?? 1;
  if (seq !== undefined && seq < oldest) return restoreFrom<S>(store, view, seq, limits, options);
  while (target >= oldest && target > 0) {
    try {
      const restored = await restoreFrom<S>(store, view, target, limits, options);
      const skipped: number[] = [];
      for (let s = restored.seq + 1; s <= asked; s++) skipped.push(s);
      return { ...restored, skipped, damage };
    } catch (err) {
      if (vanished(err) || (!isStatefoldError(err, 'CORRUPT') && !isStatefoldError(err, 'NOT_FOUND'))) throw err;
      if (isStatefoldError(err, 'NOT_FOUND') && err.seq === undefined) throw err;
      damage.push(err);
      // Everything from the damaged seq up depends on it (or is it): try just below.
      const at = err.seq ?? target;
      target = Math.min(target, at) - 1;
    }
  }
  const stream = log.keys.stream;
  throw new StatefoldError('CORRUPT', `stream ${JSON.stringify(stream)}: no intact checkpoint at or before seq ${asked} (${damage.length} damaged object(s): ${damage.map((d) => d.message).join('; ')})`, { stream, cause: damage[0] });
}

/** Lists the retained committed checkpoints of a stream, ascending by seq (empty for an unknown stream). */
export async function listCheckpoints(store: Store, stream: string, options: ListCheckpointsOptions = {}): Promise<CheckpointEntry[]> {
  assertStore(store, 'listCheckpoints');
  options = assertOptions(options, 'listCheckpoints');
  const keys = new StreamKeys(stream);
  const limits = limitsOf(options.maxPayloadBytes);
  return relistOnVanish(() => listFrom(store, keys, limits, options));
}

async function listFrom(store: Store, keys: StreamKeys, limits: FrameLimits, options: ListCheckpointsOptions): Promise<CheckpointEntry[]> {
  const stream = keys.stream;
  const log = await listLog(store, keys, options.signal);
  const view = await committedView(store, log, limits, options.signal);
  const slots = view.slots;
  return mapLimit(slots, options.concurrency ?? 16, async (slot) => {
    const key = tailKey(slot);
    const frame = slot === view.tailSlot && view.tailFrame ? view.tailFrame : await readFrame(store, keys, slot.seq, key, limits, options.signal);
    const kind = checkpointKind(frame, keys, slot.seq, key);
    return {
      seq: slot.seq,
      kind,
      bytes: frame.bytes,
      createdAt: frame.header.createdAt,
      meta: decodeMeta(frame, { stream, key, seq: slot.seq }),
      base: frame.header.baseSeq!,
      epoch: frame.header.epoch,
      effects: [...applyLedger(frame, keys, slot.seq, key, EMPTY_LEDGER).values()],
    };
  });
}

/** Restores `seq` (or the newest) from a committed view. */
export async function restoreFrom<S>(store: Store, view: CommittedView, seq: number | undefined, limits: FrameLimits, options: { signal?: AbortSignal; concurrency?: number } = {}): Promise<Restored<S>> {
  const keys = view.log.keys;
  const stream = keys.stream;
  const slots = view.slots;
  const newest = slots[slots.length - 1];
  if (newest === undefined) {
    throw new StatefoldError('NOT_FOUND', `stream ${JSON.stringify(stream)}: no checkpoint`, { stream });
  }
  const target = seq ?? newest.seq;
  const oldest = slots[0]!.seq;
  if (target > newest.seq) {
    throw new StatefoldError('NOT_FOUND', `stream ${JSON.stringify(stream)} seq ${target}: beyond the newest checkpoint, ${newest.seq}`, { stream, seq: target });
  }
  if (target < oldest) {
    throw new StatefoldError('NOT_FOUND', `stream ${JSON.stringify(stream)} seq ${target}: removed by retention (the oldest retained checkpoint is ${oldest})`, { stream, seq: target });
  }
  const bySeq = new Map(slots.map((s) => [s.seq, s]));
  const frameAt = async (s: number): Promise<Frame> => {
    const slot = bySeq.get(s);
    if (slot === undefined) {
      throw new StatefoldError('CORRUPT', `stream ${JSON.stringify(stream)} seq ${s}: missing from the log (a gap in the chain to seq ${target})`, { stream, seq: s, key: keys.slot(s) });
    }
    if (slot === view.tailSlot && view.tailFrame) return view.tailFrame;
    return readFrame(store, keys, s, tailKey(slot), limits, options.signal);
  };
  if (!bySeq.has(target)) {
    throw new StatefoldError('NOT_FOUND', `stream ${JSON.stringify(stream)} seq ${target}: not in the log (removed by retention)`, { stream, seq: target });
  }
  const last = await frameAt(target);
  const lastKey = tailKey(bySeq.get(target)!);
  const kind = checkpointKind(last, keys, target, lastKey);
  const baseSeq = last.header.baseSeq!;
  const chain = [] as number[];
  for (let s = baseSeq; s < target; s++) chain.push(s);
  const earlier = await mapLimit(chain, options.concurrency ?? 16, (s) => frameAt(s));
  const frames = [...earlier, last];
  // Verify the whole chain before decoding any of it: one base, then deltas each naming its parent.
  for (let i = 0; i < frames.length; i++) {
    const s = baseSeq + i;
    const frame = frames[i]!;
    const key = tailKey(bySeq.get(s)!);
    const k = checkpointKind(frame, keys, s, key);
    if (i === 0 && k !== 'base') throw corrupt(stream, s, key, `expected the base of seq ${target}'s chain, found a ${k}`);
    if (i > 0) {
      if (k !== 'delta') throw corrupt(stream, s, key, `expected a delta in the chain of seq ${target}, found a ${k}`);
      if (frame.header.baseSeq !== baseSeq) throw corrupt(stream, s, key, `delta names base ${frame.header.baseSeq}, the chain's base is ${baseSeq}`);
      if (frame.header.parent !== frames[i - 1]!.crc) throw corrupt(stream, s, key, `delta does not apply to the stored seq ${s - 1} (parent checksum differs)`);
    }
  }
  const baseKey = tailKey(bySeq.get(baseSeq)!);
  let state = decodePayload(frames[0]!, { stream, key: baseKey, seq: baseSeq });
  let ledger = applyLedger(frames[0]!, keys, baseSeq, baseKey, EMPTY_LEDGER);
  for (let i = 1; i < frames.length; i++) {
    const s = baseSeq + i;
    const key = tailKey(bySeq.get(s)!);
    ledger = applyLedger(frames[i]!, keys, s, key, ledger);
    const ops = decodePayload(frames[i]!, { stream, key, seq: s });
    if (!Array.isArray(ops)) throw corrupt(stream, s, key, 'delta payload is not a list of operations');
    try {
      state = applyOps(state, ops as Op[]);
    } catch (err) {
      if (err instanceof PatchMismatch) throw corrupt(stream, s, key, `delta does not apply: ${err.message}`, err);
      throw err;
    }
  }
  const restored: Restored<S> = {
    state: state as S,
    seq: target,
    meta: decodeMeta(last, { stream, key: lastKey, seq: target }),
    kind,
    createdAt: last.header.createdAt,
    effects: [...ledger.values()],
    skipped: [],
    damage: [],
  };
  Object.defineProperty(restored, 'ledger', { value: ledger, enumerable: false });
  // For an engine opening the stream: the chain's sizes, so it need not read the chain again.
  const chainInfo: ChainInfo = { crc: last.crc, baseSeq, baseBytes: frames[0]!.bytes, deltaBytes: frames.slice(1).reduce((n, f) => n + f.bytes, 0) };
  Object.defineProperty(restored, 'chain', { value: chainInfo, enumerable: false });
  return restored;
}

function applyLedger(frame: Frame, keys: StreamKeys, seq: number, key: string, ledger: Ledger): Ledger {
  try {
    return applyEntries(ledger, frame.header.ledger);
  } catch (err) {
    throw corrupt(keys.stream, seq, key, `effect ledger: ${(err as Error).message}`, err);
  }
}

/** The chain a restore read: its last frame's checksum, its base and the sizes of its frames. */
export interface ChainInfo {
  crc: number;
  baseSeq: number;
  baseBytes: number;
  deltaBytes: number;
}

/** The chain a restore read, for the engine (not part of the public result type). */
export function chainOfRestored(r: Restored<unknown>): ChainInfo {
  return (r as Restored<unknown> & { chain: ChainInfo }).chain;
}

/** The ledger a restore folded, for the engine (not part of the public result type). */
export function ledgerOfRestored(r: Restored<unknown>): Ledger {
  return (r as Restored<unknown> & { ledger?: Ledger }).ledger ?? EMPTY_LEDGER;
}

function checkpointKind(frame: Frame, keys: StreamKeys, seq: number, key: string): 'base' | 'delta' {
  const kind: FrameKind = frame.kind;
  if (kind === 'fence') throw corrupt(keys.stream, seq, key, 'a fence where a checkpoint belongs (the slot was never committed, yet later seqs exist)');
  return kind;
}

function corrupt(stream: string, seq: number, key: string, why: string, cause?: unknown): StatefoldError {
  return new StatefoldError('CORRUPT', `stream ${JSON.stringify(stream)} seq ${seq} (${key}): ${why}`, { stream, seq, key, cause });
}

