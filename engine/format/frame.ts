/**
 * Frames: the one binary format of every stored object. A frame is self-describing, versioned
 * and checksummed, so that damage is detected and never decoded into wrong state.
 *
 *   offset size  field
 *   0      4     magic "SFLD"
 *   4      1     format version: 1; 2 for a delta with append operations (see ops.ts); 3 for a
 *                sealed (encrypted) frame: a base, a delta (which may hold appends), a fence;
 *                4 for a span delta (see span.ts), sealed or not, which may hold appends;
 *                5 for a base or delta whose header records a schema version (schema.ts), sealed
 *                or not, a span delta when it has a jump, which may hold appends
 *   5      1     kind: 1 base, 2 delta, 3 fence
 *   6      1     compression of the payload: 0 none, 1 lz4 block (see compression.ts)
 *   7      1     flags: 0; in version 3, 1 (sealed) or 3 (sealed, with a secret header); in
 *                versions 4 and 5, any of the three
 *   8      4     header length H (u32 LE)
 *   12     4     body length P, as stored (u32 LE)
 *   16     4     payload length uncompressed (u32 LE)
 *   20     H     header: msgpack map, one-letter keys (see header.ts): stream, seq, epoch,
 *                writer, createdAt, baseSeq, parent, meta, ledger, filler, keyId, span,
 *                jump, jumpCrc, spanLedger, deleted, schemaVersion, readableFrom
 *   20+H   P     body: the payload, msgpack of the base state or of the delta's operations,
 *                compressed; sealed: see below
 *   20+H+P 4     CRC-32 of every byte before it (u32 LE)
 *
 * A sealed frame's header holds no meta or ledger (the caller's data) but the id of its key, and
 * its body is AES-256-GCM (assemble.ts):
 *
 *   12 nonce (random) | ciphertext of [with flag 2 only: u32 LE length S | S bytes: msgpack map
 *   of meta and ledger] [the compressed payload] | 16 tag
 *
 * with every byte before the body (fixed fields and header: stream, seq, kind, key id...) as
 * associated data, so an object moved to another stream or seq, edited, or replaced by a
 * plaintext frame is CORRUPT. The CRC still covers the whole frame: accidental damage is told
 * apart from a failed authentication.
 *
 * Every later version keeps the magic, the version byte, the three lengths at 8-19 and the
 * trailing CRC: a reader then tells a newer statefold's intact frame (UNSUPPORTED, which repair
 * and skipDamaged never step over) from damage (CORRUPT). So anything an older reader would refuse
 * or misread (a new header key, operation or payload encoding) takes a new version byte.
 */
import { crc32 } from 'node:zlib';
import { StatefoldError, corrupt, unsupported } from '../errors.js';
import { FIXED, FLAG_SEALED, FLAG_SECRET, MAGIC, SEAL_OVERHEAD, TRAILER, assembleFrame, openBody } from './assemble.js';
import { COMPRESSIONS, asBuffer } from './compression.js';
import {
  addSecretHeader,
  fromStoredHeader,
  headerProblem,
  SCHEMA_FORMAT,
  toSealedHeaders,
  toStoredHeader,
  type FrameHeader,
} from './header.js';
import { SPAN_VERSION } from './span.js';
import { unavailable, type Keyring, type SealingKey } from './keyring.js';
import { decodeValue, encodeValue } from './values.js';

export type { FrameHeader } from './header.js';
export { isSpanDelta } from './header.js';

export { MAGIC } from './assemble.js';
/** The newest format version this statefold writes and reads; it reads every version from 1. */
export const FORMAT_VERSION = 5;
export { SPAN_VERSION } from './span.js';

/** What a frame holds: a full state, the operations since the previous seq, or a writer's claim. */
export type FrameKind = 'base' | 'delta' | 'fence';
const KIND_CODE: Record<FrameKind, number> = { base: 1, delta: 2, fence: 3 };
const CODE_KIND: Record<number, FrameKind> = { 1: 'base', 2: 'delta', 3: 'fence' };

