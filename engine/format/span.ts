/**
 * Span deltas (format version 4). In a chain written with `policy.spanEvery` k, the delta of every
 * seq k, 2k, ... after the base also carries the operations of the deltas between it and the span
 * delta (or base) k seqs before, so a restore reads and folds the base, the span deltas, and at
 * most k - 1 plain deltas after the last of them: O(n/k + k) objects instead of n, in one round of
 * parallel reads. On a store where each read is a network round trip, that is most of a restore.
 *
 * A span delta's payload is a msgpack array of msgpack bins, one per seq from `jump` + 1 to its
 * own, each the msgpack of that seq's operation list, byte for byte as that seq's delta stores it
 * (verifyStream compares them). Read as the delta of its own seq on the previous one, only the
 * last bin applies; read as a jump from `jump`, every bin applies in order.
 */

/** The format version of a span delta. */
export const SPAN_VERSION = 4;

/** The payload of a span delta: `raws` (each the msgpack of one seq's operations) as an array of bins. */
export function encodeSpan(raws: readonly Uint8Array[]): Uint8Array {
  let size = containerHeader(raws.length);
  for (const raw of raws) size += binHeader(raw.byteLength) + raw.byteLength;
  const out = Buffer.allocUnsafe(size);
  let at = writeArrayHeader(out, 0, raws.length);
  for (const raw of raws) {
    at = writeBinHeader(out, at, raw.byteLength);
    out.set(raw, at);
    at += raw.byteLength;
  }
  return out;
}

/** The per-seq operation lists of a span payload (views into `raw`); throws when it is not one. */
export function decodeSpan(raw: Uint8Array): Uint8Array[] {
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  let at = 0;
  const uint = (bytes: 1 | 2 | 4): number => {
    if (at + bytes > buf.byteLength) throw new Error('span payload is truncated');
    const v = bytes === 1 ? buf[at]! : bytes === 2 ? buf.readUInt16BE(at) : buf.readUInt32BE(at);
    at += bytes;
    return v;
  };
  const first = uint(1);
  const count =
    first >= 0x90 && first <= 0x9f ? first & 0x0f : first === 0xdc ? uint(2) : first === 0xdd ? uint(4) : -1;
  if (count < 0) throw new Error('span payload is not an array');
  if (count === 0) throw new Error('span payload holds no operation list');
  const parts: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const tag = uint(1);
    const length = tag === 0xc4 ? uint(1) : tag === 0xc5 ? uint(2) : tag === 0xc6 ? uint(4) : -1;
    if (length < 0) throw new Error(`span payload item ${i} is not a bin`);
    if (at + length > buf.byteLength) throw new Error('span payload is truncated');
    parts.push(raw.subarray(at, at + length));
    at += length;
  }
  if (at !== buf.byteLength) throw new Error('span payload has bytes after its last item');
  return parts;
}

function containerHeader(n: number): number {
  return n < 16 ? 1 : n < 0x10000 ? 3 : 5;
}

function binHeader(n: number): number {
  return n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
}

function writeArrayHeader(out: Buffer, at: number, n: number): number {
  if (n < 16) return ((out[at] = 0x90 | n), at + 1);
  if (n < 0x10000) return ((out[at] = 0xdc), out.writeUInt16BE(n, at + 1), at + 3);
  return ((out[at] = 0xdd), out.writeUInt32BE(n, at + 1), at + 5);
}

function writeBinHeader(out: Buffer, at: number, n: number): number {
  if (n < 0x100) return ((out[at] = 0xc4), (out[at + 1] = n), at + 2);
  if (n < 0x10000) return ((out[at] = 0xc5), out.writeUInt16BE(n, at + 1), at + 3);
  return ((out[at] = 0xc6), out.writeUInt32BE(n, at + 1), at + 5);
}
