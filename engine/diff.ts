/**
 * Capture: the synchronous part of a checkpoint. It compares the caller's state with the state
 * of the previous checkpoint, validates what changed, and returns the change as JSON Patch
 * (RFC 6902) operations plus a captured tree that later steps (encode, write) can read at leisure,
 * because nothing the caller does afterwards can change it.
 *
 * Two modes, one per engine:
 * - `copy` (default): the engine keeps a private, frozen copy of the state. Every checkpoint walks
 *   the caller's whole state against it, so callers may mutate their state in place freely.
 * - `immutable`: the caller updates state immutably (structural sharing, as with Immer or Redux).
 *   The engine freezes what it captures and skips every subtree whose reference is unchanged,
 *   so a checkpoint costs what changed, not what exists. Dates and typed arrays cannot be frozen:
 *   the engine keeps a copy of each and compares contents, so an in-place change is still seen.
 */
import { escapePathComponent } from 'fast-json-patch';
import {
  Kind,
  MAX_DEPTH,
  classify,
  copyTypedArray,
  invalidState,
  pathJoin,
  sameBytes,
  setOwn,
  type TypedArray,
} from './value.js';
import { OP_ADD, OP_REMOVE, OP_REPLACE, type Op } from './format/ops.js';


/** How the caller updates its state between checkpoints. */
export type UpdateMode = 'copy' | 'immutable';

type Leaf = Date | TypedArray;

/** A copy of a Date or typed array as it was at some capture, newest first. */
interface LeafVersion {
  copy: Leaf;
  since: number;
  older: LeafVersion | undefined;
}

/** The result of one capture. */
export interface Capture {
  /** Number of this capture in its engine, from 1. */
  id: number;
  /** Operations that turn the previous captured state into this one (empty when unchanged). */
  ops: Op[];
  /** The captured state: never changed afterwards (frozen, or private copies of leaves). */
  tree: unknown;
  /** Rough encoded size of the operations, in bytes (0 unless estimation was asked for). */
  estimatedBytes: number;
}

/** Walk state shared by the recursive functions of one capture. */
class Walk {
  readonly ops: Op[] = [];
  /** Keys from the root to the node being visited. */
  readonly keys: (string | number)[] = [];
  /** Containers from the root to the node being visited, for cycle detection. */
  readonly stack: object[] = [];
  estimate = 0;
  /** Immutable mode: containers validated by this capture, frozen only once all of it is valid. */
  readonly adopted = new Set<object>();
  readonly leafy = new Set<object>();

  constructor(readonly root: string, readonly estimateSizes: boolean) {}

  path(): string {
    let p = this.root;
    for (const k of this.keys) p = pathJoin(p, k);
    return p;
  }

  pointer(extra?: string | number): string {
    let p = '';
    for (const k of this.keys) p += '/' + (typeof k === 'number' ? String(k) : escapePathComponent(k));
    if (extra !== undefined) p += '/' + (typeof extra === 'number' ? String(extra) : escapePathComponent(extra));
    return p;
  }

  emit(code: number, extra: string | number | undefined, value?: unknown): void {
    const pointer = this.pointer(extra);
    this.ops.push(code === OP_REMOVE ? [code, pointer] : [code, pointer, value]);
    if (this.estimateSizes) this.estimate += pointer.length + 4 + (code === OP_REMOVE ? 0 : estimateSize(value));
  }

  /** Enters a container: checks depth and cycles. */
  enter(node: object): void {
    const depth = this.stack.length;
    // A cycle makes the walk ever deeper; past 64 levels, look for a container met twice.
    if (depth >= 64 && this.stack.includes(node)) this.#cycle(node);
    if (depth >= MAX_DEPTH) invalidState(this.path(), `nesting deeper than ${MAX_DEPTH} levels`);
    this.stack.push(node);
  }