/** A frame read back and verified. */
export interface Frame {
  kind: FrameKind;
  /** The format version it was written in (2: a delta that may hold append operations; 3: sealed; 4: a span delta). */
  version: number;
  header: FrameHeader;
  /** CRC-32 stored in its trailer (a delta's `parent` names it). */
  crc: number;
  /** Total size of the stored object in bytes. */
  bytes: number;
  /** The stored compression byte (see compression.ts). */
  compression: number;
  /** Length of the payload uncompressed. */
  rawLength: number;
  /** The payload as stored (compressed or not); decode with decodePayload. A locked frame: its sealed body. */
  payload: Uint8Array;
  /** A sealed frame: the id of its key. */
  keyId?: string;
  /**
   * A sealed frame not opened (read without its key): its header lacks meta and ledger and its
   * payload is ciphertext, so decodePayload, decodeMeta and applyLedger refuse it KEY_UNAVAILABLE.
   */
  locked?: { aad: Uint8Array; secret: boolean };
}

/** Limits applied to every frame read. */
export interface FrameLimits {
  /** Largest uncompressed payload accepted, in bytes. */
  maxPayloadBytes: number;
}

/** How frames are read: the limits, and the keys of an encrypted stream (then every checkpoint must be sealed). */
export interface FrameReading extends FrameLimits {
  keyring?: Keyring | undefined;
}

/** Default limit: 1 GiB of uncompressed state per frame. */
export const DEFAULT_LIMITS: FrameLimits = { maxPayloadBytes: 1 << 30 };

/**
 * Builds a frame: header, payload compressed (WRITE_COMPRESSION) when that makes it smaller,
 * sealed with `sealing` when given (format version 3), checksum.
 */
export function encodeFrame(
  kind: FrameKind,
  header: FrameHeader,
  raw: Uint8Array,
  version: 1 | 2 | 4 = 1,
  sealing?: SealingKey,
): Uint8Array {
  checkFrameSize(header, raw);
  const { head, seal } = encodeHeader(header, sealing);
  return assembleFrame(KIND_CODE[kind], storedVersion(version, sealing, header), head, raw, seal);
}

/**
 * The version stored for a frame of `version` (by its content): 5 when its header records a
 * schema version; else a sealed frame is 3, unless it is a span delta.
 */
export function storedVersion(version: 1 | 2 | 4, sealing: SealingKey | undefined, header: FrameHeader): number {
  if (header.schemaVersion !== undefined) return SCHEMA_FORMAT;
  return version === SPAN_VERSION || sealing === undefined ? version : 3;
}

/** The stored form of a frame header: one map, or for a sealed frame the readable map and the secret one. */
export function encodeHeader(
  header: FrameHeader,
  sealing?: SealingKey,
): { head: Uint8Array; seal?: { key: Uint8Array; secret: Uint8Array } } {
  if (sealing === undefined) return { head: encodeValue(toStoredHeader(header)) };
  const { open, secret } = toSealedHeaders({ ...header, keyId: sealing.id });
  const secretBytes = Object.keys(secret).length === 0 ? new Uint8Array(0) : encodeValue(secret);
  return { head: encodeValue(open), seal: { key: sealing.key, secret: secretBytes } };
}

/** The numeric code stored for a frame kind. */
export function kindCode(kind: FrameKind): number {
  return KIND_CODE[kind];
}

/** Rejects a payload too large for a frame (compression only ever shrinks a stored payload). */
export function checkFrameSize(header: FrameHeader, raw: Uint8Array): void {
  if (raw.byteLength > 0xffffffff) {
    throw new StatefoldError(
      'INVALID_STATE',
      `seq ${header.seq}: payload of ${raw.byteLength} bytes exceeds the 4 GiB frame limit`,
      { stream: header.stream, seq: header.seq },
    );
  }
}

/** Where a frame was read from, to verify its identity and to name it in errors. */
export interface FrameOrigin {
  stream: string;
  key: string;
  /** The seq the key names. */
  seq: number;
}

/**
 * Verifies and parses a stored frame: length, magic, version, checksum, lengths, and that it
 * belongs to the stream and seq its key names. Anything wrong is CORRUPT, with stream, seq and key;
 * an intact frame of a newer format (version, kind or compression) is UNSUPPORTED.
 */
