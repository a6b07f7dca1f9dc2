/**
 * Immutable mode (`updates: 'immutable'`): the caller updates its state by replacing objects,
 * never mutating them (structural sharing, as with Immer or Redux). The capturer freezes what it
 * captures and skips every subtree whose reference is unchanged, so a capture costs what changed,
 * not what exists. Dates and typed arrays cannot be frozen: it keeps a copy of each and compares
 * contents, so an in-place change is still seen, and encoders read the copy taken at their capture.
 */
import { OP_ADD, OP_APPEND, OP_REMOVE, OP_REPLACE } from '../format/ops.js';
import type { LeafResolver } from '../format/values.js';
import { Kind, classify, copyTypedArray, invalidState, pathJoin, sameBytes, type TypedArray } from '../value.js';
import { Capturer, type UpdateMode } from './capturer.js';
import { emitEdits, sameIdentity, type ElementDiff } from './arrays.js';
import { Walk, appended, checkPrimitive, kindOfTree } from './walk.js';

type Leaf = Date | TypedArray;

/** A copy of a Date or typed array as it was at some capture, newest first. */
interface LeafVersion {
  copy: Leaf;
  since: number;
  older: LeafVersion | undefined;
}

/** Captures by reference comparison against the last captured (frozen) state. */
export class ImmutableCapturer extends Capturer {
  readonly mode: UpdateMode = 'immutable';
  // Bookkeeping keyed by the caller's (frozen) objects.
  readonly #adopted = new WeakSet<object>();
  readonly #leafy = new WeakSet<object>();
  readonly #leaves = new WeakMap<object, LeafVersion>();

  protected first(state: unknown, walk: Walk, id: number, commit: boolean): unknown {
    // Validate (and so adopt) before emitting anything, so a rejected state changes nothing.
    const leafCopies: LeafCopy[] = [];
    this.#adopt(state, walk, id, leafCopies);
    walk.emit(OP_REPLACE, undefined, state);
    if (commit) this.#commit(walk, leafCopies, id);
    return state;
  }

  protected diff(prev: unknown, next: unknown, walk: Walk, id: number, commit: boolean): unknown {
    const leafCopies: LeafCopy[] = [];
    this.#diffImmutable(prev, next, walk, id, leafCopies);
    if (commit) this.#commit(walk, leafCopies, id);
    return next;
  }

  protected adoptRestored(state: unknown): unknown {
    const walk = new Walk('$', false);
    this.#adopt(state, walk, 0);
    this.#commitAdoption(walk);
    return state;
  }

  /** A resolver that reads leaves as they were at capture `id`. */
  resolverFor(id: number): LeafResolver {
    return (leaf) => {
      let v = this.#leaves.get(leaf);
      while (v !== undefined && v.since > id) v = v.older;
      return v?.copy ?? leaf;
    };
  }

