/**
 * The value codec: state values to msgpack bytes and back, keeping what msgpack alone loses: -0,
 * Date, every typed array with its class, keys such as `__proto__` (which msgpackr renames on
 * decode for safety), and strings with lone surrogates (msgpack strings are UTF-8, which has no
 * form for them: each would come back as U+FFFD). Those values travel as one private msgpack
 * extension, `Tagged`.
 */
import { Packr, Unpackr, addExtension } from 'msgpackr';
import { Kind, bytesOf, classify, setOwn, typedArrayCode, typedArrayFromBytes, type TypedArray } from '../value.js';

/** msgpack extension type of statefold's tagged values (stored in frames: never change). */
const EXT_TYPE = 0x46;
const TAG_NEG_ZERO = 0;
const TAG_DATE = 1;
const TAG_BYTES = 2;
const TAG_ENTRIES = 3;
/** A string that is not well-formed UTF-16 (a lone surrogate), as its UTF-16LE code units. */
const TAG_UTF16 = 4;

/** A value msgpack cannot carry by itself, with its tag and plain data. */
class Tagged {
  constructor(
    readonly tag: number,
    readonly data: unknown,
  ) {}
}

addExtension({
  Class: Tagged,
  type: EXT_TYPE,
  write: (t: Tagged) => [t.tag, t.data],
  read: (raw: unknown) => fromTagged(raw),
});

function fromTagged(raw: unknown): unknown {
  if (!Array.isArray(raw)) throw new Error('tagged value is not an array');
  const [tag, data] = raw as [number, unknown];
  switch (tag) {
    case TAG_NEG_ZERO:
      return -0;
    case TAG_DATE:
      return new Date(data as number);
    case TAG_BYTES: {
      const [code, bytes] = data as [number, Uint8Array];
      return typedArrayFromBytes(code, bytes);
    }
    case TAG_UTF16: {
      if (!(data instanceof Uint8Array) || data.byteLength % 2 !== 0)
        throw new Error('tagged UTF-16 string is not an even number of bytes');
      return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf16le');
    }
    case TAG_ENTRIES: {
      const obj: Record<string, unknown> = {};
      for (const [k, v] of data as [string, unknown][]) setOwn(obj, k, v);
      return obj;
    }
    default:
      throw new Error(`unknown tagged value ${tag}`);
  }
}

const packr = new Packr({ useRecords: false, useFloat32: 0, variableMapSize: true });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });

/**
 * How a typed array or Date inside a value is read when it is encoded: the engine passes the
 * copy it took when the checkpoint was captured, in case the caller changed the original since.
 */
export type LeafResolver = (leaf: TypedArray | Date) => TypedArray | Date;

/** Encodes a validated value to msgpack bytes. */
export function encodeValue(value: unknown, resolve?: LeafResolver): Uint8Array {
  return packr.pack(toWire(value, resolve));
}

/** Decodes msgpack bytes made by encodeValue. */
export function decodeValue(bytes: Uint8Array): unknown {
  return unpackr.unpack(bytes);
}

/**
 * Replaces, in a copy made only along the paths that need it, every value msgpack would lose by
 * a Tagged one. Returns `value` itself when nothing inside needs replacing.
 */
export function toWire(value: unknown, resolve?: LeafResolver): unknown {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'string') return value.isWellFormed() ? value : utf16(value);
    return typeof value === 'number' && value === 0 && 1 / value < 0 ? new Tagged(TAG_NEG_ZERO, null) : value;
  }
  const kind = classify(value);
  if (kind === Kind.Array) {
    const arr = value as unknown[];
    let out: unknown[] | undefined;
    for (let i = 0; i < arr.length; i++) {
      const item = arr[i];
      const wire = item === undefined ? null : toWire(item, resolve);
      if (wire !== item && out === undefined) out = arr.slice(0, i);
      if (out !== undefined) out.push(wire);
    }
    return out ?? arr;
  }
  if (kind === Kind.Object) {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj);
    let out: Record<string, unknown> | undefined;
    let entries = false;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const item = obj[key];
      const wire = toWire(item, resolve);
      if (key === '__proto__' || !key.isWellFormed()) entries = true;
      if ((wire !== item || item === undefined) && out === undefined) {
        out = {};
        for (let j = 0; j < i; j++) setOwn(out, keys[j]!, obj[keys[j]!]);
      }
      if (out !== undefined && item !== undefined) setOwn(out, key, wire);
    }
    const result = out ?? obj;
    if (!entries) return result;
    return new Tagged(
      TAG_ENTRIES,
      Object.keys(result).map((k) => [k.isWellFormed() ? k : utf16(k), result[k]]),
    );
  }
  if (kind === Kind.Date) {
    const date = (resolve ? resolve(value as Date) : value) as Date;
    return new Tagged(TAG_DATE, date.getTime());
  }
  if (kind === Kind.Bytes) {
    const arr = (resolve ? resolve(value as TypedArray) : value) as TypedArray;
    return new Tagged(TAG_BYTES, [typedArrayCode(arr), bytesOf(arr)]);
  }
  // Validated values never get here; an unvalidated one is a bug, not user input.
  throw new TypeError(`toWire: unsupported value ${String(kind)}`);
}

/** A string with a lone surrogate, tagged with its UTF-16 code units (which Buffer keeps as they are). */
function utf16(s: string): Tagged {
  return new Tagged(TAG_UTF16, Buffer.from(s, 'utf16le'));
}
