/**
 * Reading one checkpoint's chain: its base and the deltas after it, read in parallel, verified
 * as a whole (one base, then deltas each naming its base and its parent's checksum) before any
 * of it is decoded, then folded in order.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import { applyEntries, EMPTY_LEDGER, type Ledger } from '../effects/ledger.js';
import {
  assertUnlocked,
  decodeMeta,
  decodePayload,
  decodeRaw,
  payloadBytes,
  SPAN_VERSION,
  type Frame,
  type FrameKind,
  type FrameOrigin,
  type FrameReading,
} from '../format/frame.js';
import type { LedgerEntry } from '../format/header.js';
import { decodeSpan, spanPath } from '../format/span.js';
import type { Op } from '../format/ops.js';
import type { CommittedView } from '../log/committed.js';
import type { StreamKeys } from '../log/keys.js';
import { floorAbove } from '../log/floor.js';
import { tailKey } from '../log/listing.js';
import { mapLimit, readFrame, vanishedError } from '../log/read.js';
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
  /** A chain written with span deltas: what the next span delta needs. */
  span: SpanHead | undefined;
}

/** Where a chain written with span deltas stands, for the writer's next span delta (see format/span.ts). */
export interface SpanHead {
  /** The chain's span length k. */
  every: number;
  /** The newest span position read (or the base): the seq the next span delta jumps from. */
  seq: number;
  /** CRC-32 of its frame. */
  crc: number;
  /** The msgpack operation lists of the deltas after it, in order, and their ledger changes. */
  raws: Uint8Array[];
  ledger: LedgerEntry[];
  /** Stored size of the deltas a restore of `seq` folds (the size trigger's measure at that seq). */
  deltaBytes: number;
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
      // Deleted after the log was listed, by retention that moved its floor past it: list again.
      if (await floorAbove(store, keys, s, options.signal)) throw vanishedError(keys, s, keys.slot(s));
      throw new StatefoldError(
        'CORRUPT',
        `stream ${JSON.stringify(stream)} seq ${s}: missing from the log (a gap in the chain to seq ${target})`,
        { stream, seq: s, key: keys.slot(s) },
      );
    }
    if (slot === view.tailSlot && view.tailFrame) return view.tailFrame;
    const frame = await (view.frames?.get(s) ?? readFrame(store, keys, s, tailKey(slot), limits, options.signal));
    // A fence where the listing had a checkpoint: the checkpoint was deleted since (a floor moved
    // past it; its fences are kept): list again.
    if (frame.kind === 'fence' && (await floorAbove(store, keys, s, options.signal)))
      throw vanishedError(keys, s, tailKey(slot));
    return frame;
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
  const every = last.header.span;
  const atPosition = (s: number): boolean => (every === undefined ? s === baseSeq : (s - baseSeq) % every === 0);
  // The seqs a restore folds (format/span.ts); a span position whose frame is not a span delta
  // from the position before is read around, seq by seq.
  const path = spanPath(baseSeq, every, target);
  const points = path.filter(atPosition);
  const plan = path.filter((s) => s !== target);
  const read = new Map<number, Frame>([[target, last]]);
  const fetch = async (seqs: number[]): Promise<void> => {
    const frames = await mapLimit(seqs, options.concurrency ?? 64, (s) => frameAt(s));
    seqs.forEach((s, i) => read.set(s, frames[i]!));
  };
  await fetch(plan);
  const isJump = (s: number, from: number): boolean => {
    const f = read.get(s)!;
    return f.kind === 'delta' && f.version === SPAN_VERSION && f.header.jump === from;
  };
  const gaps: number[] = [];
  for (let i = 1; i < points.length; i++)
    if (!isJump(points[i]!, points[i - 1]!)) gaps.push(...range(points[i - 1]! + 1, points[i]!));
  await fetch(gaps);
  const seqs = [...read.keys()].sort((a, b) => a - b);
  // Verify the whole chain before decoding any of it: one base, then deltas each naming the frame
  // it applies to (the seq before, or for a span delta the seq it jumps from) by its checksum.
  const steps = seqs.map((s, i) => {
    const frame = read.get(s)!;
    const key = tailKey(bySeq.get(s)!);
    const k = checkpointKind(frame, keys, s, key);
    if (i === 0) {
      if (k !== 'base') throw corrupt(stream, s, key, `expected the base of seq ${target}'s chain, found a ${k}`);
      return { seq: s, frame, key, jump: false };
    }
    if (k !== 'delta') throw corrupt(stream, s, key, `expected a delta in the chain of seq ${target}, found a ${k}`);
    if (frame.header.baseSeq !== baseSeq)
      throw corrupt(stream, s, key, `delta names base ${frame.header.baseSeq}, the chain's base is ${baseSeq}`);
    const before = read.get(seqs[i - 1]!)!;
    const jump = seqs[i - 1] !== s - 1;
    if (jump && frame.header.jumpCrc !== before.crc)
      throw corrupt(stream, s, key, `span delta does not apply to the stored seq ${seqs[i - 1]} (checksum differs)`);
    if (!jump && frame.header.parent !== before.crc)
      throw corrupt(stream, s, key, `delta does not apply to the stored seq ${s - 1} (parent checksum differs)`);
    return { seq: s, frame, key, jump };
  });
  let state = decodePayload(steps[0]!.frame, { stream, key: steps[0]!.key, seq: baseSeq });
  let ledger = applyLedger(steps[0]!.frame, keys, baseSeq, steps[0]!.key, EMPTY_LEDGER);
  // Per step: its own operations (msgpack) and the delta bytes folded up to it, for the writer's span head.
  const owns: Uint8Array[] = [new Uint8Array(0)];
  const folded = [0];
  for (const { seq: s, frame, key, jump } of steps.slice(1)) {
    const origin = { stream, key, seq: s };
    const raws = opLists(frame, origin);
    if (jump && raws.length !== s - frame.header.jump!)
      throw corrupt(
        stream,
        s,
        key,
        `span delta holds ${raws.length} operation lists for ${s - frame.header.jump!} seqs`,
      );
    if (jump) ledger = applyEntriesAt(frame.header.spanLedger, keys, s, key, ledger);
    ledger = applyLedger(frame, keys, s, key, ledger);
    try {
      for (const raw of jump ? raws : raws.slice(-1)) state = applyOps(state, opsOf(raw, origin), frame.version);
    } catch (err) {
      if (err instanceof PatchMismatch) throw corrupt(stream, s, key, `delta does not apply: ${err.message}`, err);
      throw err;
    }
    owns.push(raws[raws.length - 1]!);
    folded.push(folded[folded.length - 1]! + frame.bytes);
  }
  // What a writer going on from here needs for its next span delta: the last position, and the
  // operations and ledger changes of the steps after it.
  let span: SpanHead | undefined;
  if (every !== undefined) {
    const p = steps.findLastIndex(({ seq: s }) => atPosition(s));
    const after = steps.slice(p + 1);
    span = {
      every,
      seq: steps[p]!.seq,
      crc: steps[p]!.frame.crc,
      raws: owns.slice(p + 1),
      ledger: after.flatMap(({ frame }) => frame.header.ledger ?? []),
      deltaBytes: folded[p]!,
    };
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
    baseBytes: steps[0]!.frame.bytes,
    deltaBytes: folded[folded.length - 1]!,
    span,
    // A copy: the decoded header's bytes may be a view into the whole frame.
    metaBytes: meta === undefined ? undefined : new Uint8Array(meta),
    keyIds: new Set(steps.flatMap(({ frame: f }) => (f.keyId === undefined ? [] : [f.keyId]))),
  };
}

