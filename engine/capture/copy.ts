/**
 * Copy mode (`updates: 'copy'`, the default): the engine keeps a private, frozen copy of the
 * state, and every capture walks the caller's whole state against it, so callers may mutate
 * their state in place freely. Unchanged nodes of the copy are shared from one capture to the next.
 */
import { OP_ADD, OP_APPEND, OP_REMOVE, OP_REPLACE } from '../format/ops.js';
import type { LeafResolver } from '../format/values.js';
import {
  Kind,
  MAX_DEPTH,
  classify,
  copyTypedArray,
  invalidState,
  sameBytes,
  setOwn,
  type TypedArray,
} from '../value.js';
import { Capturer, type UpdateMode } from './capturer.js';
import { deepEqual, emitEdits, sameIdentity, type ElementDiff } from './arrays.js';
import { Walk, appended, checkPrimitive, kindOfTree } from './walk.js';

/** Captures by diffing the caller's state against a private frozen copy of the last capture. */
export class CopyCapturer extends Capturer {
  readonly mode: UpdateMode = 'copy';

  protected first(state: unknown, walk: Walk): unknown {
    const copy = cloneInto(state, walk);
    walk.emit(OP_REPLACE, undefined, copy);
    return copy;
  }

  protected diff(prev: unknown, next: unknown, walk: Walk): unknown {
    return diffCopy(prev, next, walk);
  }

  /** A restored state is fresh from decoding and held by no one else: it becomes the private copy as it is, frozen. */
  protected adoptRestored(state: unknown): unknown {
    return freezeRestored(state, 0);
  }

  resolverFor(): LeafResolver | undefined {
    return undefined;
  }
}

