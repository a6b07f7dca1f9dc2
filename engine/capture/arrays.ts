/**
 * Array changes as array changes: aligns the middle of two arrays (what is left once their common
 * prefix and suffix are set aside) with a bounded Myers diff, so that dropping the oldest message
 * and appending the newest (a sliding context window), trimming, or inserting in the middle cost
 * one operation per element touched instead of a replace of every element that shifted.
 */

import { OP_ADD, OP_REMOVE } from '../format/ops.js';
import { sameBytes, type TypedArray } from '../value.js';
import type { Walk } from './walk.js';

/** What an edit does to the element at the cursor: diff a kept pair, remove, or insert. */
export const KEEP = 0;
export const REMOVE = 1;
export const INSERT = 2;

/** Receives the edits of an array's middle in order: `from` indexes prev (keep, remove), `to` indexes next (keep, insert). */
export type EditVisitor = (op: typeof KEEP | typeof REMOVE | typeof INSERT, from: number, to: number) => void;

/** Past this many removals plus insertions the middle is compared by position instead. */
export const MAX_EDITS = 64;
/** Most (dropped × appended) pairs a sliding window is checked for moves before the search takes over. */
const SHIFT_CROSS = 256;

/**
 * Visits the edits that turn `prev[lo..prevHi)` into `next[lo..nextHi)`. Elements `same` calls
 * equal are kept (and diffed); between two kept runs, removals and insertions are paired by
 * position first (so an element changed in place is diffed, not replaced), the rest removed or
 * inserted. Equal lengths that differ only at isolated positions, alignments needing more edits
 * than MAX_EDITS (or, for equal lengths, than positions that differ), and searches that exhaust
 * their budget are compared by position.
 */
export function walkEdits(
  prev: readonly unknown[],
  next: readonly unknown[],
  lo: number,
  prevHi: number,
  nextHi: number,
  same: (a: unknown, b: unknown) => boolean,
  visit: EditVisitor,
  exhausted: () => boolean = () => false,
): void {
  const n = prevHi - lo;
  const m = nextHi - lo;
  // A sliding window (the oldest elements dropped, new ones appended) is the common case: found
  // directly, it skips the search below and its allocations. The script is the one the search
  // finds for it (removes first, then keeps, then inserts).
  const shift = shiftOf(prev, next, lo, n, m, same);
  if (shift > 0) {
    for (let k = 0; k < shift; k++) visit(REMOVE, lo + k, -1);
    for (let k = 0; k < n - shift; k++) visit(KEEP, lo + shift + k, lo + k);
    for (let k = n - shift; k < m; k++) visit(INSERT, -1, lo + k);
    return;
  }
  // Equal lengths: count the positions that differ. Only isolated ones (changes in place) are
  // compared by position at once; a run of them may be a move, which a search can beat, but only
  // with fewer edits than positions that differ.
  let maxEdits = MAX_EDITS;
  if (n === m) {
    const { changed, longestRun } = positionalChanges(prev, next, lo, n, same);
    maxEdits = longestRun <= 1 ? 0 : Math.min(MAX_EDITS, changed - 1);
  }
  const path = n > 0 && m > 0 && maxEdits > 0 ? myers(prev, next, lo, n, m, same, exhausted, maxEdits) : undefined;
  if (path === undefined) {
    // By position, as a plain index diff does (no allocation per element: arrays can be long).
    for (let k = 0; k < Math.min(n, m); k++) visit(KEEP, lo + k, lo + k);
    for (let k = m; k < n; k++) visit(REMOVE, lo + k, -1);
    for (let k = n; k < m; k++) visit(INSERT, -1, lo + k);
    return;
  }
  let removes: number[] = [];
  let inserts: number[] = [];
  const flush = (): void => {
    const paired = Math.min(removes.length, inserts.length);
    for (let k = 0; k < paired; k++) visit(KEEP, lo + removes[k]!, lo + inserts[k]!);
    for (let k = paired; k < removes.length; k++) visit(REMOVE, lo + removes[k]!, -1);
    for (let k = paired; k < inserts.length; k++) visit(INSERT, -1, lo + inserts[k]!);
    removes = [];
    inserts = [];
  };
  for (const step of path) {
    if (step[0] === KEEP) {
      flush();
      visit(KEEP, lo + step[1], lo + step[2]);
    } else if (step[0] === REMOVE) removes.push(step[1]);
    else inserts.push(step[1]);
  }
  flush();
}

