/**
 * What a list item (a message) was when it was last serialized, to tell whether it can be stored
 * again without serializing it. LangGraph hands every put the whole message list, with the same
 * objects as the step before for the messages that did not change; serializing them all again (as
 * the other savers do) is most of a put. An item is taken as unchanged only when every own
 * property, at every depth, is what it was (the same primitive, or an object of the same prototype
 * and the same own properties): what LangChain's `toJSON` and JSON serialization read. A value
 * that serialization reads through something else (a Date, a Map, a typed array, a class that is
 * not LangChain's Serializable, a cycle, more than LIMIT properties) makes the item one that is
 * always serialized.
 */

/** An object as it was: its prototype, and its own property names and values. */
interface ObjectSnap {
  readonly proto: object | null;
  readonly keys: readonly string[];
  readonly values: readonly Snap[];
}

export type Snap = string | number | boolean | null | undefined | ObjectSnap;

/** Past this many properties and array items in one item, it is not snapshotted (its serialization is as cheap). */
const LIMIT = 10_000;

/** Whether `proto` is one whose own properties are all a value's JSON is made of. */
function plainProto(proto: object | null, value: object): boolean {
  if (proto === null || proto === Object.prototype || proto === Array.prototype) return true;
  // LangChain's Serializable (messages, documents): toJSON reads own fields and getters over them.
  return 'lc_kwargs' in value && typeof (value as { toJSON?: unknown }).toJSON === 'function';
}

/** A snapshot of `value`, or undefined when it holds something a snapshot cannot vouch for. */
export function snapshotOf(value: unknown): Snap | undefined {
  const budget = { left: LIMIT };
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
    const obj = v as object;
    const proto = Object.getPrototypeOf(obj) as object | null;
    if (seen.has(obj) || !plainProto(proto, obj)) return undefined;
    const keys = Object.getOwnPropertyNames(obj);
    budget.left -= keys.length;
    if (budget.left < 0) return undefined;
    seen.add(obj);
    const values: Snap[] = [];
    for (const key of keys) {
      const d = Object.getOwnPropertyDescriptor(obj, key)!;
      if (d.get !== undefined || d.set !== undefined) return undefined; // an own accessor: computed, not stored
      const s = snap(d.value);
      if (s === undefined && d.value !== undefined) return undefined;
      values.push(s);
    }
    seen.delete(obj);
    return { proto, keys, values };
  };
  const result = snap(value);
  return result === undefined && value !== undefined ? undefined : result;
}

/** Whether `value` is still what `snap` recorded. */
export function unchanged(value: unknown, snap: Snap): boolean {
  if (snap === null || typeof snap !== 'object') return Object.is(value, snap);
  if (value === null || typeof value !== 'object') return false;
  if (Object.getPrototypeOf(value) !== snap.proto) return false;
  const keys = Object.getOwnPropertyNames(value);
  if (keys.length !== snap.keys.length) return false;
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] !== snap.keys[i]) return false;
    const d = Object.getOwnPropertyDescriptor(value, keys[i]!)!;
    if (d.get !== undefined || d.set !== undefined || !unchanged(d.value, snap.values[i])) return false;
  }
  return true;
}
