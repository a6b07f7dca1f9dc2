/**
 * What a list item (a message) was when it was last serialized, to tell whether it can be stored
 * again without serializing it. LangGraph hands every put the whole message list, with the same
 * objects as the step before for the messages that did not change; serializing them all again (as
 * the other savers do) is most of a put. An item is taken as unchanged only when every own
 * enumerable property, at every depth, is what it was (the same primitive, or an object of the
 * same prototype and the same own enumerable properties): what LangChain's `toJSON` and JSON
 * serialization read. A value
 * that serialization reads through something else (a Date, a Map, a typed array, a class that is
 * not LangChain's Serializable, an own getter, a cycle, more than LIMIT properties) makes the
 * item one that is always serialized.
 */

/** An object as it was: its prototype, its own enumerable property names (null for an array) and their values. */
interface ObjectSnap {
  readonly proto: object | null;
  readonly keys: readonly string[] | null;
  readonly values: readonly Snap[];
}

export type Snap = string | number | boolean | null | undefined | ObjectSnap;

/** Past this many properties and array items in one item, it is not snapshotted (its serialization is as cheap). */
const LIMIT = 10_000;

/** Whether `proto` is one whose own enumerable properties are all a value's JSON is made of. */
function plainProto(proto: object | null, value: object): boolean {
  if (proto === null || proto === Object.prototype || proto === Array.prototype) return true;
  // LangChain's Serializable (messages, documents): toJSON reads own fields and getters over them.
  return 'lc_kwargs' in value && typeof (value as { toJSON?: unknown }).toJSON === 'function';
}

/** A snapshot of `value`, or undefined when it holds something a snapshot cannot vouch for. */
export function snapshotOf(value: unknown): Snap | undefined {
  let left = LIMIT;
  const seen = new Set<object>();
  const snap = (v: unknown): Snap | undefined => {
    if (v === null || v === undefined) return v;
    switch (typeof v) {
      case 'string':
      case 'number':
      case 'boolean':
        return v;
      case 'object':
        break;
      default:
        return undefined; // functions, symbols, bigints: whatever serialization makes of them
    }
    const obj = v as Record<string, unknown>;
    const proto = Object.getPrototypeOf(obj) as object | null;
    if (seen.has(obj) || !plainProto(proto, obj)) return undefined;
    const array = Array.isArray(obj);
    const keys = Object.keys(obj);
    left -= keys.length;
    if (left < 0) return undefined;
    // An own accessor is computed, not stored; an array with other own properties is not a plain list.
    if (array ? keys.length !== obj.length : keys.some((k) => Object.getOwnPropertyDescriptor(obj, k)!.get)) {
      return undefined;
    }
    seen.add(obj);
    const values: Snap[] = [];
    for (const key of keys) {
      const s = snap(obj[key]);
      if (s === undefined && obj[key] !== undefined) return undefined;
      values.push(s);
    }
    seen.delete(obj);
    return { proto, keys: array ? null : keys, values };
  };
  const result = snap(value);
  return result === undefined && value !== undefined ? undefined : result;
}

/** Whether `value` is still what `snap` recorded. */
export function unchanged(value: unknown, snap: Snap): boolean {
  if (snap === null || typeof snap !== 'object') return Object.is(value, snap);
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== snap.proto) return false;
  const { keys, values } = snap;
  if (keys === null) {
    const list = value as unknown[];
    if (!Array.isArray(list) || list.length !== values.length) return false;
    for (let i = 0; i < values.length; i++) if (!unchanged(list[i], values[i])) return false;
    return true;
  }
  const obj = value as Record<string, unknown>;
  const own = Object.keys(obj);
  if (own.length !== keys.length) return false;
  for (let i = 0; i < keys.length; i++) {
    if (own[i] !== keys[i] || !unchanged(obj[keys[i]!], values[i])) return false;
  }
  return true;
}