  /** Reports the first back-reference on the current path. */
  #cycle(node: object): never {
    const seen = new Map<object, number>();
    const nodes = [...this.stack, node];
    for (let j = 0; j < nodes.length; j++) {
      const earlier = seen.get(nodes[j]!);
      if (earlier !== undefined) {
        const at = this.#pathOf(j);
        invalidState(at, `a cycle (it refers back to ${this.#pathOf(earlier)})`);
      }
      seen.set(nodes[j]!, j);
    }
    invalidState(this.path(), 'a cycle');
  }

  #pathOf(depth: number): string {
    let p = this.root;
    for (const k of this.keys.slice(0, depth)) p = pathJoin(p, k);
    return p;
  }

  leave(): void {
    this.stack.pop();
  }
}

/** Rough msgpack size of a value, for the step policy's pending-bytes trigger. */
export function estimateSize(v: unknown): number {
  switch (typeof v) {
    case 'string':
      return v.length + 3;
    case 'number':
      return 9;
    case 'boolean':
      return 1;
    case 'object': {
      if (v === null) return 1;
      if (Array.isArray(v)) {
        let n = 3;
        for (const item of v) n += estimateSize(item);
        return n;
      }
      if (v instanceof Date) return 12;
      if (ArrayBuffer.isView(v)) return v.byteLength + 8;
      let n = 3;
      for (const key of Object.keys(v)) n += key.length + 3 + estimateSize((v as Record<string, unknown>)[key]);
      return n;
    }
    default:
      return 1;
  }
}

/** Checks a primitive (or undefined, which callers handle) and returns it. */
function checkPrimitive(v: unknown, walk: Walk): void {
  const t = typeof v;
  if (t === 'string' || t === 'number' || t === 'boolean' || v === null) return;
  invalidState(walk.path(), classify(v) as string);
}

/** Copies a value into a private frozen tree, validating it on the way (copy mode). */
function cloneInto(v: unknown, walk: Walk): unknown {
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
      const item = obj[key];
      if (item === undefined) continue;
      walk.keys.push(key);
      setOwn(copy, key, cloneInto(item, walk));
      walk.keys.pop();
    }
    out = Object.freeze(copy);
  }
  walk.leave();
  return out;
}

/** Deep-copies a captured tree into fresh mutable objects (for callers that mutate in place). */
export function thaw(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (v instanceof Date) return new Date(v.getTime());
  if (ArrayBuffer.isView(v)) return copyTypedArray(v as TypedArray);
  if (Array.isArray(v)) return v.map(thaw);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(v)) setOwn(out, key, thaw((v as Record<string, unknown>)[key]));
  return out;
}

function kindOfTree(v: unknown): Kind {
  if (typeof v !== 'object' || v === null) return Kind.Primitive;
  if (Array.isArray(v)) return Kind.Array;
  if (v instanceof Date) return Kind.Date;
  if (ArrayBuffer.isView(v)) return Kind.Bytes;
  return Kind.Object;
}

/**
 * Copy mode: diffs the caller's `next` against the private tree `prev`, emitting operations,
 * and returns the new private tree (sharing every unchanged node with `prev`).
 */
