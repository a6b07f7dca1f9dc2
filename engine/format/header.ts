/**
 * Frame headers: what every frame says about itself, and how that is stored (a msgpack map with
 * one-letter keys, since a delta of a small change is only a few hundred bytes and the header is
 * paid on every one of them).
 */

import { isKeyId } from './keyring.js';
import { SPAN_VERSION } from './span.js';

/** The header of a frame, as written and read. */
export interface FrameHeader {
  /** The stream id, in full (keys hold only its encoding). */
  stream: string;
  /** The seq this frame belongs to. */
  seq: number;
  /** Writer epoch of the engine that wrote it. */
  epoch: number;
  /** Random id of the engine instance that wrote it (hex). */
  writer: string;
  /** Milliseconds since the epoch, when the checkpoint was captured. */
  createdAt: number;
  /** Delta: the seq of the base its chain starts from. Base: its own seq. */
  baseSeq?: number;
  /** Delta: CRC-32 of the frame of seq - 1, which it applies to. */
  parent?: number;
  /** Caller's meta, encoded (msgpack bytes), absent when none was given. */
  meta?: Uint8Array;
  /** Effect ledger entries: all of the ledger in a base, what changed since seq - 1 in a delta. */
  ledger?: LedgerEntry[];
  /** A filler: a delta with no operations written by a claim to close a slot the old writer never committed. */
  filler?: boolean;
  /**
   * A delete fence: deleteStream's, which says that every seq up to its slot's is deleted (a
   * retention floor at the seq after it is implied). Nothing is ever written after it in its slot.
   */
  deleted?: boolean;
  /** Sealed frames: the id of the key they are encrypted with. */
  keyId?: string;
  /**
   * A chain written with span deltas (`policy.spanEvery`): its span length k, in its base and in
   * every delta, so that a reader of any one of them knows which seqs hold span deltas.
   */
  span?: number;
  /** A span delta (format version 4): the seq its spanned operations apply to (k seqs back, or its base). */
  jump?: number;
  /** A span delta: CRC-32 of the frame of `jump`. */
  jumpCrc?: number;
  /** A span delta: the effect ledger changes of the seqs after `jump` and before its own, in order. */
  spanLedger?: LedgerEntry[];
  /** The schema version of the caller's state it holds (format version 5 only, at least 2; absent: 1). */
  schemaVersion?: number;
  /** The oldest schema version whose code may read its state as it is (format version 5 only, below schemaVersion; absent: schemaVersion). */
  readableFrom?: number;
}

/** The format version of a frame that records a schema version (a base or delta, sealed or not, a span delta or not). */
export const SCHEMA_FORMAT = 5;

/** A ledger change as stored in a frame header: [token, record], or [token, null] when dropped. */
export type LedgerEntry = [string, StoredRecord | null];

/** The stored form of an effect record (its token is the entry's key). */
export interface StoredRecord {
  s: 'pending' | 'done' | 'failed';
  t0: number;
  t1?: number;
  r?: unknown;
  e?: { name: string; message: string; code?: string };
}

/** Header field names as stored (never change one: v1 frames are read forever). */
const STORED_NAMES: [keyof FrameHeader, string][] = [
  ['stream', 's'],
  ['seq', 'q'],
  ['epoch', 'e'],
  ['writer', 'w'],
  ['createdAt', 't'],
  ['baseSeq', 'b'],
  ['parent', 'p'],
  ['meta', 'm'],
  ['ledger', 'x'],
  ['filler', 'f'],
  ['keyId', 'k'],
  ['span', 'l'],
  ['jump', 'j'],
  ['jumpCrc', 'c'],
  ['spanLedger', 'y'],
  ['deleted', 'd'],
  ['schemaVersion', 'v'],
  ['readableFrom', 'o'],
];

/** The fields a sealed frame keeps in its ciphertext: the caller's data. The rest stays readable without the key. */
const SECRET_NAMES = new Set<keyof FrameHeader>(['meta', 'ledger', 'spanLedger']);

/** The header as the map that is stored. */
export function toStoredHeader(h: FrameHeader): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, short] of STORED_NAMES) if (h[name] !== undefined) out[short] = h[name];
  return out;
}

/** A sealed frame's header as two stored maps: what stays readable, and the secret fields (meta, ledger). */
export function toSealedHeaders(h: FrameHeader): { open: Record<string, unknown>; secret: Record<string, unknown> } {
  const open: Record<string, unknown> = {};
  const secret: Record<string, unknown> = {};
  for (const [name, short] of STORED_NAMES) {
    if (h[name] !== undefined) (SECRET_NAMES.has(name) ? secret : open)[short] = h[name];
  }
  return { open, secret };
}

/** The header from its stored map; throws when it is not a map (fields are checked by decodeFrame). */
export function fromStoredHeader(raw: unknown): FrameHeader {
  const out: Record<string, unknown> = {};
  for (const [name, short] of STORED_NAMES) {
    const value = storedMap(raw)[short];
    if (value !== undefined) out[name] = value;
  }
  return out as unknown as FrameHeader;
}

