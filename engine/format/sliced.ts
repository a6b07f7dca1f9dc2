/**
 * Encoding in slices: the msgpack of a large value, built piece by piece with a turn of the event
 * loop between pieces whenever a slice has run for SLICE_MS, so that encoding a big base never
 * blocks the caller's loop for long. msgpack containers are a header and their items one after the
 * other, so a large array or object is written as its header and then runs of items, each run
 * encoded by encodeValue as a container of its own whose header is dropped. The result is the
 * same bytes encodeValue gives for the whole value.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { encodeValue, type LeafResolver } from './values.js';

/** Longest a slice of encoding runs before it yields to the event loop, in milliseconds. */
export const SLICE_MS = 0.5;
/** About how many bytes one piece encodes: items are grouped into runs of this size. */
const RUN_BYTES = 16 * 1024;
/**
 * Values smaller than this are encoded in one piece, which takes well under a slice: deltas and
 * small bases skip the walks that plan the pieces (with many engines per process, those walks
 * cost more than the encoding).
 */
const WHOLE_BYTES = 64 * 1024;

/** Encodes `value` as encodeValue does, yielding to the event loop between slices. */
export async function encodeValueInSlices(value: unknown, resolve?: LeafResolver): Promise<Uint8Array> {
  if (sizeUpTo(value, WHOLE_BYTES) < WHOLE_BYTES) return encodeValue(value, resolve);
  const pieces: Uint8Array[] = [];
  let start = performance.now();
  const slice = async (): Promise<void> => {
    if (performance.now() - start < SLICE_MS) return;
    await nextTurn();
    start = performance.now();
  };
  const encodeRun = async (run: unknown, count: number): Promise<void> => {
    const bytes = encodeValue(run, resolve);
    pieces.push(bytes.subarray(headerLength(bytes, count)));
    await slice();
  };

  const node = async (v: unknown): Promise<void> => {
    if (!splittable(v) || sizeUpTo(v, RUN_BYTES) < RUN_BYTES) {
      pieces.push(encodeValue(v, resolve));
      return slice();
    }
    if (Array.isArray(v)) {
      pieces.push(containerHeader(ARRAY, v.length));
      let from = 0;
      let bytes = 0;
      for (let i = 0; i < v.length; i++) {
        const size = sizeUpTo(v[i], RUN_BYTES);
        if (size < RUN_BYTES && (bytes += size) < RUN_BYTES) continue;
        const big = size >= RUN_BYTES;
        const to = big ? i : i + 1;
        if (to > from) await encodeRun(v.slice(from, to), to - from);
        if (big) await node(v[i] === undefined ? null : v[i]);
        from = i + 1;
        bytes = 0;
      }
      if (v.length > from) await encodeRun(v.slice(from), v.length - from);
      return;
    }
    const obj = v as Record<string, unknown>;
    const keys = Object.keys(obj).filter((k) => obj[k] !== undefined);
    pieces.push(containerHeader(MAP, keys.length));
    let run: Record<string, unknown> = {};
    let count = 0;
    let bytes = 0;
    for (const key of keys) {
      const item = obj[key];
      const size = sizeUpTo(item, RUN_BYTES);
      if (size < RUN_BYTES) {
        Object.defineProperty(run, key, { value: item, enumerable: true, writable: true, configurable: true });
        count++;
        if ((bytes += size + key.length) < RUN_BYTES) continue;
      }
      if (count > 0) await encodeRun(run, count);
      run = {};
      count = 0;
      bytes = 0;
      if (size >= RUN_BYTES) {
        pieces.push(encodeValue(key));
        await node(item);
      }
    }
    if (count > 0) await encodeRun(run, count);
  };

  await node(value);
  return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
}

/** Plain arrays and objects that encode as msgpack containers (not Dates, typed arrays, or objects with keys msgpack cannot carry as is). */
function splittable(v: unknown): boolean {
  if (typeof v !== 'object' || v === null || v instanceof Date || ArrayBuffer.isView(v)) return false;
  if (Array.isArray(v)) return true;
  for (const key of Object.keys(v)) if (key === '__proto__' || !key.isWellFormed()) return false;
  return true;
}

/** Rough encoded size of `v`, counted only up to `cap` (a walk that stops early). */
export function sizeUpTo(v: unknown, cap: number): number {
  switch (typeof v) {
    case 'string':
      return v.length + 5;
    case 'object': {
      if (v === null) return 1;
      if (ArrayBuffer.isView(v)) return v.byteLength + 8;
      if (v instanceof Date) return 12;
      let n = 5;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length && n < cap; i++) n += sizeUpTo(v[i], cap - n);
        return n;
      }
      for (const key in v) {
        if (n >= cap) break;
        if (Object.prototype.hasOwnProperty.call(v, key))
          n += key.length + 2 + sizeUpTo((v as Record<string, unknown>)[key], cap - n);
      }
      return n;
    }
    default:
      return 9;
  }
}

const ARRAY = { fix: 0x90, b16: 0xdc, b32: 0xdd };
const MAP = { fix: 0x80, b16: 0xde, b32: 0xdf };

/** The msgpack header of an array or map of `count` items. */
function containerHeader(type: typeof ARRAY, count: number): Uint8Array {
  if (count < 16) return Uint8Array.of(type.fix | count);
  if (count < 0x10000) return Uint8Array.of(type.b16, count >> 8, count & 0xff);
  const out = Buffer.allocUnsafe(5);
  out[0] = type.b32;
  out.writeUInt32BE(count, 1);
  return out;
}

/** Length of the container header of `bytes`, an encoded array or map of `count` items. */
function headerLength(bytes: Uint8Array, count: number): number {
  const b = bytes[0]!;
  const length = (b & 0xe0) === 0x80 ? 1 : b === 0xdc || b === 0xde ? 3 : b === 0xdd || b === 0xdf ? 5 : 0;
  if (length === 0 || length !== containerHeader(b >= 0xde || (b & 0xf0) === 0x80 ? MAP : ARRAY, count).byteLength)
    throw new Error(`encodeValueInSlices: a run of ${count} items encoded with header byte ${b}`);
  return length;
}
