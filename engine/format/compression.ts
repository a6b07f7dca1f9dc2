/**
 * Compression of frame payloads, as a table keyed by the byte stored in each frame: reading looks
 * the byte up, writing uses WRITE_COMPRESSION. Another compressor is one more row with a new byte.
 */
import lz4 from 'lz4';

/** One way a payload can be stored. */
export interface Compression {
  /** The byte stored in frames: never reuse or renumber one. */
  readonly id: number;
  readonly name: string;
  /**
   * Compresses `raw`; undefined when that would not make it smaller. The bytes returned may be a
   * scratch buffer of this thread's, valid until the next call: copy them out at once.
   */
  compress(raw: Uint8Array): Uint8Array | undefined;
  /** Restores exactly `rawLength` bytes from `stored`; throws when it cannot. */
  decompress(stored: Uint8Array, rawLength: number): Uint8Array;
  /** Why `rawLength` cannot come from `storedLength` stored bytes (bounded reads), or undefined when it can. */
  checkLengths(storedLength: number, rawLength: number): string | undefined;
}

/** Stored as is. */
export const NONE: Compression = {
  id: 0,
  name: 'none',
  compress: () => undefined,
  decompress: (stored) => stored,
  checkLengths: (storedLength, rawLength) =>
    storedLength === rawLength ? undefined : 'uncompressed frame with two different lengths',
};

/** An lz4 block; the frame stores the uncompressed length it needs. */
export const LZ4_BLOCK: Compression = {
  id: 1,
  name: 'lz4-block',
  compress(raw) {
    // Tiny payloads do not shrink; skip the attempt.
    if (raw.byteLength < 64) return undefined;
    const out = scratchFor(lz4.encodeBound(raw.byteLength));
    const n = lz4.encodeBlock(asBuffer(raw), out);
    return n > 0 && n < raw.byteLength ? out.subarray(0, n) : undefined;
  },
  decompress(stored, rawLength) {
    const out = Buffer.allocUnsafe(rawLength);
    const n = lz4.decodeBlock(asBuffer(stored), out);
    if (n !== rawLength) throw new Error(`lz4 block decoded to ${n} bytes, expected ${rawLength}`);
    return out;
  },
  checkLengths: (storedLength, rawLength) =>
    rawLength > storedLength * 255 + 64
      ? `payload claims ${rawLength} bytes, more than ${storedLength} compressed bytes can hold`
      : undefined,
};

/** Scratch buffers larger than this are not kept between calls. */
const SCRATCH_KEPT = 1 << 20;
let scratch = Buffer.alloc(0);

/**
 * A buffer of at least `size` bytes for compressed output, which the frame is copied out of at
 * once. Reusing one saves an ArrayBuffer per frame: a 20 KB state's bound is too large for Node's
 * pool, and with thousands of engines per process the allocation showed at ~6% of the main
 * thread in a profile.
 */
function scratchFor(size: number): Buffer {
  if (scratch.byteLength >= size) return scratch;
  if (size > SCRATCH_KEPT) return Buffer.allocUnsafeSlow(size);
  scratch = Buffer.allocUnsafeSlow(Math.max(size, 64 * 1024));
  return scratch;
}

/** Every compression a frame may name, by its stored byte. */
export const COMPRESSIONS: ReadonlyMap<number, Compression> = new Map([NONE, LZ4_BLOCK].map((c) => [c.id, c]));

/** What new frames are written with (falling back to NONE where it does not help). */
export const WRITE_COMPRESSION: Compression = LZ4_BLOCK;

/** A Buffer view of `bytes` (no copy). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
