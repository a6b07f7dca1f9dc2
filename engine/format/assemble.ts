/**
 * Frame assembly: compression, layout and checksum of a frame whose header and payload are
 * already encoded. Kept apart from frame.ts (and free of the msgpack codec) so that the frame
 * worker (offload.ts) loads only this, and so a frame is the same bytes whichever thread built it.
 * The layout is documented in frame.ts.
 */
import { crc32 } from 'node:zlib';
import { NONE, WRITE_COMPRESSION } from './compression.js';

export const MAGIC = 0x444c4653; // "SFLD" read as u32 LE
export const FIXED = 20;
export const TRAILER = 4;

/** Builds a frame from its kind code, format version, encoded header and raw payload. */
export function assembleFrame(kindCode: number, version: number, head: Uint8Array, raw: Uint8Array): Uint8Array {
  const compressed = WRITE_COMPRESSION.compress(raw);
  const compression = compressed === undefined ? NONE : WRITE_COMPRESSION;
  const payload = compressed ?? raw;
  const total = FIXED + head.byteLength + payload.byteLength + TRAILER;
  // A buffer of its own (never a slice of Node's shared pool), so the frame worker can transfer it.
  const frame = Buffer.allocUnsafeSlow(total);
  frame.writeUInt32LE(MAGIC, 0);
  frame[4] = version;
  frame[5] = kindCode;
  frame[6] = compression.id;
  frame[7] = 0;
  frame.writeUInt32LE(head.byteLength, 8);
  frame.writeUInt32LE(payload.byteLength, 12);
  frame.writeUInt32LE(raw.byteLength, 16);
  frame.set(head, FIXED);
  frame.set(payload, FIXED + head.byteLength);
  frame.writeUInt32LE(crc32(frame.subarray(0, total - TRAILER)), total - TRAILER);
  return frame;
}