/** Freezes a freshly decoded state in place, normalised as cloneInto would copy it (undefined dropped, or null in arrays). */
function freezeRestored(v: unknown, depth: number): unknown {
  if (typeof v !== 'object' || v === null || v instanceof Date || ArrayBuffer.isView(v)) return v;
  if (depth >= MAX_DEPTH) invalidState('$', `nesting deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      if (v[i] === undefined) v[i] = null;
      else freezeRestored(v[i], depth + 1);
    }
  } else {
    const obj = v as Record<string, unknown>;
    for (const key of Object.keys(obj)) {
      if (obj[key] === undefined) delete obj[key];
      else freezeRestored(obj[key], depth + 1);
    }
  }
  return Object.freeze(v);
}

/** Copies a value into a private frozen tree, validating it on the way (copy mode). */
export function cloneInto(v: unknown, walk: Walk): unknown {
  if (typeof v !== 'object' || v === null) {
    checkPrimitive(v, walk);
    return v;
  }
  const kind = classify(v);
  if (typeof kind === 'string') invalidState(walk.path(), kind);
  if (kind === Kind.Date) return new Date((v as Date).getTime());
  if (kind === Kind.Bytes) return copyTypedArray(v as TypedArray);
  walk.enter(v);
  let out: unknown;
  if (kind === Kind.Array) {
    const arr = v as unknown[];
    const copy = new Array<unknown>(arr.length);
    for (let i = 0; i < arr.length; i++) {
      walk.keys.push(i);
      const item = arr[i];
      copy[i] = item === undefined ? null : cloneInto(item, walk);
      walk.keys.pop();
    }
    out = Object.freeze(copy);
  } else {
    const obj = v as Record<string, unknown>;
    const copy: Record<string, unknown> = {};
    for (const key of Object.keys(obj)) {
      // The key first: a getter that throws is reported at its own path.
      walk.keys.push(key);
      const item = obj[key];
      if (item !== undefined) setOwn(copy, key, cloneInto(item, walk));
      walk.keys.pop();
    }
    out = Object.freeze(copy);
  }
  walk.leave();
  return out;
}

/**
 * Copy mode: diffs the caller's `next` against the private tree `prev`, emitting operations,
 * and returns the new private tree (sharing every unchanged node with `prev`).
 */
function diffCopy(prev: unknown, next: unknown, walk: Walk): unknown {
  if (typeof next !== 'object' || next === null) {
    checkPrimitive(next, walk);
    if (Object.is(prev, next)) return prev;
    if (appended(prev, next)) walk.emit(OP_APPEND, undefined, next.slice((prev as string).length));
    else walk.emit(OP_REPLACE, undefined, next);
    return next;
  }
  const kind = classify(next);
  if (typeof kind === 'string') invalidState(walk.path(), kind);
  if (kind !== kindOfTree(prev)) {
    const copy = cloneInto(next, walk);
    walk.emit(OP_REPLACE, undefined, copy);
    return copy;
  }
  if (kind === Kind.Date) {
    if (Object.is((prev as Date).getTime(), (next as Date).getTime())) return prev;
    const copy = new Date((next as Date).getTime());
    walk.emit(OP_REPLACE, undefined, copy);
    return copy;
  }
  if (kind === Kind.Bytes) {
    if (sameBytes(prev as TypedArray, next as TypedArray)) return prev;
    const copy = copyTypedArray(next as TypedArray);
    walk.emit(OP_REPLACE, undefined, copy);
    return copy;
  }
  walk.enter(next);
  const result =
    kind === Kind.Array
      ? diffCopyArray(prev as unknown[], next as unknown[], walk)
      : diffCopyObject(prev as Record<string, unknown>, next as Record<string, unknown>, walk);
  walk.leave();
  return result;
}

function diffCopyObject(prev: Record<string, unknown>, next: Record<string, unknown>, walk: Walk): unknown {
  let removed: string[] | undefined;
  for (const key of Object.keys(prev)) {
    if (next[key] === undefined || !Object.prototype.hasOwnProperty.call(next, key)) {
      walk.emit(OP_REMOVE, key);
      (removed ??= []).push(key);
    }
  }
  let changed: [string, unknown][] | undefined;
  for (const key of Object.keys(next)) {
    walk.keys.push(key);
    const item = next[key];
    if (item === undefined) {
      walk.keys.pop();
      continue;
    }
    if (Object.prototype.hasOwnProperty.call(prev, key)) {
      const before = prev[key];
      const after = diffCopy(before, item, walk);
      if (!Object.is(after, before)) (changed ??= []).push([key, after]);
      walk.keys.pop();
    } else {
      const copy = cloneInto(item, walk);
      walk.keys.pop();
      walk.emit(OP_ADD, key, copy);
      (changed ??= []).push([key, copy]);
    }
  }
  if (removed === undefined && changed === undefined) return prev;
  const out: Record<string, unknown> = {};
  const gone = removed === undefined ? undefined : new Set(removed);
  for (const key of Object.keys(prev)) if (gone === undefined || !gone.has(key)) setOwn(out, key, prev[key]);
  if (changed !== undefined) for (const [key, value] of changed) setOwn(out, key, value);
  return Object.freeze(out);
}

function diffCopyArray(prev: readonly unknown[], next: unknown[], walk: Walk): unknown {
  const item = (i: number): unknown => (next[i] === undefined ? null : next[i]);
  // The common prefix and suffix: elements equal to the captured ones, found read-only (a diff of
  // each would cost a walk per array level on the changed path, and nested arrays multiply it).
  const common = Math.min(prev.length, next.length);
  let lo = 0;
  while (lo < common && deepEqual(prev[lo], item(lo))) lo++;
  let suffix = 0;
  while (suffix < common - lo && deepEqual(prev[prev.length - 1 - suffix], item(next.length - 1 - suffix))) suffix++;
  if (lo === prev.length && lo === next.length) return prev;
  // Matching in the middle by value is bounded: past a budget of nodes compared, by position.
  const budget = { left: COMPARE_BUDGET };
  const same = (a: unknown, b: unknown): boolean =>
    sameIdentity(a, b) || deepEqual(a, b === undefined ? null : b, budget);
  const out: unknown[] = prev.slice(0, lo);
  const diff: ElementDiff = {
    // Most kept pairs are unchanged: an equality walk (no paths, no copies) settles those, and
    // only a changed pair is walked again to emit its operations.
    keep: (from, to) => {
      const before = prev[from];
      const after = item(to);
      out.push(deepEqual(before, after) ? before : diffCopy(before, after, walk));
    },
    insert: (to) => {
      const copy = cloneInto(item(to), walk);
      out.push(copy);
      return copy;
    },
  };
  emitEdits(walk, prev, next, lo, prev.length - suffix, next.length - suffix, same, diff, () => budget.left <= 0);
  for (let k = prev.length - suffix; k < prev.length; k++) out.push(prev[k]);
  return Object.freeze(out);
}

/** Nodes that matching by value may compare in one array's middle before it gives up and compares by position. */
const COMPARE_BUDGET = 200_000;
