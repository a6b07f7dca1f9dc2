/**
 * Forges stored objects from the documented format v1 alone (the header comment of the engine's
 * frame module, the key layout in the README), with msgpackr and node:zlib and none of
 * statefold's code: what any other writer of a stream, a malicious one included, can do.
 *
 *   "SFLD" | version 1 | kind (1 base, 2 delta, 3 fence) | codec (0 msgpack) | flags 0 |
 *   header length | payload length | uncompressed payload length (u32 LE each) |
 *   header: msgpack map with one-letter keys | payload: msgpack | CRC-32 of all before it (u32 LE)
 */
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';

/** What a frame holds. */
export type ForgedKind = 'base' | 'delta' | 'fence';

/** A frame header by field name (stored under the one-letter keys s, q, e, w, t, b, p, m, x). */
export interface ForgedHeader {
  stream: string;
  seq: number;
  epoch: number;
  writer: string;
  createdAt: number;
  base?: number;
  parent?: number;
  meta?: Uint8Array;
  effects?: unknown[];
}

const KIND_CODE: Record<ForgedKind, number> = { base: 1, delta: 2, fence: 3 };
const STORED_NAMES: [keyof ForgedHeader, string][] = [
  ['stream', 's'],
  ['seq', 'q'],
  ['epoch', 'e'],
  ['writer', 'w'],
  ['createdAt', 't'],
  ['base', 'b'],
  ['parent', 'p'],
  ['meta', 'm'],
  ['effects', 'x'],
];
// Plain msgpack maps and arrays: no msgpackr records, no float32 narrowing.
const packr = new Packr({ useRecords: false, useFloat32: 0, variableMapSize: true });

/** Builds a frame of `kind` with `header` and `payload` (any msgpack value), uncompressed, with a valid checksum. */
export function forgeFrame(kind: ForgedKind, header: ForgedHeader, payload: unknown, version = 1): Buffer {
  const stored: Record<string, unknown> = {};
  for (const [name, short] of STORED_NAMES) if (header[name] !== undefined) stored[short] = header[name];
  const head = packr.pack(stored);
  const body = packr.pack(payload);
  const frame = Buffer.alloc(20 + head.length + body.length + 4);
  frame.write('SFLD', 0, 'latin1');
  frame[4] = version;
  frame[5] = KIND_CODE[kind];
  frame[6] = 0; // codec: msgpack, not compressed
  frame[7] = 0;
  frame.writeUInt32LE(head.length, 8);
  frame.writeUInt32LE(body.length, 12);
  frame.writeUInt32LE(body.length, 16);
  head.copy(frame, 20);
  body.copy(frame, 20 + head.length);
  frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
  return frame;
}

/** The CRC-32 in a frame's trailer: what a delta on top of it names as its `parent`. */
export function frameChecksum(frame: Uint8Array): number {
  return Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).readUInt32LE(frame.byteLength - 4);
}

/**
 * The key of checkpoint `seq` of `stream` in a slot without a fence: `s.<id>/log/<seq as 16 hex
 * digits>`, where every UTF-8 byte of the id outside [a-z0-9_-] is written `~xx`. (Ids longer than
 * the readable form allows are stored under a hash instead; not needed here.)
 */
export function checkpointKey(stream: string, seq: number): string {
  let id = 's.';
  for (const byte of Buffer.from(stream, 'utf8')) {
    const safe = (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte === 0x5f || byte === 0x2d;
    id += safe ? String.fromCharCode(byte) : `~${byte.toString(16).padStart(2, '0')}`;
  }
  if (id.length > 160)
    throw new Error(`checkpointKey: stream id ${JSON.stringify(stream.slice(0, 20))}... is stored under a hash`);
  return `${id}/log/${seq.toString(16).padStart(16, '0')}`;
}