/** Adds a sealed frame's secret fields, once opened, to its header; throws when they are not a map of those fields. */
export function addSecretHeader(header: FrameHeader, raw: unknown): void {
  const stored = storedMap(raw);
  for (const [name, short] of STORED_NAMES) {
    if (stored[short] === undefined) continue;
    if (!SECRET_NAMES.has(name)) throw new Error(`secret header holds ${name}, which is not secret`);
    (header as unknown as Record<string, unknown>)[name] = stored[short];
  }
}

function storedMap(raw: unknown): Record<string, unknown> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new Error('header is not a map');
  return raw as Record<string, unknown>;
}

/**
 * What is wrong with a decoded header for a frame of `kind` in format `version` (sealed or not),
 * or undefined when nothing is; the caller adds stream, seq and key.
 */
export function headerProblem(
  header: FrameHeader,
  kind: 'base' | 'delta' | 'fence',
  version: number,
  sealed: boolean,
): string | undefined {
  if (
    header === null ||
    typeof header !== 'object' ||
    typeof header.stream !== 'string' ||
    !Number.isSafeInteger(header.seq) ||
    !Number.isSafeInteger(header.epoch) ||
    typeof header.writer !== 'string' ||
    typeof header.createdAt !== 'number'
  )
    return 'malformed header';
  if (
    kind === 'delta' &&
    (!Number.isSafeInteger(header.baseSeq) || typeof header.parent !== 'number' || header.baseSeq! >= header.seq)
  )
    return 'delta frame without a valid base and parent';
  if (kind === 'base' && header.baseSeq !== header.seq) return 'base frame whose base is not itself';
  if ((version === 2 || version === SPAN_VERSION) && kind !== 'delta')
    return `a ${kind} frame in format version ${version}, which only deltas use`;
  if (version === SCHEMA_FORMAT && kind === 'fence') return `a fence in format version ${version}, which holds state`;
  const schema = schemaProblem(header, version);
  if (schema !== undefined) return schema;
  if (header.span !== undefined && (kind === 'fence' || !Number.isSafeInteger(header.span) || header.span < 2))
    return `span ${String(header.span)} is not valid here (an integer of at least 2, in a base or delta)`;
  if (isSpanDeltaHeader(header, version)) {
    const { jump, jumpCrc } = header;
    if (header.span === undefined || !Number.isSafeInteger(jump) || jump! < header.baseSeq! || jump! >= header.seq)
      return 'span delta without a valid span and jump (a seq from its base to the one before it)';
    if (!Number.isSafeInteger(jumpCrc) || jumpCrc! < 0 || jumpCrc! > 0xffffffff)
      return 'span delta without a valid checksum of the frame it jumps from';
  } else if (header.jump !== undefined || header.jumpCrc !== undefined || header.spanLedger !== undefined)
    return `jump fields in a format version ${version} frame (only span deltas, version ${SPAN_VERSION} or ${SCHEMA_FORMAT}, have them)`;
  const secretInClear = header.meta !== undefined || header.ledger !== undefined || header.spanLedger !== undefined;
  if (sealed && (!isKeyId(header.keyId) || secretInClear))
    return 'sealed frame whose header has no valid key id, or holds meta or ledger in the clear';
  if (!sealed && header.keyId !== undefined) return 'a key id in a frame that is not sealed';
  if (header.deleted !== undefined && (kind !== 'fence' || header.deleted !== true))
    return 'a delete mark on a frame that is not a fence';
  return undefined;
}

/** Whether a frame of format `version` with `header` is a span delta: version 4, or 5 with a jump. */
export function isSpanDeltaHeader(header: FrameHeader, version: number): boolean {
  return version === SPAN_VERSION || (version === SCHEMA_FORMAT && header.jump !== undefined);
}

/** Whether `frame` is a span delta (format version 4, or 5 with a jump). */
export function isSpanDelta(frame: { version: number; header: FrameHeader }): boolean {
  return isSpanDeltaHeader(frame.header, frame.version);
}

/** What is wrong with a header's schema fields in format `version`: only version 5 has them, `v` at least 2, `o` below it. */
function schemaProblem(header: FrameHeader, version: number): string | undefined {
  const { schemaVersion: v, readableFrom: o } = header;
  if (version !== SCHEMA_FORMAT)
    return v === undefined && o === undefined
      ? undefined
      : `schema fields in a format version ${version} frame (only version ${SCHEMA_FORMAT} has them)`;
  if (!Number.isSafeInteger(v) || v! < 2) return `schema version ${String(v)} is not an integer of at least 2`;
  if (o !== undefined && (!Number.isSafeInteger(o) || o < 1 || o >= v!))
    return `readable-from ${String(o)} is not an integer from 1 to the schema version ${v} minus 1`;
  return undefined;
}