export function decodeFrame(bytes: Uint8Array, origin: FrameOrigin, limits: FrameReading = DEFAULT_LIMITS): Frame {
  const fail = (why: string): never => {
    throw corrupt(origin.stream, origin.seq, origin.key, why);
  };
  const buf = asBuffer(bytes);
  if (buf.byteLength < FIXED + TRAILER)
    fail(`object of ${buf.byteLength} bytes is too short to be a frame (truncated?)`);
  if (buf.readUInt32LE(0) !== MAGIC) fail('not a statefold frame (bad magic)');
  const version = buf[4]!;
  if (version < 1) fail(`frame format version ${version} does not exist`);
  const headLength = buf.readUInt32LE(8);
  const payloadLength = buf.readUInt32LE(12);
  const rawLength = buf.readUInt32LE(16);
  const expected = FIXED + headLength + payloadLength + TRAILER;
  if (expected !== buf.byteLength)
    fail(`frame declares ${expected} bytes but the object has ${buf.byteLength} (truncated or extended)`);
  const crc = buf.readUInt32LE(buf.byteLength - TRAILER);
  if (crc32(buf.subarray(0, buf.byteLength - TRAILER)) !== crc) fail('checksum mismatch (damaged object)');
  // Intact, so not damage: a version, kind or compression this statefold does not know is a newer
  // statefold's (every version keeps the fixed part's lengths and the trailing checksum for this).
  const newer = (why: string): never => {
    throw unsupported(origin.stream, origin.seq, origin.key, why);
  };
  if (version > FORMAT_VERSION)
    newer(`frame format version ${version} is not supported by this statefold (reads versions 1 to ${FORMAT_VERSION})`);
  const kind = CODE_KIND[buf[5]!];
  if (kind === undefined) newer(`unknown frame kind ${buf[5]}`);
  const compression = COMPRESSIONS.get(buf[6]!);
  if (compression === undefined) newer(`unknown compression ${buf[6]}`);
  const flags = buf[7]!;
  const sealed = (flags & FLAG_SEALED) !== 0;
  const sealedFlags = flags === FLAG_SEALED || flags === (FLAG_SEALED | FLAG_SECRET);
  const valid = version === 3 ? sealedFlags : version >= SPAN_VERSION ? sealedFlags || flags === 0 : flags === 0;
  if (!valid) fail(`flags ${flags} are not valid in format version ${version}`);
  // Bounded reads: never allocate what a header claims beyond what the compression could expand to or the limit.
  // (A sealed body holds more than the payload: its lengths are checked exactly once it is opened.)
  if (sealed && payloadLength < SEAL_OVERHEAD) fail(`sealed body of ${payloadLength} bytes is too short`);
  const lengths = sealed ? undefined : compression!.checkLengths(payloadLength, rawLength);
  if (lengths !== undefined) fail(lengths);
  if (rawLength > limits.maxPayloadBytes)
    fail(`payload of ${rawLength} bytes exceeds the limit of ${limits.maxPayloadBytes}`);
  let header: FrameHeader;
  try {
    header = fromStoredHeader(decodeValue(buf.subarray(FIXED, FIXED + headLength)));
  } catch (err) {
    return fail(`unreadable header: ${(err as Error).message}`);
  }
  const problem = headerProblem(header, kind!, version, sealed);
  if (problem !== undefined) fail(problem);
  if (header.stream !== origin.stream)
    fail(`frame belongs to stream ${JSON.stringify(header.stream)} (copied in from another stream?)`);
  if (header.seq !== origin.seq) fail(`frame is seq ${header.seq}, not ${origin.seq} (copied in from another seq?)`);
  // An encrypted stream is sealed throughout, fences included (a plaintext fence on top would hide
  // the newest checkpoint): a plaintext frame there is forged, or from before encryption.
  if (!sealed && limits.keyring !== undefined)
    fail(
      `a plaintext ${kind === 'fence' ? 'fence' : 'checkpoint'} in a stream read with encryption (forged, or written before encryption was turned on)`,
    );
  const payload = buf.subarray(FIXED + headLength, FIXED + headLength + payloadLength);
  const frame: Frame = {
    kind: kind!,
    version,
    header,
    crc,
    bytes: buf.byteLength,
    compression: compression!.id,
    rawLength,
    payload,
  };
  if (sealed) {
    frame.keyId = header.keyId!;
    frame.locked = { aad: buf.subarray(0, FIXED + headLength), secret: (flags & FLAG_SECRET) !== 0 };
  }
  return frame;
}

