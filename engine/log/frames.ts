/**
 * What a checkpoint frame of a chain holds, read with the chain's errors: its kind (a fence where
 * a checkpoint belongs is CORRUPT), its operation lists (one, or one per seq a span delta spans)
 * and its effect ledger changes.
 */
import { corrupt, isStatefoldError } from '../errors.js';
import { applyEntries, type Ledger } from '../effects/ledger.js';
import {
  assertUnlocked,
  decodeRaw,
  payloadBytes,
  isSpanDelta,
  type Frame,
  type FrameKind,
  type FrameOrigin,
} from '../format/frame.js';
import type { LedgerEntry } from '../format/header.js';
import type { Op } from '../format/ops.js';
import { decodeSpan } from '../format/span.js';
import type { StreamKeys } from './keys.js';

/** Applies a frame's ledger entries; CORRUPT when they are malformed. */
export function applyLedger(frame: Frame, keys: StreamKeys, seq: number, key: string, ledger: Ledger): Ledger {
  assertUnlocked(frame, { stream: keys.stream, seq, key });
  return applyEntriesAt(frame.header.ledger, keys, seq, key, ledger);
}

/** Applies ledger entries read from the frame of `seq`; CORRUPT when they are malformed. */
export function applyEntriesAt(
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
  return isSpanDelta(frame) ? spanParts(frame, origin) : [payloadBytes(frame, origin)];
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