/** Applies a frame's ledger entries; CORRUPT when they are malformed. */
export function applyLedger(frame: Frame, keys: StreamKeys, seq: number, key: string, ledger: Ledger): Ledger {
  assertUnlocked(frame, { stream: keys.stream, seq, key });
  return applyEntriesAt(frame.header.ledger, keys, seq, key, ledger);
}

/** Applies ledger entries read from the frame of `seq`; CORRUPT when they are malformed. */
function applyEntriesAt(
  entries: LedgerEntry[] | undefined,
  keys: StreamKeys,
  seq: number,
  key: string,
  ledger: Ledger,
): Ledger {
  try {
    return applyEntries(ledger, entries);
  } catch (err) {
    throw corrupt(keys.stream, seq, key, `effect ledger: ${(err as Error).message}`, err);
  }
}

/** The operation lists of a span delta, one per seq it spans; CORRUPT when the payload is not one. */
export function spanParts(frame: Frame, origin: FrameOrigin): Uint8Array[] {
  try {
    return decodeSpan(payloadBytes(frame, origin));
  } catch (err) {
    if (isStatefoldError(err)) throw err;
    throw corrupt(origin.stream, origin.seq, origin.key, (err as Error).message, err);
  }
}

/**
 * A delta's operation lists (msgpack), one per seq it spans: its own is the last (for a plain
 * delta, the only one).
 */
export function opLists(frame: Frame, origin: FrameOrigin): Uint8Array[] {
  return frame.version === SPAN_VERSION ? spanParts(frame, origin) : [payloadBytes(frame, origin)];
}

/** A delta's own operations, on the seq before it (for a span delta, the last list it holds). */
export function ownOps(frame: Frame, origin: FrameOrigin): Op[] {
  return opsOf(opLists(frame, origin).at(-1)!, origin);
}

/** The operations a delta's msgpack holds; CORRUPT when it is not a list. */
export function opsOf(raw: Uint8Array, origin: FrameOrigin): Op[] {
  const ops = decodeRaw(raw, origin);
  if (!Array.isArray(ops))
    throw corrupt(origin.stream, origin.seq, origin.key, 'delta payload is not a list of operations');
  return ops as Op[];
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

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let s = from; s < to; s++) out.push(s);
  return out;
}
