/**
 * What a checkpointable value is, and the small operations the diff, the codec and the fold
 * share: classifying, comparing, copying and formatting paths.
 */
import { StatefoldError } from './errors.js';

/** Any typed array statefold stores with its type and bytes. */
export type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/** The typed-array classes in wire order: the index is the code stored in frames (never reorder). */
export const TYPED_ARRAY_CLASSES = [
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  Buffer,
] as const;

const TYPED_ARRAY_CODE = new Map<unknown, number>(TYPED_ARRAY_CLASSES.map((c, i) => [c.prototype, i]));

/** Kinds of supported values. */
export const enum Kind {
  Primitive = 0,
  Array = 1,
  Object = 2,
  Date = 3,
  Bytes = 4,
}

/** Deepest nesting accepted; deeper states are rejected (they would also overflow the decoder). */
export const MAX_DEPTH = 1000;

/**
 * Classifies a value, or returns a reason why it cannot be checkpointed. `undefined` is handled
 * by callers (dropped in objects, null in arrays, as JSON does).
 */
export function classify(v: unknown): Kind | string {
  switch (typeof v) {
    case 'string':
    case 'boolean':
    case 'number':
      return Kind.Primitive;
    case 'object': {
      if (v === null) return Kind.Primitive;
      const proto = Object.getPrototypeOf(v);
      if (proto === Object.prototype || proto === null) return Kind.Object;
      if (proto === Array.prototype) return Kind.Array;
      if (proto === Date.prototype) return Kind.Date;
      if (TYPED_ARRAY_CODE.has(proto)) return Kind.Bytes;
      const name = (v as { constructor?: { name?: unknown } }).constructor?.name;
      if (v instanceof Map) return 'a Map (not supported: use a plain object or an array of entries)';
      if (v instanceof Set) return 'a Set (not supported: use an array)';
      return `an instance of ${typeof name === 'string' && name !== '' ? name : 'a class'} (only plain objects, arrays, Date and typed arrays are supported)`;
    }
    case 'function':
      return 'a function';
    case 'symbol':
      return 'a symbol';
    case 'bigint':
      return 'a bigint (not JSON: store it as a string)';
    default:
      return `a value of type ${typeof v}`;
  }
}

/** The stored code of a typed array's class. */
export function typedArrayCode(v: TypedArray): number {
  return TYPED_ARRAY_CODE.get(Object.getPrototypeOf(v))!;
}

/** Builds a typed array of class `code` from a copy of `bytes`. */
export function typedArrayFromBytes(code: number, bytes: Uint8Array): TypedArray {
  const Class = TYPED_ARRAY_CLASSES[code];
  if (Class === undefined) throw new Error(`unknown typed array code ${code}`);
  if (Class === Buffer) return Buffer.from(bytes);
  const copy = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(copy).set(bytes);
  const C = Class as unknown as { new (b: ArrayBuffer): TypedArray; BYTES_PER_ELEMENT: number };
  if (bytes.byteLength % C.BYTES_PER_ELEMENT !== 0)
    throw new Error(`typed array of ${bytes.byteLength} bytes is not a whole number of elements`);
  return new C(copy);
}

/** The bytes of a typed array, as a view (no copy). */
export function bytesOf(v: TypedArray): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

/** True when two typed arrays have the same class and the same bytes. */
export function sameBytes(a: TypedArray, b: TypedArray): boolean {
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b) || a.byteLength !== b.byteLength) return false;
  return Buffer.compare(bytesOf(a), bytesOf(b)) === 0;
}

/** A private copy of a typed array (same class, own buffer). */
export function copyTypedArray(v: TypedArray): TypedArray {
  return typedArrayFromBytes(typedArrayCode(v), bytesOf(v));
}

/** Sets an own enumerable data property, so that a key such as `__proto__` is data, never a prototype. */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}

/** Appends a key or index to a `$`-rooted path for messages: `$.tools[3].run`, `$["a b"]`. */
export function pathJoin(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

/** Throws INVALID_STATE for the value at `path`. */
export function invalidState(path: string, what: string): never {
  throw new StatefoldError('INVALID_STATE', `${path}: ${what} cannot be checkpointed`, { path });
}

/**
 * Deep-copies a state tree (plain objects, arrays, Dates, typed arrays) into fresh mutable
 * objects: for callers that mutate in place, or that hand out a copy of a tree they go on folding.
 */
export function thaw(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (v instanceof Date) return new Date(v.getTime());
  if (ArrayBuffer.isView(v)) return copyTypedArray(v as TypedArray);
  if (Array.isArray(v)) return v.map(thaw);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(v)) setOwn(out, key, thaw((v as Record<string, unknown>)[key]));
  return out;
}