/** How one capture mode diffs a kept pair and takes in an inserted element (see emitEdits). */
export interface ElementDiff {
  /** Diffs prev[from] against next[to] at the walk's current path (emitting ops there). */
  keep(from: number, to: number): void;
  /** Validates and takes next[to] at the walk's current path; returns the value the add op carries. */
  insert(to: number): unknown;
}

/**
 * Walks the edits of an array's middle (walkEdits) and emits them as ops at a running index, the
 * element's position once every earlier edit is applied: remove there, add there, or diff the kept
 * pair there. Both capture modes use it; they differ only in `diff`.
 */
export function emitEdits(
  walk: Walk,
  prev: readonly unknown[],
  next: readonly unknown[],
  lo: number,
  prevHi: number,
  nextHi: number,
  same: (a: unknown, b: unknown) => boolean,
  diff: ElementDiff,
  exhausted?: () => boolean,
): void {
  let cursor = lo;
  const visit: EditVisitor = (op, from, to) => {
    if (op === REMOVE) {
      walk.emit(OP_REMOVE, cursor);
      return;
    }
    walk.keys.push(cursor);
    if (op === KEEP) {
      diff.keep(from, to);
      walk.keys.pop();
    } else {
      const value = diff.insert(to);
      walk.keys.pop();
      walk.emit(OP_ADD, cursor, value);
    }
    cursor++;
  };
  walkEdits(prev, next, lo, prevHi, nextHi, same, visit, exhausted);
}

type Step = [typeof KEEP, number, number] | [typeof REMOVE, number] | [typeof INSERT, number];

/**
 * The s in 1..MAX_EDITS when the middle of `next` starts with the middle of `prev` less its first
 * s elements (each pair `same`), holds at least as many elements, and no element it drops is
 * `same` as one it appends (then the elements were moved, not dropped, and the search finds a
 * shorter script); else 0. Only the smallest s whose first pair matches is tried, so it costs at
 * most MAX_EDITS + n + SHIFT_CROSS comparisons.
 */
function shiftOf(
  prev: readonly unknown[],
  next: readonly unknown[],
  lo: number,
  n: number,
  m: number,
  same: (a: unknown, b: unknown) => boolean,
): number {
  if (m === 0) return 0;
  const most = Math.min(MAX_EDITS, n - 1);
  for (let s = 1; s <= most; s++) {
    if (!same(prev[lo + s], next[lo])) continue;
    const appended = m - (n - s);
    if (appended < 0 || s * appended > SHIFT_CROSS) return 0;
    for (let k = 1; k < n - s; k++) if (!same(prev[lo + s + k], next[lo + k])) return 0;
    for (let d = 0; d < s; d++) for (let a = n - s; a < m; a++) if (same(prev[lo + d], next[lo + a])) return 0;
    return s;
  }
  return 0;
}

/** How many positions of two equal-length middles differ, and the longest run of adjacent ones. */
function positionalChanges(
  prev: readonly unknown[],
  next: readonly unknown[],
  lo: number,
  n: number,
  same: (a: unknown, b: unknown) => boolean,
): { changed: number; longestRun: number } {
  let changed = 0;
  let run = 0;
  let longestRun = 0;
  for (let k = 0; k < n; k++) {
    if (same(prev[lo + k], next[lo + k])) run = 0;
    else {
      changed++;
      longestRun = Math.max(longestRun, ++run);
    }
  }
  return { changed, longestRun };
}

/**
 * The shortest edit script from a = prev[lo..lo+n) to b = next[lo..lo+m) (Myers' O((n+m)·D)
 * greedy algorithm), or undefined when it needs more than MAX_EDITS edits or keeps nothing.
 */
