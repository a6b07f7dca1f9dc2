/**
 * Frame assembly: compression, sealing, layout and checksum of a frame whose header and payload
 * are already encoded. Kept apart from frame.ts (and free of the msgpack codec) so that the frame
 * worker (offload.ts) loads only this, and so a frame is built the same way whichever thread built
 * it. The layout is documented in frame.ts.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { NONE, WRITE_COMPRESSION } from './compression.js';

export const MAGIC = 0x444c4653; // "SFLD" read as u32 LE
export const FIXED = 20;
export const TRAILER = 4;
/** Flags byte: the body is sealed (AES-256-GCM); only in format versions 3 and 4. */
export const FLAG_SEALED = 1;
/** Flags byte, with FLAG_SEALED: the ciphertext starts with a secret header (meta, ledger) and its length. */
export const FLAG_SECRET = 2;
/**
 * A sealed body: nonce, then the ciphertext of [the secret header's length and the secret header,
 * when FLAG_SECRET] and the payload, then the tag.
 */
export const NONCE_BYTES = 12;
export const TAG_BYTES = 16;
const SECRET_LENGTH_BYTES = 4;
/** Bytes a sealed body adds to the payload at least (no secret header). */
export const SEAL_OVERHEAD = NONCE_BYTES + TAG_BYTES;

/** What a sealed frame is sealed with: the key, and the header fields that are secret (msgpack, maybe empty). */
export interface Seal {
  key: Uint8Array;
  secret: Uint8Array;
}

/**
 * Builds a frame from its kind code, format version, encoded header and raw payload; sealed with
 * `seal.key` when given (the header then holds only what readers need without the key, and
 * `seal.secret` the rest). `transferable`: the frame gets an ArrayBuffer of its own, which a
 * worker can transfer; otherwise a small frame is a slice of Node's buffer pool, one allocation
 * fewer per checkpoint (with thousands of engines per process, those allocations add up).
 */
export function assembleFrame(
  kindCode: number,
  version: number,
  head: Uint8Array,
  raw: Uint8Array,
  seal?: Seal,
  transferable = false,
): Uint8Array {
  const compressed = WRITE_COMPRESSION.compress(raw);
  const compression = compressed === undefined ? NONE : WRITE_COMPRESSION;
  const payload = compressed ?? raw;
  const secret = seal !== undefined && seal.secret.byteLength > 0;
  const body =
    seal === undefined
      ? payload.byteLength
      : SEAL_OVERHEAD + (secret ? SECRET_LENGTH_BYTES + seal.secret.byteLength : 0) + payload.byteLength;
  const total = FIXED + head.byteLength + body + TRAILER;
  const frame = transferable ? Buffer.allocUnsafeSlow(total) : Buffer.allocUnsafe(total);
  frame.writeUInt32LE(MAGIC, 0);
  frame[4] = version;
  frame[5] = kindCode;
  frame[6] = compression.id;
  frame[7] = seal === undefined ? 0 : secret ? FLAG_SEALED | FLAG_SECRET : FLAG_SEALED;
  frame.writeUInt32LE(head.byteLength, 8);
  frame.writeUInt32LE(body, 12);
  frame.writeUInt32LE(raw.byteLength, 16);
  frame.set(head, FIXED);
  const at = FIXED + head.byteLength;
  if (seal === undefined) frame.set(payload, at);
  else sealBody(frame, at, seal, payload);
  frame.writeUInt32LE(crc32(frame.subarray(0, total - TRAILER)), total - TRAILER);
  return frame;
}

/** Writes the sealed body at `at`; the associated data is every byte of the frame before it. */
function sealBody(frame: Buffer, at: number, seal: Seal, payload: Uint8Array): void {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', seal.key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(frame.subarray(0, at));
  const parts = [payload];
  if (seal.secret.byteLength > 0) {
    const length = Buffer.allocUnsafe(SECRET_LENGTH_BYTES);
    length.writeUInt32LE(seal.secret.byteLength, 0);
    parts.unshift(length, seal.secret);
  }
  let pos = at;
  frame.set(nonce, pos);
  pos += NONCE_BYTES;
  for (const part of parts) {
    const out = cipher.update(part);
    frame.set(out, pos);
    pos += out.byteLength;
  }
  const last = cipher.final();
  frame.set(last, pos);
  pos += last.byteLength;
  frame.set(cipher.getAuthTag(), pos);
}

/**
 * Opens the sealed body of a frame (`aad`: its bytes before the body; `secret`: whether it holds a
 * secret header): the secret header (empty when none) and the stored payload. Throws when
 * authentication fails (wrong key, or any byte of the frame altered).
 */
export function openBody(
  body: Uint8Array,
  aad: Uint8Array,
  key: Uint8Array,
  secret: boolean,
): { secret: Uint8Array; payload: Uint8Array } {
  if (body.byteLength < SEAL_OVERHEAD) throw new Error(`sealed body of ${body.byteLength} bytes is too short`);
  const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, NONCE_BYTES), {
    authTagLength: TAG_BYTES,
  });
  decipher.setAAD(aad);
  decipher.setAuthTag(body.subarray(body.byteLength - TAG_BYTES));
  const plain = Buffer.concat([
    decipher.update(body.subarray(NONCE_BYTES, body.byteLength - TAG_BYTES)),
    decipher.final(),
  ]);
  if (!secret) return { secret: new Uint8Array(0), payload: plain };
  if (plain.byteLength < SECRET_LENGTH_BYTES) throw new Error('sealed body too short for its secret header');
  const secretLength = plain.readUInt32LE(0);
  if (SECRET_LENGTH_BYTES + secretLength > plain.byteLength) throw new Error('sealed secret header overruns the body');
  return {
    secret: plain.subarray(SECRET_LENGTH_BYTES, SECRET_LENGTH_BYTES + secretLength),
    payload: plain.subarray(SECRET_LENGTH_BYTES + secretLength),
  };
}