/**
 * Opens a locked frame with its key: authenticates and decrypts its body, adds meta and ledger to
 * its header and sets its payload. CORRUPT when authentication fails (wrong key, or altered bytes).
 */
export function unsealFrame(frame: Frame, key: Uint8Array, origin: FrameOrigin, limits: FrameLimits): void {
  if (frame.locked === undefined) return;
  const fail = (why: string, cause?: unknown): never => {
    throw corrupt(origin.stream, origin.seq, origin.key, why, cause);
  };
  let opened: { secret: Uint8Array; payload: Uint8Array };
  try {
    opened = openBody(frame.payload, frame.locked.aad, key, frame.locked.secret);
  } catch (err) {
    return fail(
      `authentication failed with key ${JSON.stringify(frame.keyId)}: a wrong key, or the object was altered or moved`,
      err,
    );
  }
  const compression = COMPRESSIONS.get(frame.compression)!;
  const lengths = compression.checkLengths(opened.payload.byteLength, frame.rawLength);
  if (lengths !== undefined) fail(lengths);
  if (frame.rawLength > limits.maxPayloadBytes)
    fail(`payload of ${frame.rawLength} bytes exceeds the limit of ${limits.maxPayloadBytes}`);
  try {
    if (opened.secret.byteLength > 0) addSecretHeader(frame.header, decodeValue(opened.secret));
  } catch (err) {
    fail(`unreadable sealed header: ${(err as Error).message}`, err);
  }
  frame.payload = opened.payload;
  delete frame.locked;
}

/** KEY_UNAVAILABLE unless `frame` is open: its meta, ledger and payload are there to read. */
export function assertUnlocked(frame: Frame, origin: FrameOrigin): void {
  if (frame.locked === undefined) return;
  throw unavailable(frame.keyId!, origin.stream, 'the stream is encrypted and was read without `encryption`', {
    seq: origin.seq,
    key: origin.key,
  });
}

/** The stream a stored frame names in its header, its checksum verified; undefined for anything else. */
export function frameStream(bytes: Uint8Array): string | undefined {
  const buf = asBuffer(bytes);
  if (buf.byteLength < FIXED + TRAILER || buf.readUInt32LE(0) !== MAGIC) return undefined;
  const headLength = buf.readUInt32LE(8);
  if (FIXED + headLength > buf.byteLength - TRAILER) return undefined;
  if (crc32(buf.subarray(0, buf.byteLength - TRAILER)) !== buf.readUInt32LE(buf.byteLength - TRAILER)) return undefined;
  try {
    const stream = fromStoredHeader(decodeValue(buf.subarray(FIXED, FIXED + headLength))).stream;
    return typeof stream === 'string' ? stream : undefined;
  } catch {
    return undefined;
  }
}

/** Decompresses and decodes a verified frame's payload. */
export function decodePayload(frame: Frame, origin: FrameOrigin): unknown {
  return decodeRaw(payloadBytes(frame, origin), origin);
}

/** A verified frame's payload, decompressed (msgpack). */
export function payloadBytes(frame: Frame, origin: FrameOrigin): Uint8Array {
  assertUnlocked(frame, origin);
  try {
    return COMPRESSIONS.get(frame.compression)!.decompress(frame.payload, frame.rawLength);
  } catch (err) {
    throw undecodable(origin, err);
  }
}

/** Decodes msgpack taken from a frame's payload; CORRUPT when it cannot be. */
export function decodeRaw(raw: Uint8Array, origin: FrameOrigin): unknown {
  try {
    return decodeValue(raw);
  } catch (err) {
    throw undecodable(origin, err);
  }
}

function undecodable(origin: FrameOrigin, err: unknown): StatefoldError {
  return corrupt(origin.stream, origin.seq, origin.key, `undecodable payload: ${(err as Error).message}`, err);
}

/** Decodes a frame header's meta (undefined when none was stored). */
export function decodeMeta(frame: Frame, origin: FrameOrigin): unknown {
  assertUnlocked(frame, origin);
  if (frame.header.meta === undefined) return undefined;
  try {
    return decodeValue(frame.header.meta);
  } catch (err) {
    throw corrupt(origin.stream, origin.seq, origin.key, 'undecodable meta', err);
  }
}