function myers(
  prev: readonly unknown[],
  next: readonly unknown[],
  lo: number,
  n: number,
  m: number,
  same: (a: unknown, b: unknown) => boolean,
  exhausted: () => boolean,
  maxEdits: number,
): Step[] | undefined {
  const max = Math.min(maxEdits, n + m);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max && found < 0; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x =
        k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? v[offset + k + 1]! : v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && same(prev[lo + x], next[lo + y])) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (exhausted()) return undefined;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0) return undefined;
  // Walk back through the saved frontiers to recover the path.
  const steps: Step[] = [];
  let x = n;
  let y = m;
  let kept = 0;
  for (let d = found; d > 0; d--) {
    const vd = trace[d]!;
    const k = x - y;
    const prevK = k === -d || (k !== d && vd[offset + k - 1]! < vd[offset + k + 1]!) ? k + 1 : k - 1;
    const prevX = vd[offset + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      steps.push([KEEP, --x, --y]);
      kept++;
    }
    if (x === prevX) steps.push([INSERT, --y]);
    else steps.push([REMOVE, --x]);
  }
  while (x > 0 && y > 0) {
    steps.push([KEEP, --x, --y]);
    kept++;
  }
  if (kept === 0) return undefined;
  return steps.reverse();
}

/**
 * True when two elements carry the same identity field (`id`, `key`, `uuid` or `_id`, a string or
 * a number; the first of them `a` has decides): messages, plan steps and tool calls usually do,
 * and then an element changed in place is still recognised as the same element. The fields are
 * read by name, not from a list of keys: named reads are what keep it cheap on every element
 * position an alignment compares.
 */
export function sameIdentity(a: unknown, b: unknown): boolean {
  if (
    typeof a !== 'object' ||
    a === null ||
    typeof b !== 'object' ||
    b === null ||
    Array.isArray(a) ||
    Array.isArray(b)
  )
    return false;
  const x = a as { id?: unknown; key?: unknown; uuid?: unknown; _id?: unknown };
  const y = b as typeof x;
  if (x.id !== undefined) return sameId(x.id, y.id);
  if (x.key !== undefined) return sameId(x.key, y.key);
  if (x.uuid !== undefined) return sameId(x.uuid, y.uuid);
  if (x._id !== undefined) return sameId(x._id, y._id);
  return false;
}

function sameId(id: unknown, other: unknown): boolean {
  return (typeof id === 'string' || typeof id === 'number') && Object.is(id, other);
}

/**
 * Whether the caller's `b` holds what the captured value `a` holds, as statefold stores values
 * (-0 is not 0; undefined in an array is null, an undefined property is absent). Copy mode
 * relies on it being exact: a pair it calls equal is taken as the captured node, without a diff.
 * The walk follows `a`, a finite captured tree, so a cycle in `b` cannot make it loop.
 */
export function deepEqual(a: unknown, b: unknown, budget?: { left: number }): boolean {
  if (budget !== undefined && --budget.left < 0) return false;
  // Same reference: a captured node is frozen all the way down, so it holds what it held (-0 is not 0).
  if (a === b) return typeof a !== 'number' || a !== 0 || 1 / a === 1 / (b as number);
  if (typeof a !== 'object' || a === null) return Object.is(a, b);
  if (typeof b !== 'object' || b === null) return false;
  const proto = Object.getPrototypeOf(b);
  if (Array.isArray(a)) {
    if (proto !== Array.prototype || (b as unknown[]).length !== a.length) return false;
    for (let i = 0; i < a.length; i++) {
      const item = (b as unknown[])[i];
      if (!deepEqual(a[i], item === undefined ? null : item, budget)) return false;
    }
    return true;
  }
  if (a instanceof Date) return proto === Date.prototype && Object.is(a.getTime(), (b as Date).getTime());
  if (ArrayBuffer.isView(a)) return ArrayBuffer.isView(b) && sameBytes(a as TypedArray, b as TypedArray);
  if (proto !== Object.prototype && proto !== null) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  // for-in with an own-key check reads the keys without allocating an array of them (many engines
  // per process make that allocation a measurable share of a capture).
  let count = 0;
  for (const key in y) {
    if (!hasOwn.call(y, key)) continue;
    const item = y[key];
    if (item === undefined) continue;
    count++;
    if (!hasOwn.call(x, key) || !deepEqual(x[key], item, budget)) return false;
  }
  for (const key in x) if (hasOwn.call(x, key)) count--;
  return count === 0;
}

const hasOwn = Object.prototype.hasOwnProperty;
