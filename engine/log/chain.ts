/**
 * The chain model, in one place for restore (restore/read-chain.ts), verifyStream
 * (admin/verify.ts) and the writer (writer/queue.ts): which seqs a restore folds, how each frame
 * links to the one it applies to, and where a chain written with span deltas stands
 * (format/span.ts has the payload).
 *
 * A chain is a base and the deltas after it, each naming its base and, by checksum, the frame it
 * applies to: the seq before, or for a span delta the span position it jumps from. In a chain
 * with span length k the span positions are the base and every k-th seq after it.
 */
import { corrupt, type StatefoldError } from '../errors.js';
import type { Frame } from '../format/frame.js';
import type { LedgerEntry } from '../format/header.js';

/** Whether `seq` is a span position of the chain from `base` with span length `every` (undefined: only the base is). */
export function atSpanPosition(seq: number, base: number, every: number | undefined): boolean {
  return every === undefined ? seq === base : (seq - base) % every === 0;
}

/**
 * The seqs a restore of `target` folds, in a chain from `base` with span length `every`
 * (undefined: no span deltas): the base, each span position after it, then every seq after the
 * last position; every seq from the base when there are no span deltas.
 */
export function spanPath(base: number, every: number | undefined, target: number): number[] {
  const step = every ?? 1;
  const lastPoint = target - ((target - base) % step);
  const path: number[] = [];
  for (let s = base; s < lastPoint; s += step) path.push(s);
  for (let s = lastPoint; s <= target; s++) path.push(s);
  return path;
}

/** What a restore of `target` reads first: the seqs of its span path but the target, and the span positions among them. */
export function planChain(
  base: number,
  every: number | undefined,
  target: number,
): { plan: number[]; points: number[] } {
  const path = spanPath(base, every, target);
  return { plan: path.filter((s) => s !== target), points: path.filter((s) => atSpanPosition(s, base, every)) };
}

/**
 * The seqs to read around span positions whose frame is not a span delta jumping from the position
 * before (`jumps(seq, from)` says whether it is): every seq between the two.
 */
export function gapsBetween(points: readonly number[], jumps: (seq: number, from: number) => boolean): number[] {
  const gaps: number[] = [];
  for (let i = 1; i < points.length; i++)
    if (!jumps(points[i]!, points[i - 1]!)) for (let s = points[i - 1]! + 1; s < points[i]!; s++) gaps.push(s);
  return gaps;
}

/**
 * Why the delta `frame` at `seq` (`key`) does not link into the chain from `base` after `before`
 * (the frame it applies to: the seq before, or with `jump` the span position it jumps from), or
 * undefined when it does.
 */
export function linkError(
  stream: string,
  seq: number,
  key: string,
  frame: Frame,
  base: number,
  before: { seq: number; crc: number },
  jump: boolean,
): StatefoldError | undefined {
  if (frame.header.baseSeq !== base)
    return corrupt(stream, seq, key, `delta names base ${frame.header.baseSeq}, the chain's base is ${base}`);
  if (jump && frame.header.jumpCrc !== before.crc)
    return corrupt(stream, seq, key, `span delta does not apply to the stored seq ${before.seq} (checksum differs)`);
  if (!jump && frame.header.parent !== before.crc)
    return corrupt(stream, seq, key, `delta does not apply to the stored seq ${seq - 1} (parent checksum differs)`);
  return undefined;
}

/** CORRUPT when a span delta at `seq` jumping from `from` does not hold one operation list per seq it spans. */
export function spanLengthError(
  stream: string,
  seq: number,
  key: string,
  lists: number,
  from: number,
): StatefoldError | undefined {
  if (lists === seq - from) return undefined;
  return corrupt(stream, seq, key, `span delta holds ${lists} operation lists for ${seq - from} seqs`);
}

/**
 * Where a chain written with span deltas stands: its newest span position (or base), and what
 * the next span delta, which jumps from it, carries of the seqs after it.
 */
export interface SpanState {
  /** The chain's span length k. */
  every: number;
  /** The newest span position: the seq the next span delta jumps from. */
  seq: number;
  /** CRC-32 of its frame. */
  crc: number;
  /** The msgpack operation lists of the deltas after it, in order, and their ledger changes. */
  raws: Uint8Array[];
  ledger: LedgerEntry[];
  /** Stored size of the deltas a restore of `seq` folds (the size trigger's measure at that seq). */
  deltaBytes: number;
}

/**
 * The span state after seq `seq` (checksum `crc`, own operations `own`, ledger changes `ledger`)
 * of the chain from `base`: a span position starts the next span (even one that could not be a
 * span delta: then readers walk the seqs before it one by one); any other seq is carried by it.
 */
export function nextSpan(
  span: SpanState | undefined,
  every: number | undefined,
  base: number,
  step: { seq: number; crc: number; own: Uint8Array; ledger: readonly LedgerEntry[]; deltaBytes: number },
): SpanState | undefined {
  if (every !== undefined && atSpanPosition(step.seq, base, every))
    return { every, seq: step.seq, crc: step.crc, raws: [], ledger: [], deltaBytes: step.deltaBytes };
  return span && { ...span, raws: [...span.raws, step.own], ledger: [...span.ledger, ...step.ledger] };
}

/** Whether the delta at `seq` of the chain from `base` can be a span delta jumping from `span`'s position. */
export function canJump(span: SpanState, base: number, seq: number): boolean {
  return atSpanPosition(seq, base, span.every) && span.seq === seq - span.every && span.raws.length === span.every - 1;
}
