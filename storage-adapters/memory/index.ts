import type { ListOptions, ScannedObject, Store, StoreOptions } from '../store.js';
import sortedBtree from 'sorted-btree';
import { assertKey, assertPrefix, storageError, throwIfAborted } from '../kit/index.js';

/**
 * The B+ tree of sorted-btree: ordered keys with O(log n) inserts, deletes and seeks. A sorted
 * array cost O(n) per insert (a splice), which with thousands of streams in one store grew into
 * most of a checkpoint's cost. It is a CommonJS module marked __esModule: Node's ESM loader gives
 * its module.exports as the default import (the class is its `default`), transpiling loaders give
 * the class itself; both are accepted.
 */
type BTreeClass = typeof sortedBtree.default;
const BTree: BTreeClass = ('default' in sortedBtree ? sortedBtree.default : sortedBtree) as BTreeClass;

/** A store that keeps objects in this process's memory: for tests, benchmarks and short-lived agents. */
export class MemoryStore implements Store {
  /** Objects by key, in ascending key order, so that list is a seek plus a walk. */
  readonly #objects = new BTree<string, Uint8Array>();

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    throwIfAborted('get', key, options?.signal);
    const body = this.#objects.get(key);
    // A copy, so that a caller that mutates what it read cannot change what is stored.
    return body === undefined ? undefined : Uint8Array.prototype.slice.call(body);
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    assertKey('putIfAbsent', key);
    throwIfAborted('putIfAbsent', key, options?.signal);
    // A copy. allocUnsafe puts a small body in a slab of Node's pool rather than an ArrayBuffer of
    // its own: with thousands of engines writing, a million small ArrayBuffers made each major GC
    // longer. A deleted body's memory is freed once every body sharing its slab is gone. `set`
    // throws on a detached body (Buffer.from would quietly store it as empty).
    const copy = Buffer.allocUnsafe(body.byteLength);
    try {
      copy.set(body);
    } catch (err) {
      throw storageError('putIfAbsent', key, err);
    }
    return this.#objects.setIfNotPresent(key, copy);
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    assertPrefix(prefix, options?.limit);
    throwIfAborted('list', prefix, options?.signal);
    return this.#keys(prefix, options);
  }

  async scan(prefix: string, options?: ListOptions): Promise<ScannedObject[]> {
    assertPrefix(prefix, options?.limit);
    throwIfAborted('scan', prefix, options?.signal);
    // Copies, as get gives.
    return this.#keys(prefix, options).map((key) => ({
      key,
      body: Uint8Array.prototype.slice.call(this.#objects.get(key)!),
    }));
  }

  #keys(prefix: string, options?: ListOptions): string[] {
    const after = options?.startAfter;
    // The first key at or after the prefix, or strictly after startAfter when that comes later.
    const from = after !== undefined && after >= prefix ? this.#objects.nextHigherKey(after) : prefix;
    const out: string[] = [];
    if (from === undefined) return out;
    const limit = options?.limit ?? Infinity;
    for (const key of this.#objects.keys(from)) {
      if (out.length >= limit || !key.startsWith(prefix)) break;
      out.push(key);
    }
    return out;
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    throwIfAborted('delete', key, options?.signal);
    this.#objects.delete(key);
  }

  /** Nothing to remove: a MemoryStore holds its keys and nothing else (no temp files, no directories). */
  async removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    throwIfAborted('removeLeftovers', prefix, options?.signal);
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
