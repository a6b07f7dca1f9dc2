/**
 * The storage interface every statefold store implements: keys and bytes only.
 *
 * A store knows nothing about streams, checkpoints or frames; the engine owns key naming.
 * Keys are non-empty strings of `/`-separated segments made of `[A-Za-z0-9._~-]`, never `.` or
 * `..`, at most 1,024 bytes (`isValidKey` in kit/keys.ts checks them).
 *
 * Contracts every store keeps (the conformance suite in `statefold/testing` checks them):
 * - Missing is one thing everywhere: `get` of an absent key resolves `undefined`; `delete` of an
 *   absent key resolves quietly.
 * - Failures other than "absent" or "already exists" reject with a StatefoldError of code
 *   `STORAGE` naming the operation and key, with the underlying error as `cause`.
 */
export interface Store {
  /** Reads the whole object at `key`; resolves `undefined` when there is none. */
  get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined>;

  /**
   * Creates `key` with `body` only if no object exists at `key`, atomically: readers see either
   * no object or the whole body, never a part. Resolves `true` when this call created it and
   * `false` when an object was already there (whoever wrote it). Of concurrent callers on one key,
   * exactly one gets `true`. When it resolves `true` the object is durable. `body` may be a view
   * into a larger buffer (a slice of Node's pool): read it through `byteOffset` and `byteLength`,
   * and copy the bytes it keeps: a kept view holds on to the whole buffer.
   */
  putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean>;

  /**
   * Lists the keys that start with `prefix`, in ascending order of their UTF-8 bytes, only those
   * after `startAfter` when it is given, at most `limit` of them when it is given. Objects being
   * written but not yet created are not listed.
   */
  list(prefix: string, options?: ListOptions): Promise<string[]>;

  /**
   * Optional: the objects whose keys start with `prefix`, each with its whole body, as `list`
   * with the same options followed by a `get` of each key, in one call (an object deleted in
   * between is left out). Stores that can answer it in one request (one query) implement it; the
   * engine then reads a chain's objects together with their keys instead of listing first and
   * reading after. The bodies may be views: the caller does not keep or mutate them.
   */
  scan?(prefix: string, options?: ListOptions): Promise<ScannedObject[]>;

  /** Deletes the object at `key`; resolves quietly when there is none. */
  delete(key: string, options?: StoreOptions): Promise<void>;
  /**
   * Removes what the store keeps under `prefix` besides keys (temp files of writes that crashed,
   * empty directories), never a key. `deleteStream` calls it once every key under `prefix` is
   * deleted. A store that keeps nothing but its keys resolves at once (after checking `signal`).
   */
  removeLeftovers(prefix: string, options?: StoreOptions): Promise<void>;
}

/** One object of `Store.scan`: its key and its bytes. */
export interface ScannedObject {
  key: string;
  body: Uint8Array;
}

/** Options every store operation takes. */
export interface StoreOptions {
  /** Aborts the operation; it then rejects `ABORTED` with the signal's reason as `cause` (never `STORAGE`). */
  signal?: AbortSignal;
}

/** Options of `Store.list`. */
export interface ListOptions extends StoreOptions {
  /** Only keys strictly greater than this one (in UTF-8 byte order) are listed. */
  startAfter?: string;
  /**
   * At most this many keys, the first ones in order: a page, to be continued with `startAfter` set
   * to the last key returned. A store may return more (stores written before this option return
   * every key); callers take a result longer than `limit` as the whole rest of the listing.
   */
  limit?: number;
}