function diffCopy(prev: unknown, next: unknown, walk: Walk): unknown {
  if (typeof next !== 'object' || next === null) {
    checkPrimitive(next, walk);
    if (Object.is(prev, next)) return prev;
    walk.emit(OP_REPLACE, undefined, next);
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
  const result = kind === Kind.Array ? diffCopyArray(prev as unknown[], next as unknown[], walk) : diffCopyObject(prev as Record<string, unknown>, next as Record<string, unknown>, walk);
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
    const item = next[key];
    if (item === undefined) continue;
    walk.keys.push(key);
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
  const common = Math.min(prev.length, next.length);
  let out: unknown[] | undefined;
  for (let i = 0; i < common; i++) {
    const item = next[i] === undefined ? null : next[i];
    walk.keys.push(i);
    const after = diffCopy(prev[i], item, walk);
    walk.keys.pop();
    if (!Object.is(after, prev[i])) (out ??= prev.slice(0, common))[i] = after;
  }
  if (next.length > prev.length) {
    out ??= prev.slice(0, common);
    for (let i = prev.length; i < next.length; i++) {
      const item = next[i] === undefined ? null : next[i];
      walk.keys.push(i);
      const copy = cloneInto(item, walk);
      walk.keys.pop();
      walk.emit(OP_ADD, i, copy);
      out.push(copy);
    }
  } else if (prev.length > next.length) {
    out ??= prev.slice(0, common);
    for (let i = prev.length - 1; i >= next.length; i--) walk.emit(OP_REMOVE, i);
  }
  return out === undefined ? prev : Object.freeze(out);
}

/**
 * Captures states for one engine. `capture` is synchronous and returns operations relative to
 * the previous capture; `resolver` gives encoders the copy of a Date or typed array as it was
 * at a given capture (immutable mode keeps the caller's own objects in its tree).
 */
export class Capturer {
  readonly mode: UpdateMode;
  #tree: unknown = undefined;
  #hasTree = false;
  #nextId = 1;
  // Immutable mode bookkeeping, all keyed by the caller's (frozen) objects.
  readonly #adopted = new WeakSet<object>();
  readonly #leafy = new WeakSet<object>();
  readonly #leaves = new WeakMap<object, LeafVersion>();
  /** Lowest capture id whose encoding may still read leaf versions; older versions can be dropped. */
  oldestUnencoded = Infinity;

  constructor(mode: UpdateMode) {
    this.mode = mode;
  }

  /** The last captured tree (frozen; never mutate it). */
  get tree(): unknown {
    return this.#tree;
  }

  /** Makes `state` the starting point without producing operations (after a restore). Returns what callers should hold. */
  seed(state: unknown): unknown {
    const walk = new Walk('$', false);
    if (this.mode === 'copy') {
      this.#tree = cloneInto(state, walk);
      this.#hasTree = true;
      return thaw(this.#tree);
    }
    this.#adopt(state, walk, 0);
    this.#commitAdoption(walk);
    this.#tree = state;
    this.#hasTree = true;
    return state;
  }

  /**
   * Captures `state`: validates what changed and returns the operations from the previous
   * capture. Throws INVALID_STATE (naming the path) without changing anything when the state
   * holds an unsupported value.
   */
  capture(state: unknown, estimateSizes = false): Capture {
    return this.#capture(state, estimateSizes, true);
  }

  /** A capture of the last captured tree, unchanged (no operations), for checkpoints that only carry effects. */
  unchanged(): Capture {
    if (!this.#hasTree) invalidState('$', 'no state yet (checkpoint a state before recording effects, or pass options.state)');
    return { id: this.#nextId++, ops: [], tree: this.#tree, estimatedBytes: 0 };
  }

  /** Estimates the encoded size of the change since the last capture, capturing nothing. */
  estimate(state: unknown): number {
    return this.#capture(state, true, false).estimatedBytes;
  }

  #capture(state: unknown, estimateSizes: boolean, commit: boolean): Capture {
    const walk = new Walk('$', estimateSizes);
    const id = this.#nextId;
    let tree: unknown;
    if (state === undefined) invalidState('$', 'undefined (the state itself)');
    if (this.mode === 'copy') {
      if (!this.#hasTree) {
        tree = cloneInto(state, walk);
        walk.emit(OP_REPLACE, undefined, tree);
      } else {
        tree = diffCopy(this.#tree, state, walk);
      }
    } else {
      // Validate (and so adopt) before emitting anything, so a rejected state changes nothing.
      const pending: LeafUpdate[] = [];
      if (!this.#hasTree) {
        this.#adopt(state, walk, id, pending);
        walk.emit(OP_REPLACE, undefined, state);
      } else {
        this.#diffImmutable(this.#tree, state, walk, id, pending);
      }
      if (commit) for (const u of pending) this.#pushVersion(u.leaf, u.copy, id);
      tree = state;
    }
    if (!commit) return { id, ops: walk.ops, tree, estimatedBytes: walk.estimate };
    // All of it was valid: only now freeze what was adopted (a rejected state is left as it was).
    this.#commitAdoption(walk);
    this.#nextId++;
    this.#tree = tree;
    this.#hasTree = true;
    return { id, ops: walk.ops, tree, estimatedBytes: walk.estimate };
  }

  /** A resolver that reads leaves as they were at capture `id` (identity in copy mode). */
  resolverFor(id: number): ((leaf: Leaf) => Leaf) | undefined {
    if (this.mode === 'copy') return undefined;
    return (leaf) => {
      let v = this.#leaves.get(leaf);
      while (v !== undefined && v.since > id) v = v.older;
      return v?.copy ?? leaf;
    };
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
  #adopt(v: unknown, walk: Walk, id: number, pending?: LeafUpdate[]): boolean {
    if (typeof v !== 'object' || v === null) {
      checkPrimitive(v, walk);
      return false;
    }
    if (this.#isAdopted(v, walk)) {
      if (!this.#isLeafy(v, walk)) return false;
      // Adopted before: its leaves may have been changed in place since; check them.
      this.#checkLeaves(v, walk, id, pending, false);
      return true;
    }
    const kind = classify(v);
    if (typeof kind === 'string') invalidState(walk.path(), kind);
    if (kind === Kind.Date || kind === Kind.Bytes) {
      const leaf = v as Leaf;
      const current = this.#leaves.get(leaf);
      if (current === undefined || !sameLeaf(current.copy, leaf)) {
        const copy = copyLeaf(leaf);
        if (pending) pending.push({ leaf, copy });
        else this.#leaves.set(leaf, { copy, since: id, older: undefined });
      }
      return true;
    }
    walk.enter(v);
    let leafy = false;
    if (kind === Kind.Array) {
      const arr = v as unknown[];
      for (let i = 0; i < arr.length; i++) {
        if (arr[i] === undefined) invalidState(pathJoin(walk.path(), i), 'undefined in an array (use null)');
        walk.keys.push(i);
        if (this.#adopt(arr[i], walk, id, pending)) leafy = true;
        walk.keys.pop();
      }
    } else {
      const obj = v as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        const item = obj[key];
        if (item === undefined) continue;
        walk.keys.push(key);
        if (this.#adopt(item, walk, id, pending)) leafy = true;
        walk.keys.pop();
      }
    }
    walk.leave();
    walk.adopted.add(v);
    if (leafy) walk.leafy.add(v);
    return leafy;
  }

  /** Emits a replace for every Date or typed array under `node` (same reference as before) that changed in place. */
  #checkLeaves(node: object, walk: Walk, id: number, pending: LeafUpdate[] | undefined, emit = true): void {
    if (node instanceof Date || ArrayBuffer.isView(node)) {
      const leaf = node as Leaf;
      const current = this.#leaves.get(leaf);
      if (current !== undefined && sameLeaf(current.copy, leaf)) return;
      const copy = copyLeaf(leaf);
      if (pending) pending.push({ leaf, copy });
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
          this.#checkLeaves(item, walk, id, pending, emit);
          walk.keys.pop();
        }
      }
    } else {
      const obj = node as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        const item = obj[key];
        if (typeof item === 'object' && item !== null) {
          walk.keys.push(key);
          this.#checkLeaves(item, walk, id, pending, emit);
          walk.keys.pop();
        }
      }
    }
  }

  #diffImmutable(prev: unknown, next: unknown, walk: Walk, id: number, pending: LeafUpdate[]): void {
    // Object.is, not ===: a change between 0 and -0 is a change.
    if (Object.is(prev, next)) {
      if (typeof next === 'object' && next !== null) this.#checkLeaves(next, walk, id, pending);
      return;
    }
    if (typeof next !== 'object' || next === null) {
      checkPrimitive(next, walk);
      if (!Object.is(prev, next)) walk.emit(OP_REPLACE, undefined, next);
      return;
    }
    const kind = classify(next);
    if (typeof kind === 'string') invalidState(walk.path(), kind);
    if (kind !== kindOfTree(prev)) {
      this.#adopt(next, walk, id, pending);
      walk.emit(OP_REPLACE, undefined, next);
      return;
    }
    if (kind === Kind.Date || kind === Kind.Bytes) {
      // A different object: equal contents need no operation, but the new object gets its copy.
      const before = this.#leaves.get(prev as Leaf)?.copy ?? (prev as Leaf);
      this.#adopt(next, walk, id, pending);
      if (!sameLeaf(before, next as Leaf)) walk.emit(OP_REPLACE, undefined, next);
      return;
    }
    walk.enter(next);
    if (kind === Kind.Array) this.#diffImmutableArray(prev as unknown[], next as unknown[], walk, id, pending);
    else this.#diffImmutableObject(prev as Record<string, unknown>, next as Record<string, unknown>, walk, id, pending);
    walk.leave();
    // Everything below is now validated: adopt the node itself.
    if (!this.#isAdopted(next, walk)) {
      walk.adopted.add(next);
      if (holdsLeaves(next, (n) => this.#isLeafy(n, walk))) walk.leafy.add(next);
    }
  }

  #diffImmutableObject(prev: Record<string, unknown>, next: Record<string, unknown>, walk: Walk, id: number, pending: LeafUpdate[]): void {
    for (const key of Object.keys(prev)) {
      if (next[key] === undefined || !Object.prototype.hasOwnProperty.call(next, key)) walk.emit(OP_REMOVE, key);
    }
    for (const key of Object.keys(next)) {
      const item = next[key];
      if (item === undefined) continue;
      walk.keys.push(key);
      if (Object.prototype.hasOwnProperty.call(prev, key)) {
        this.#diffImmutable(prev[key], item, walk, id, pending);
        walk.keys.pop();
      } else {
        this.#adopt(item, walk, id, pending);
        walk.keys.pop();
        walk.emit(OP_ADD, key, item);
      }
    }
  }

  #diffImmutableArray(prev: readonly unknown[], next: unknown[], walk: Walk, id: number, pending: LeafUpdate[]): void {
    for (let i = 0; i < next.length; i++) {
      if (next[i] === undefined) invalidState(pathJoin(walk.path(), i), 'undefined in an array (use null)');
    }
    // Unchanged references at both ends cost nothing; only the middle is compared by position.
    const max = Math.min(prev.length, next.length);
    let pre = 0;
    while (pre < max && Object.is(prev[pre], next[pre])) pre++;
    let suf = 0;
    while (suf < max - pre && Object.is(prev[prev.length - 1 - suf], next[next.length - 1 - suf])) suf++;
    for (let i = 0; i < pre; i++) this.#leavesAt(next[i], i, walk, id, pending);
    const prevMid = prev.length - pre - suf;
    const nextMid = next.length - pre - suf;
    const common = Math.min(prevMid, nextMid);
    for (let i = pre; i < pre + common; i++) {
      walk.keys.push(i);
      this.#diffImmutable(prev[i], next[i], walk, id, pending);
      walk.keys.pop();
    }
    if (nextMid > prevMid) {
      for (let i = pre + common; i < pre + nextMid; i++) {
        walk.keys.push(i);
        this.#adopt(next[i], walk, id, pending);
        walk.keys.pop();
        walk.emit(OP_ADD, i, next[i]);
      }
    } else {
      for (let i = pre + prevMid - 1; i >= pre + common; i--) walk.emit(OP_REMOVE, i);
    }
    for (let i = next.length - suf; i < next.length; i++) this.#leavesAt(next[i], i, walk, id, pending);
  }

  #leavesAt(item: unknown, index: number, walk: Walk, id: number, pending: LeafUpdate[]): void {
    if (typeof item !== 'object' || item === null) return;
    walk.keys.push(index);
    this.#checkLeaves(item, walk, id, pending);
    walk.keys.pop();
  }
}

interface LeafUpdate {
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

/** Validates a value (meta, an effect's result) and returns a frozen private copy; `root` names it in errors. */
export function snapshotValue(value: unknown, root: string): unknown {
  return cloneInto(value, new Walk(root, false));
}
