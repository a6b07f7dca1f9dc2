/**
 * Seeded random agent states for the crash tests: an agent-like state (messages, plan, memory,
 * counters, bytes, awkward keys and numbers) changed by random edits, in place (`updates: 'copy'`)
 * or by path copying (`updates: 'immutable'`, where Dates and typed arrays may also change in place,
 * as the engine allows), plus a deep copy that keeps every type for the reference.
 */
import { mulberry32 } from './prng.mjs';

export type Mode = 'copy' | 'immutable';

/** A seeded random source (mulberry32). */
export class Rng {
  readonly #next: () => number;
  constructor(readonly seed: number) {
    this.#next = mulberry32(seed);
  }

  /** A number in [0, 1). */
  next(): number {
    return this.#next();
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

const KEYS = [
  'a',
  'b',
  'note',
  '__proto__',
  'constructor',
  '',
  'x/y',
  'm~n',
  '~1',
  'toString',
  'é',
  '0',
  'hasOwnProperty',
];
const WORDS = [
  'plan',
  'tool',
  'call',
  'result',
  'search',
  'fetch',
  'think',
  'reply',
  'memo',
  'ok',
  'retry',
  'ünïcødé',
  '😀',
];

type Container = unknown[] | Record<string, unknown>;

function isContainer(v: unknown): v is Container {
  return typeof v === 'object' && v !== null && !(v instanceof Date) && !ArrayBuffer.isView(v);
}

/** Sets an own data property, so that `__proto__` is data. */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Deep copy that keeps -0, NaN, Dates, typed arrays (class and bytes) and `__proto__` keys. */
export function deepCopy<T>(v: T): T {
  if (typeof v !== 'object' || v === null) return v;
  if (v instanceof Date) return new Date(v.getTime()) as T;
  if (ArrayBuffer.isView(v)) return (v as unknown as Uint8Array).slice() as T;
  if (Array.isArray(v)) return v.map(deepCopy) as T;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) setOwn(out, k, deepCopy((v as Record<string, unknown>)[k]));
  return out as T;
}

function text(r: Rng, long = false): string {
  const n = long ? 20 + r.int(60) : 1 + r.int(4);
  const words: string[] = [];
  for (let i = 0; i < n; i++) words.push(r.pick(WORDS));
  return words.join(' ');
}

function leaf(r: Rng): unknown {
  switch (r.int(14)) {
    case 0:
      return null;
    case 1:
      return r.chance(0.5);
    case 2:
      return r.int(2000) - 1000;
    case 3:
      return r.next() * 1e6;
    case 4:
      return r.pick([-0, NaN, Infinity, -Infinity, 2 ** 53, -(2 ** 60), 0]);
    case 5:
      return new Date(1_700_000_000_000 + r.int(1e9));
    case 6:
      return Uint8Array.from({ length: r.int(12) }, () => r.int(256));
    case 7:
      return Float64Array.from({ length: r.int(4) }, () => r.next());
    case 8:
      return text(r, true);
    default:
      return text(r);
  }
}

function value(r: Rng, depth: number): unknown {
  if (depth <= 0 || r.chance(0.6)) return leaf(r);
  if (r.chance(0.5)) return Array.from({ length: r.int(4) }, () => value(r, depth - 1));
  const out: Record<string, unknown> = {};
  for (let i = r.int(4); i > 0; i--) setOwn(out, r.pick(KEYS), value(r, depth - 1));
  return out;
}

/** A fresh agent-like state. */
export function initialState(r: Rng): Record<string, unknown> {
  const state: Record<string, unknown> = {
    messages: [{ role: 'system', content: text(r, true) }],
    plan: { steps: ['start'], cursor: 0 },
    memory: {},
    counters: { steps: 0, tokens: 0 },
    blob: Uint8Array.from({ length: 16 }, () => r.int(256)),
    started: new Date(1_700_000_000_000),
  };
  return state;
}

/**
 * Applies 1-3 random edits and returns the next state: the same object changed in place in
 * `copy` mode, a new root sharing unchanged subtrees in `immutable` mode.
 */
export function evolve(state: Record<string, unknown>, r: Rng, mode: Mode): Record<string, unknown> {
  let root: unknown = state;
  for (let n = 1 + r.int(3); n > 0; n--) root = editOnce(root, r, mode);
  if (!isContainer(root) || Array.isArray(root)) root = { was: root };
  return root as Record<string, unknown>;
}

function editOnce(root: unknown, r: Rng, mode: Mode): unknown {
  if (r.chance(0.01)) return value(r, 3);
  // Pick a path to a container by a random walk from the root.
  const path: (string | number)[] = [];
  let node = root;
  while (isContainer(node)) {
    const keys = Array.isArray(node) ? node.map((_, i) => i) : Object.keys(node);
    const inner = keys.filter(
      (k) =>
        isContainer((node as Record<string, unknown>)[k as string]) ||
        isLeafObject((node as Record<string, unknown>)[k as string]),
    );
    if (inner.length === 0 || r.chance(0.35)) break;
    const k = r.pick(inner);
    const child = (node as Record<string | number, unknown>)[k];
    if (isLeafObject(child)) {
      // An in-place change of a Date or typed array (allowed in both modes).
      if (r.chance(0.5)) {
        touchLeaf(child, r);
        return root;
      }
      break;
    }
    path.push(k);
    node = child;
  }
  if (!isContainer(node)) return root;
  return update(root, path, mode, (c) => {
    if (Array.isArray(c)) {
      const op = r.int(5);
      if (op === 0 || c.length === 0) c.push(value(r, 2));
      else if (op === 1) c.splice(r.int(c.length), 1 + r.int(2));
      else if (op === 2) c[r.int(c.length)] = value(r, 2);
      else if (op === 3 && c.length > 1) {
        const i = r.int(c.length);
        const j = r.int(c.length);
        [c[i], c[j]] = [c[j], c[i]];
      } else c.length = r.int(c.length + 1);
    } else {
      const op = r.int(4);
      const keys = Object.keys(c);
      if (op === 0 && keys.length > 0) delete c[r.pick(keys)];
      else if (op === 1 && keys.length > 0) setOwn(c, r.pick(keys), value(r, 2));
      else if (op === 2 && typeof c.steps === 'number') c.steps = (c.steps as number) + 1;
      else setOwn(c, r.pick(KEYS), value(r, 2));
    }
  });
}

function isLeafObject(v: unknown): v is Date | Uint8Array | Float64Array {
  return v instanceof Date || ArrayBuffer.isView(v);
}

function touchLeaf(v: Date | Uint8Array | Float64Array, r: Rng): void {
  if (v instanceof Date) v.setTime(v.getTime() + 1 + r.int(1000));
  else if (v.length > 0) v[r.int(v.length)] = v instanceof Float64Array ? r.next() : r.int(256);
  else if (v instanceof Uint8Array) v.fill(1);
}

/**
 * Applies `fn` to the container at `path`: in place (copy mode), or on shallow copies of every
 * container from the root down to it (immutable mode). Returns the (possibly new) root.
 */
function update(root: unknown, path: readonly (string | number)[], mode: Mode, fn: (c: Container) => void): unknown {
  if (mode === 'copy') {
    let node = root as Container;
    for (const k of path) node = (node as Record<string | number, unknown>)[k] as Container;
    fn(node);
    return root;
  }
  const shallow = (c: Container): Container => {
    if (Array.isArray(c)) return c.slice();
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(c)) setOwn(out, k, c[k]);
    return out;
  };
  const copyRoot = shallow(root as Container);
  let node = copyRoot;
  for (const k of path) {
    const child = shallow((node as Record<string | number, unknown>)[k] as Container);
    if (Array.isArray(node)) node[k as number] = child;
    else setOwn(node, k as string, child);
    node = child;
  }
  fn(node);
  return copyRoot;
}
