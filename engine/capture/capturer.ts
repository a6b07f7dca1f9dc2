/**
 * Capture: the synchronous part of a checkpoint. A capturer compares the caller's state with the
 * state of the previous capture, validates what changed, and returns the change as JSON Patch
 * (RFC 6902) operations plus a captured state that later stages (encode, write) can read at
 * leisure, because nothing the caller does afterwards can change it. One subclass per update
 * mode: copy.ts and immutable.ts.
 */
import type { Op } from '../format/ops.js';
import type { LeafResolver } from '../format/values.js';
import { StatefoldError, describeCause } from '../errors.js';
import { MAX_DEPTH, invalidState, pathJoin } from '../value.js';
import { Walk } from './walk.js';

/** How the caller updates its state between checkpoints. */
export type UpdateMode = 'copy' | 'immutable';

/** The result of one capture. */
export interface Capture {
  /** Number of this capture in its engine, from 1. */
  id: number;
  /** Operations that turn the previous captured state into this one (empty when unchanged). */
  ops: Op[];
  /** The captured state: never changed afterwards (frozen, or private copies of leaves). */
  state: unknown;
  /** Rough encoded size of the operations, in bytes (0 unless estimation was asked for). */
  estimatedBytes: number;
}

/** Captures states for one engine; `capture` is synchronous and returns operations relative to the previous capture. */
export abstract class Capturer {
  /** The update mode this capturer serves. */
  abstract readonly mode: UpdateMode;
  #state: unknown = undefined;
  #hasState = false;
  #nextId = 1;
  #oldestUnencoded = Infinity;

  /** Lowest capture id whose encoding may still read leaf versions (immutable mode): older versions can be dropped. */
  get oldestUnencoded(): number {
    return this.#oldestUnencoded;
  }

  /**
   * Told by the commit queue which capture it encodes next (`id`; Infinity when none waits): leaf
   * versions only captures before it would read can be dropped.
   */
  encodingFrom(id: number): void {
    this.#oldestUnencoded = id;
  }

  /** The last captured state (frozen; never mutate it); undefined before the first capture. */
  get state(): unknown {
    return this.#state;
  }

  /** Makes a restored state the starting point without producing operations (after a restore). */
  seed(state: unknown): void {
    this.#state = this.adoptRestored(state);
    this.#hasState = true;
  }

  /**
   * Captures `state`: validates what changed and returns the operations from the previous
   * capture. Throws INVALID_STATE (naming the path) without changing anything when the state
   * holds an unsupported value.
   */
  capture(state: unknown): Capture {
    return this.#capture(state, false, true);
  }

  /** A capture of the last captured state, unchanged (no operations), for checkpoints that only carry effects. */
  unchanged(): Capture {
    if (!this.#hasState)
      invalidState('$', 'no state yet (checkpoint a state before recording effects, or pass options.state)');
    return { id: this.#nextId++, ops: [], state: this.#state, estimatedBytes: 0 };
  }

  /** Checks `state` as `capture` would (INVALID_STATE naming the path), capturing nothing. */
  check(state: unknown): void {
    this.#capture(state, false, false);
  }

  /** Estimates the encoded size of the change since the last capture, capturing nothing. */
  estimate(state: unknown): number {
    return this.#capture(state, true, false).estimatedBytes;
  }

  #capture(state: unknown, estimateSizes: boolean, commit: boolean): Capture {
    const walk = new Walk('$', estimateSizes);
    const id = this.#nextId;
    if (state === undefined) invalidState('$', 'undefined (the state itself)');
    let captured: unknown;
    try {
      captured = this.#hasState ? this.diff(this.#state, state, walk, id, commit) : this.first(state, walk, id, commit);
    } catch (err) {
      throw unreadable(err, walk);
    }
    if (commit) {
      this.#nextId++;
      this.#state = captured;
      this.#hasState = true;
    }
    return { id, ops: walk.ops, state: captured, estimatedBytes: walk.estimate };
  }

  /** The first capture: validates the whole state and emits one replace of the root. Returns the captured state. */
  protected abstract first(state: unknown, walk: Walk, id: number, commit: boolean): unknown;

  /** A later capture: emits the operations from `prev` to `next`. Returns the captured state. */
  protected abstract diff(prev: unknown, next: unknown, walk: Walk, id: number, commit: boolean): unknown;

  /** What a restored (freshly decoded) state becomes as the starting point. */
  protected abstract adoptRestored(state: unknown): unknown;

  /** How encoders read Dates and typed arrays as they were at capture `id`; undefined when they can read them as they are. */
  abstract resolverFor(id: number): LeafResolver | undefined;
}

/**
 * Capture's error boundary: whatever a getter or a Proxy trap throws while the state is read
 * becomes INVALID_STATE naming where the walk was; nothing was captured.
 */
export function unreadable(err: unknown, walk: Walk): StatefoldError {
  if (err instanceof StatefoldError) return err;
  const path = throwingRead(walk) ?? walk.path();
  return new StatefoldError(
    'INVALID_STATE',
    `${path}: reading it threw (${describeCause(err)}); only plain data (no getters or Proxies that throw) can be checkpointed`,
    { path, cause: err },
  );
}

/**
 * Where a read threw that the walk made without naming it (comparing array elements, reading a
 * key to see whether it was removed): the path of the first property under the container the walk
 * was in whose read throws when read again, or undefined when none does.
 */
function throwingRead(walk: Walk): string | undefined {
  const depth = walk.stack.length - 1;
  if (depth < 0) return undefined;
  // The container at stack[d] was entered at keys[0..d).
  let path = walk.root;
  for (const key of walk.keys.slice(0, depth)) path = pathJoin(path, key);
  const seen = new Set<object>();
  const search = (node: unknown, at: string, level: number): string | undefined => {
    if (typeof node !== 'object' || node === null || seen.has(node) || level > MAX_DEPTH) return undefined;
    seen.add(node);
    let keys: string[];
    let array: boolean;
    try {
      const proto: unknown = Object.getPrototypeOf(node);
      array = proto === Array.prototype;
      // Only plain objects and arrays are walked; anything else is rejected before it is read.
      if (!array && proto !== Object.prototype && proto !== null) return undefined;
      keys = Object.keys(node);
    } catch {
      return at;
    }
    for (const key of keys) {
      const child = pathJoin(at, array && /^\d+$/.test(key) ? Number(key) : key);
      let value: unknown;
      try {
        value = (node as Record<string, unknown>)[key];
      } catch {
        return child;
      }
      const found = search(value, child, level + 1);
      if (found !== undefined) return found;
    }
    return undefined;
  };
  return search(walk.stack[depth], path, depth);
}
