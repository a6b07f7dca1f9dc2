/**
 * The walk both capture modes share: the path from the root to the node being visited (for
 * JSON Pointers and error messages), depth and cycle checks, and the operations it emits.
 */
import { escapePathComponent } from 'fast-json-patch';
import { MIN_APPEND_BASE, OP_REMOVE, type Op } from '../format/ops.js';
import { Kind, MAX_DEPTH, classify, invalidState, pathJoin } from '../value.js';

/** Walk state shared by the recursive functions of one capture. */
export class Walk {
  readonly ops: Op[] = [];
  /** Keys from the root to the node being visited. */
  readonly keys: (string | number)[] = [];
  /** Containers from the root to the node being visited, for cycle detection. */
  readonly stack: object[] = [];
  estimate = 0;
  /** Immutable mode: containers validated by this capture, frozen only once all of it is valid. */
  readonly adopted = new Set<object>();
  readonly leafy = new Set<object>();

  constructor(
    readonly root: string,
    readonly estimateSizes: boolean,
  ) {}

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

/** Checks that a non-object value is a supported primitive (undefined is handled by callers). */
export function checkPrimitive(v: unknown, walk: Walk): void {
  const t = typeof v;
  if (t === 'string' || t === 'number' || t === 'boolean' || v === null) return;
  invalidState(walk.path(), classify(v) as string);
}

/** The kind of a node of a captured state (already validated). */
export function kindOfTree(v: unknown): Kind {
  if (typeof v !== 'object' || v === null) return Kind.Primitive;
  if (Array.isArray(v)) return Kind.Array;
  if (v instanceof Date) return Kind.Date;
  if (ArrayBuffer.isView(v)) return Kind.Bytes;
  return Kind.Object;
}

/** Whether `next` is `prev` with text appended, long enough that storing only the appended text pays. */
export function appended(prev: unknown, next: unknown): next is string {
  return (
    typeof prev === 'string' &&
    typeof next === 'string' &&
    prev.length >= MIN_APPEND_BASE &&
    next.length > prev.length &&
    next.startsWith(prev)
  );
}
