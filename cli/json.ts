/**
 * Lossless JSON for states printed by the CLI. JSON has no form for Date, typed arrays, NaN,
 * Infinity, -0, or strings with lone surrogates; each becomes an object with the one key `$sf`
 * naming its type and `v` its value (`{"$sf":"Date","v":"2026-12-04T06:00:00.000Z"}`,
 * `{"$sf":"Float32Array","v":"<base64 of its bytes, little-endian>"}` (a Buffer is `"Buffer"`), `{"$sf":"-0"}`,
 * `{"$sf":"NaN"}`, `{"$sf":"Infinity"}`, `{"$sf":"-Infinity"}`). An object of the caller's that
 * happens to have a `$sf` key is wrapped as `{"$sf":"Object","v":{...}}`, so `fromJson` undoes
 * exactly what `toJson` did.
 */

/** What every typed-array class extends (%TypedArray%.prototype); Buffer extends Uint8Array instead. */
const TYPED_ARRAY_PROTOTYPE: unknown = Object.getPrototypeOf(Int8Array.prototype);

/**
 * The typed-array class named `name` (the constructor name `toJson` writes), or undefined: taken
 * from the language's own classes rather than a list of ours, so that every typed array a state
 * can hold reads back, and a tag naming anything else is no constructor at all.
 */
function typedArrayClass(name: string): (new (buffer: ArrayBuffer) => ArrayBufferView) | undefined {
  const c: unknown = Object.hasOwn(globalThis, name) ? (globalThis as Record<string, unknown>)[name] : undefined;
  if (typeof c !== 'function' || Object.getPrototypeOf(c.prototype) !== TYPED_ARRAY_PROTOTYPE) return undefined;
  return c as new (buffer: ArrayBuffer) => ArrayBufferView;
}

/** `value` with everything JSON cannot hold tagged (see the module comment). */
export function toJson(value: unknown): unknown {
  if (typeof value === 'number') {
    if (Object.is(value, -0)) return { $sf: '-0' };
    if (!Number.isFinite(value)) return { $sf: String(value) };
    return value;
  }
  if (typeof value === 'string') return value.isWellFormed() ? value : { $sf: 'UTF16', v: utf16(value) };
  if (typeof value !== 'object' || value === null) return value;
  if (value instanceof Date) {
    const t = value.getTime();
    return { $sf: 'Date', v: Number.isNaN(t) ? null : value.toISOString() };
  }
  if (ArrayBuffer.isView(value)) {
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    return { $sf: value.constructor.name, v: bytes.toString('base64') };
  }
  if (Array.isArray(value)) return value.map((item) => toJson(item === undefined ? null : item));
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    if (item !== undefined) Object.defineProperty(out, key, { value: toJson(item), enumerable: true, writable: true });
  }
  return Object.hasOwn(out, '$sf') ? { $sf: 'Object', v: out } : out;
}

/** Undoes `toJson`. */
export function fromJson(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(fromJson);
  const obj = value as Record<string, unknown>;
  if (typeof obj.$sf === 'string') {
    const tag = obj.$sf;
    if (tag === '-0') return -0;
    if (tag === 'NaN' || tag === 'Infinity' || tag === '-Infinity') return Number(tag);
    if (tag === 'Date') return new Date(obj.v === null ? NaN : (obj.v as string));
    if (tag === 'UTF16') return Buffer.from(obj.v as string, 'base64').toString('utf16le');
    if (tag === 'Object') return plain(obj.v as Record<string, unknown>);
    if (tag === 'Buffer') return Buffer.from(obj.v as string, 'base64');
    const Typed = typedArrayClass(tag);
    if (Typed !== undefined) {
      const bytes = Buffer.from(obj.v as string, 'base64');
      return new Typed(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
    }
  }
  return plain(obj);
}

function plain(obj: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(obj))
    Object.defineProperty(out, key, {
      value: fromJson(obj[key]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return out;
}

function utf16(s: string): string {
  return Buffer.from(s, 'utf16le').toString('base64');
}
