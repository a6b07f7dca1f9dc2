import type { ListOptions, Store, StoreOptions } from '../store.js';
import { assertKey, assertPrefix, throwIfAborted } from '../kit/index.js';

/** A store that keeps objects in this process's memory: for tests, benchmarks and short-lived agents. */
export class MemoryStore implements Store {
  readonly #objects = new Map<string, Uint8Array>();
  /** Keys in ascending order, kept sorted so that list is a binary search plus a slice. */
  readonly #sorted: string[] = [];

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    throwIfAborted('get', key, options?.signal);
    const body = this.#objects.get(key);
    // A copy, so that a caller that mutates what it read cannot change what is stored.
    return body === undefined ? undefined : body.slice();
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    assertKey('putIfAbsent', key);
    throwIfAborted('putIfAbsent', key, options?.signal);
    if (this.#objects.has(key)) return false;
    this.#objects.set(key, Uint8Array.prototype.slice.call(body));
    this.#sorted.splice(lowerBound(this.#sorted, key), 0, key);
    return true;
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    assertPrefix(prefix, options?.limit);
    throwIfAborted('list', prefix, options?.signal);
    const after = options?.startAfter;
    let from = lowerBound(this.#sorted, prefix);
    if (after !== undefined && after >= prefix) {
      from = lowerBound(this.#sorted, after);
      if (this.#sorted[from] === after) from++;
    }
    const out: string[] = [];
    const limit = options?.limit ?? Infinity;
    for (let i = from; i < this.#sorted.length && out.length < limit; i++) {
      const key = this.#sorted[i]!;
      if (!key.startsWith(prefix)) break;
      out.push(key);
    }
    return out;
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    throwIfAborted('delete', key, options?.signal);
    if (!this.#objects.delete(key)) return;
    const at = lowerBound(this.#sorted, key);
    if (this.#sorted[at] === key) this.#sorted.splice(at, 1);
  }

  /** Number of objects held (for tests and benchmarks). */
  get size(): number {
    return this.#objects.size;
  }

  /** Total bytes held (for tests and benchmarks). */
  get bytes(): number {
    let total = 0;
    for (const body of this.#objects.values()) total += body.byteLength;
    return total;
  }
}

function lowerBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