  /** All of the capture was valid: only now record leaf copies and freeze what was adopted (a rejected state is left as it was). */
  #commit(walk: Walk, leafCopies: LeafCopy[], id: number): void {
    for (const u of leafCopies) this.#pushVersion(u.leaf, u.copy, id);
    this.#commitAdoption(walk);
  }

  #pushVersion(leaf: Leaf, copy: Leaf, id: number): void {
    const current = this.#leaves.get(leaf);
    // Older versions matter only to captures not yet encoded.
    const keep = current !== undefined && this.oldestUnencoded < id ? current : undefined;
    this.#leaves.set(leaf, { copy, since: id, older: keep });
  }

  #commitAdoption(walk: Walk): void {
    for (const node of walk.adopted) {
      Object.freeze(node);
      this.#adopted.add(node);
    }
    for (const node of walk.leafy) this.#leafy.add(node);
  }

  #isAdopted(v: object, walk: Walk): boolean {
    return this.#adopted.has(v) || walk.adopted.has(v);
  }

  #isLeafy(v: object, walk: Walk): boolean {
    return this.#leafy.has(v) || walk.leafy.has(v);
  }

  /** Validates and registers a new value (immutable mode); it is frozen when the capture succeeds. Returns whether it holds leaves. */
  #adopt(v: unknown, walk: Walk, id: number, leafCopies?: LeafCopy[]): boolean {
    if (typeof v !== 'object' || v === null) {
      checkPrimitive(v, walk);
      return false;
    }
    if (this.#isAdopted(v, walk)) {
      if (!this.#isLeafy(v, walk)) return false;
      // Adopted before: its leaves may have been changed in place since; check them.
      this.#checkLeaves(v, walk, id, leafCopies, false);
      return true;
    }
    const kind = classify(v);
    if (typeof kind === 'string') invalidState(walk.path(), kind);
    if (kind === Kind.Date || kind === Kind.Bytes) {
      const leaf = v as Leaf;
      const current = this.#leaves.get(leaf);
      if (current === undefined || !sameLeaf(current.copy, leaf)) {
        const copy = copyLeaf(leaf);
        if (leafCopies) leafCopies.push({ leaf, copy });
        else this.#leaves.set(leaf, { copy, since: id, older: undefined });
      }
      return true;
    }
    walk.enter(v);
    let leafy = false;
    if (kind === Kind.Array) {
      const arr = v as unknown[];
      for (let i = 0; i < arr.length; i++) {
        walk.keys.push(i);
        const item = arr[i];
        if (item === undefined) invalidState(walk.path(), 'undefined in an array (use null)');
        if (this.#adopt(item, walk, id, leafCopies)) leafy = true;
        walk.keys.pop();
      }
    } else {
      const obj = v as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        // The key first: a getter that throws is reported at its own path.
        walk.keys.push(key);
        const item = obj[key];
        if (item !== undefined && this.#adopt(item, walk, id, leafCopies)) leafy = true;
        walk.keys.pop();
      }
    }
    walk.leave();
    walk.adopted.add(v);
    if (leafy) walk.leafy.add(v);
    return leafy;
  }

  /** Emits a replace for every Date or typed array under `node` (same reference as before) that changed in place. */
  #checkLeaves(node: object, walk: Walk, id: number, leafCopies: LeafCopy[] | undefined, emit = true): void {
    if (node instanceof Date || ArrayBuffer.isView(node)) {
      const leaf = node as Leaf;
      const current = this.#leaves.get(leaf);
      if (current !== undefined && sameLeaf(current.copy, leaf)) return;
      const copy = copyLeaf(leaf);
      if (leafCopies) leafCopies.push({ leaf, copy });
      else this.#leaves.set(leaf, { copy, since: id, older: undefined });
      if (emit) walk.emit(OP_REPLACE, undefined, leaf);
      return;
    }
    if (!this.#isLeafy(node, walk)) return;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const item = node[i];
        if (typeof item === 'object' && item !== null) {
          walk.keys.push(i);
          this.#checkLeaves(item, walk, id, leafCopies, emit);
          walk.keys.pop();
        }
      }
    } else {
      const obj = node as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        const item = obj[key];
        if (typeof item === 'object' && item !== null) {
          walk.keys.push(key);
          this.#checkLeaves(item, walk, id, leafCopies, emit);
          walk.keys.pop();
        }
      }
    }
  }

  #diffImmutable(prev: unknown, next: unknown, walk: Walk, id: number, leafCopies: LeafCopy[]): void {
    // Object.is, not ===: a change between 0 and -0 is a change.
    if (Object.is(prev, next)) {
      if (typeof next === 'object' && next !== null) this.#checkLeaves(next, walk, id, leafCopies);
      return;
    }
    if (typeof next !== 'object' || next === null) {
      checkPrimitive(next, walk);
      if (Object.is(prev, next)) return;
      if (appended(prev, next)) walk.emit(OP_APPEND, undefined, next.slice((prev as string).length));
      else walk.emit(OP_REPLACE, undefined, next);
      return;
    }
    const kind = classify(next);
    if (typeof kind === 'string') invalidState(walk.path(), kind);
    if (kind !== kindOfTree(prev)) {
      this.#adopt(next, walk, id, leafCopies);
      walk.emit(OP_REPLACE, undefined, next);
      return;
    }
    if (kind === Kind.Date || kind === Kind.Bytes) {
      // A different object: equal contents need no operation, but the new object gets its copy.
      const before = this.#leaves.get(prev as Leaf)?.copy ?? (prev as Leaf);
      this.#adopt(next, walk, id, leafCopies);
      if (!sameLeaf(before, next as Leaf)) walk.emit(OP_REPLACE, undefined, next);
      return;
    }
    walk.enter(next);
    if (kind === Kind.Array) this.#diffImmutableArray(prev as unknown[], next as unknown[], walk, id, leafCopies);
    else
      this.#diffImmutableObject(prev as Record<string, unknown>, next as Record<string, unknown>, walk, id, leafCopies);
    walk.leave();
    // Everything below is now validated: adopt the node itself.
    if (!this.#isAdopted(next, walk)) {
      walk.adopted.add(next);
      if (holdsLeaves(next, (n) => this.#isLeafy(n, walk))) walk.leafy.add(next);
    }
  }

  #diffImmutableObject(
    prev: Record<string, unknown>,
    next: Record<string, unknown>,
    walk: Walk,
    id: number,
    leafCopies: LeafCopy[],
  ): void {
    for (const key of Object.keys(prev)) {
      if (next[key] === undefined || !Object.prototype.hasOwnProperty.call(next, key)) walk.emit(OP_REMOVE, key);
    }
    for (const key of Object.keys(next)) {
      walk.keys.push(key);
      const item = next[key];
      if (item === undefined) {
        walk.keys.pop();
        continue;
      }
      if (Object.prototype.hasOwnProperty.call(prev, key)) {
        this.#diffImmutable(prev[key], item, walk, id, leafCopies);
        walk.keys.pop();
      } else {
        this.#adopt(item, walk, id, leafCopies);
        walk.keys.pop();
        walk.emit(OP_ADD, key, item);
      }
    }
  }

  #diffImmutableArray(prev: readonly unknown[], next: unknown[], walk: Walk, id: number, leafCopies: LeafCopy[]): void {
    for (let i = 0; i < next.length; i++) {
      if (next[i] === undefined) invalidState(pathJoin(walk.path(), i), 'undefined in an array (use null)');
    }
    // Unchanged references at both ends cost nothing; the middle is aligned (arrays.ts), matching
    // elements by reference or by their identity field.
    const common = Math.min(prev.length, next.length);
    let lo = 0;
    while (lo < common && Object.is(prev[lo], next[lo])) lo++;
    let suffix = 0;
    while (suffix < common - lo && Object.is(prev[prev.length - 1 - suffix], next[next.length - 1 - suffix])) suffix++;
    for (let i = 0; i < lo; i++) this.#leavesAt(next[i], i, walk, id, leafCopies);
    const same = (a: unknown, b: unknown): boolean => Object.is(a, b) || sameIdentity(a, b);
    const diff: ElementDiff = {
      keep: (from, to) => this.#diffImmutable(prev[from], next[to], walk, id, leafCopies),
      insert: (to) => {
        this.#adopt(next[to], walk, id, leafCopies);
        return next[to];
      },
    };
    emitEdits(walk, prev, next, lo, prev.length - suffix, next.length - suffix, same, diff);
    for (let i = next.length - suffix; i < next.length; i++) this.#leavesAt(next[i], i, walk, id, leafCopies);
  }

  #leavesAt(item: unknown, index: number, walk: Walk, id: number, leafCopies: LeafCopy[]): void {
    if (typeof item !== 'object' || item === null) return;
    walk.keys.push(index);
    this.#checkLeaves(item, walk, id, leafCopies);
    walk.keys.pop();
  }
}

interface LeafCopy {
  leaf: Leaf;
  copy: Leaf;
}

function copyLeaf(leaf: Leaf): Leaf {
  return leaf instanceof Date ? new Date(leaf.getTime()) : copyTypedArray(leaf);
}

function sameLeaf(a: Leaf, b: Leaf): boolean {
  if (a instanceof Date || b instanceof Date) {
    return a instanceof Date && b instanceof Date && Object.is(a.getTime(), b.getTime());
  }
  return sameBytes(a, b);
}

function holdsLeaves(node: object, isLeafy: (n: object) => boolean): boolean {
  const values = Array.isArray(node) ? node : Object.values(node);
  for (const item of values) {
    if (typeof item !== 'object' || item === null) continue;
    if (item instanceof Date || ArrayBuffer.isView(item) || isLeafy(item)) return true;
  }
  return false;
}
