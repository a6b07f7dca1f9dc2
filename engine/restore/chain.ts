/**
 * Reading one checkpoint's chain: its base and the deltas after it, read in parallel, verified
 * as a whole (one base, then deltas each naming its base and its parent's checksum) before any
 * of it is decoded, then folded in order.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import { applyEntries, EMPTY_LEDGER, type Ledger } from '../effects/ledger.js';
import {
  assertUnlocked,
  decodeMeta,
  decodePayload,
  type Frame,
  type FrameKind,
  type FrameReading,
} from '../format/frame.js';
import type { Op } from '../format/ops.js';
import type { CommittedView } from '../log/committed.js';
import type { StreamKeys } from '../log/keys.js';
import { tailKey } from '../log/listing.js';
import { mapLimit, readFrame } from '../log/read.js';
import { applyOps, PatchMismatch } from './fold.js';
import type { Restored } from './types.js';

/** What reading a chain gives: the public result, and what an engine opening the stream needs to go on writing it. */
export interface ReadChain<S> {
  restored: Restored<S>;
  /** The effect ledger as of the restored seq. */
  ledger: Ledger;
  /** CRC-32 of the restored seq's frame: the next delta's parent. */
  crc: number;
  baseSeq: number;
  /** Stored sizes of the chain's base and of its deltas together (the base policy's size trigger). */
  baseBytes: number;
  deltaBytes: number;
  /** The restored seq's meta as stored (msgpack), so that it need not be encoded again. */
  metaBytes: Uint8Array | undefined;
  /** The ids of the keys the chain's frames are sealed with (empty when not sealed). */
  keyIds: Set<string>;
}

/** Options of readChain. */
export interface ChainOptions {
  signal?: AbortSignal;
  /** How many objects are read at once (default 64). */
  concurrency?: number;
}

/** Reads, verifies and folds the chain of `seq` (or of the newest committed checkpoint) from a committed view. */
export async function readChain<S>(
  store: Store,
  view: CommittedView,
  seq: number | undefined,
  limits: FrameReading,
  options: ChainOptions = {},
): Promise<ReadChain<S>> {
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
    throw new StatefoldError(
      'NOT_FOUND',
      `stream ${JSON.stringify(stream)} seq ${target}: beyond the newest checkpoint, ${newest.seq}`,
      { stream, seq: target },
    );
  }
  if (target < oldest) {
    throw new StatefoldError(
      'NOT_FOUND',
      `stream ${JSON.stringify(stream)} seq ${target}: removed by retention (the oldest retained checkpoint is ${oldest})`,
      { stream, seq: target },
    );
  }
  const bySeq = new Map(slots.map((s) => [s.seq, s]));
  const frameAt = async (s: number): Promise<Frame> => {
    const slot = bySeq.get(s);
    if (slot === undefined) {
      throw new StatefoldError(
        'CORRUPT',
        `stream ${JSON.stringify(stream)} seq ${s}: missing from the log (a gap in the chain to seq ${target})`,
        { stream, seq: s, key: keys.slot(s) },
      );
    }
    if (slot === view.tailSlot && view.tailFrame) return view.tailFrame;
    const read = view.frames?.get(s);
    if (read !== undefined) return read;
    return readFrame(store, keys, s, tailKey(slot), limits, options.signal);
  };
  if (!bySeq.has(target)) {
    throw new StatefoldError(
      'NOT_FOUND',
      `stream ${JSON.stringify(stream)} seq ${target}: not in the log (removed by retention)`,
      { stream, seq: target },
    );
  }
  const last = await frameAt(target);
  const lastKey = tailKey(bySeq.get(target)!);
  const kind = checkpointKind(last, keys, target, lastKey);
  const baseSeq = last.header.baseSeq!;
  const chain = [] as number[];
  for (let s = baseSeq; s < target; s++) chain.push(s);
  const earlier = await mapLimit(chain, options.concurrency ?? 64, (s) => frameAt(s));
  const frames = [...earlier, last];
  // Verify the whole chain before decoding any of it: one base, then deltas each naming its parent.
  for (let i = 0; i < frames.length; i++) {
    const s = baseSeq + i;
    const frame = frames[i]!;
    const key = tailKey(bySeq.get(s)!);
    const k = checkpointKind(frame, keys, s, key);
    if (i === 0 && k !== 'base')
      throw corrupt(stream, s, key, `expected the base of seq ${target}'s chain, found a ${k}`);
    if (i > 0) {
      if (k !== 'delta') throw corrupt(stream, s, key, `expected a delta in the chain of seq ${target}, found a ${k}`);
      if (frame.header.baseSeq !== baseSeq)
        throw corrupt(stream, s, key, `delta names base ${frame.header.baseSeq}, the chain's base is ${baseSeq}`);
      if (frame.header.parent !== frames[i - 1]!.crc)
        throw corrupt(stream, s, key, `delta does not apply to the stored seq ${s - 1} (parent checksum differs)`);
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
      state = applyOps(state, ops as Op[], frames[i]!.version);
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
  const meta = last.header.meta;
  return {
    restored,
    ledger,
    crc: last.crc,
    baseSeq,
    baseBytes: frames[0]!.bytes,
    deltaBytes: frames.slice(1).reduce((n, f) => n + f.bytes, 0),
    // A copy: the decoded header's bytes may be a view into the whole frame.
    metaBytes: meta === undefined ? undefined : new Uint8Array(meta),
    keyIds: new Set(frames.flatMap((f) => (f.keyId === undefined ? [] : [f.keyId]))),
  };
}

/** Applies a frame's ledger entries; CORRUPT when they are malformed. */
export function applyLedger(frame: Frame, keys: StreamKeys, seq: number, key: string, ledger: Ledger): Ledger {
  assertUnlocked(frame, { stream: keys.stream, seq, key });
  try {
    return applyEntries(ledger, frame.header.ledger);
  } catch (err) {
    throw corrupt(keys.stream, seq, key, `effect ledger: ${(err as Error).message}`, err);
  }
}

/** A checkpoint frame's kind; CORRUPT for a fence where a checkpoint belongs. */
export function checkpointKind(frame: Frame, keys: StreamKeys, seq: number, key: string): 'base' | 'delta' {
  const kind: FrameKind = frame.kind;
  if (kind === 'fence')
    throw corrupt(
      keys.stream,
      seq,
      key,
      'a fence where a checkpoint belongs (the slot was never committed, yet later seqs exist)',
    );
  return kind;
}

/** A CORRUPT error naming stream, seq and key, and why. */
export function corrupt(stream: string, seq: number, key: string, why: string, cause?: unknown): StatefoldError {
  return new StatefoldError('CORRUPT', `stream ${JSON.stringify(stream)} seq ${seq} (${key}): ${why}`, {
    stream,
    seq,
    key,
    cause,
  });
}
