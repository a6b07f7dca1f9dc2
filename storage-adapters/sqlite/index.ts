/**
 * SqliteStore: every object a row of one SQLite database file, with group commit. Needs
 * `better-sqlite3` (12.x), an optional peer dependency: without it, importing `statefold/sqlite`
 * fails with one message that says what to install.
 * @module statefold/sqlite
 */
import * as path from 'node:path';
import './binding.js';
import type { ListOptions, Store, StoreOptions } from '../store.js';
import { StatefoldError, describeValue } from '../errors.js';
import { assertKey, assertPrefix, storageError, throwIfAborted } from '../kit/index.js';
import { isDamage } from './database.js';
import { StoreThread, ThreadError, type Outcome } from './thread.js';
import type { Answer, ThreadData } from './worker.js';

/** Options of `new SqliteStore(...)`. */
export interface SqliteStoreOptions {
  /** The database file; created (with its directory) on first write, its `-wal` and `-shm` files beside it. */
  path: string;
  /**
   * SQLite's `synchronous` level. `'full'` (the default): the WAL is fsynced at every commit, so a
   * write that resolved survives a power loss. `'normal'`: the WAL is fsynced only when it is
   * checkpointed into the database, which saves the fsync of each commit; a process crash loses
   * nothing, but a power loss or an OS crash can lose the last transactions that resolved (the
   * stream then restores an older checkpoint, and a fenced writer may find its slot free again).
   * The database is never corrupted either way.
   */
  synchronous?: 'full' | 'normal';
  /**
   * How long a write waits for another process's transaction on the same file before it fails
   * STORAGE (`SQLITE_BUSY`, "database is locked"). Default 5,000 ms.
   */
  busyTimeoutMs?: number;
}

/** What `SqliteStore.stats()` reports, counted since the store was made. */
export interface SqliteStoreStats {
  /** Transactions committed. */
  transactions: number;
  /** Writes (creates and deletes) committed in them: with group commit, more than `transactions`. */
  writes: number;
  /** Reads (gets and lists) answered. */
  reads: number;
}

/** The default of `SqliteStoreOptions.busyTimeoutMs`. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

/**
 * A store in one SQLite database file, through better-sqlite3 (an optional peer dependency):
 * one row per object. Calls run on two threads of the store's own, started when first needed:
 * a writer that puts every write that arrives together (in one turn of the event loop, or while
 * its previous transaction commits) into one transaction, one WAL append and one fsync for all
 * of them, each call still getting its own result; and a reader, so that reads do not wait behind
 * a commit's fsync. `putIfAbsent` is an insert of a unique key in that transaction: atomic,
 * create-if-absent across every process that opens the file (SQLite's write lock orders them).
 * A file that is not a database, is cut short or damaged rejects CORRUPT naming the path.
 * The `-wal` file beside it is part of the database until the last connection closes: the writes
 * since the last checkpoint are there alone. Copy or move the files together, or after `close()`.
 * A `-wal` that is lost or damaged cannot be told from one that is not there: SQLite drops the
 * commits from its first bad frame on, silently (keys they created read as absent again).
 * The file must be on a local filesystem (WAL needs shared memory between the processes). There
 * is nothing to remove besides keys, so `removeLeftovers` does nothing.
 */
export class SqliteStore implements Store {
  /** The database file, resolved. */
  readonly path: string;
  readonly #writer: StoreThread;
  readonly #reader: StoreThread;
  readonly #stats: SqliteStoreStats = { transactions: 0, writes: 0, reads: 0 };
  #warmed = false;

  constructor(options: SqliteStoreOptions) {
    if (options === null || typeof options !== 'object' || typeof options.path !== 'string' || options.path === '') {
      throw new StatefoldError('INVALID_ARGUMENT', 'new SqliteStore: options.path must be a non-empty path');
    }
    const synchronous = options.synchronous ?? 'full';
    if (synchronous !== 'full' && synchronous !== 'normal') {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new SqliteStore: options.synchronous must be 'full' or 'normal' (got ${describeValue(synchronous)})`,
      );
    }
    const busy = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
    if (!Number.isSafeInteger(busy) || busy < 0 || busy > 2 ** 31 - 1) {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new SqliteStore: options.busyTimeoutMs must be a whole number of milliseconds, 0 or more (got ${describeValue(busy)})`,
      );
    }
    this.path = path.resolve(options.path);
    const settings = {
      path: this.path,
      synchronous: synchronous === 'full' ? 'FULL' : 'NORMAL',
      busyTimeoutMs: busy,
    } as const;
    const count = (answer: Answer): void => {
      this.#stats.transactions += answer.transactions;
    };
    this.#writer = new StoreThread({ ...settings, role: 'write' } satisfies ThreadData, count);
    this.#reader = new StoreThread({ ...settings, role: 'read' } satisfies ThreadData, count);
  }

  /**
   * At the first call, both threads start: an engine's open lists and reads (the reader), then
   * writes its fence (the writer); started one after the other they cost a fresh process two
   * thread starts in a row.
   */
  #warm(): void {
    if (this.#warmed) return;
    this.#warmed = true;
    this.#reader.warm();
    this.#writer.warm();
  }

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    throwIfAborted('get', key, options?.signal);
    this.#warm();
    const reply = await this.#call('get', key, this.#reader.call({ op: 'get', key }));
    // A read handed to the thread runs to its end; an abort meanwhile still fails the call.
    throwIfAborted('get', key, options?.signal);
    this.#stats.reads++;
    const body = (reply as Extract<Outcome, { body: unknown }>).body;
    return body === null ? undefined : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    assertKey('putIfAbsent', key);
    throwIfAborted('putIfAbsent', key, options?.signal);
    this.#warm();
    let copy: Uint8Array;
    try {
      // A copy of its own, handed over to the thread: a view into Node's pool would otherwise be
      // cloned with its whole slab. A detached body throws here, before anything is sent.
      copy = new Uint8Array(body);
    } catch (err) {
      throw storageError('putIfAbsent', key, err);
    }
    const reply = await this.#call(
      'putIfAbsent',
      key,
      this.#writer.call({ op: 'put', key, body: copy }, copy.buffer as ArrayBuffer),
    );
    this.#stats.writes++;
    return (reply as Extract<Outcome, { created: boolean }>).created;
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    assertPrefix(prefix, options?.limit);
    throwIfAborted('list', prefix, options?.signal);
    this.#warm();
    const reply = await this.#call(
      'list',
      prefix,
      this.#reader.call({ op: 'list', prefix, after: options?.startAfter, limit: options?.limit }),
    );
    throwIfAborted('list', prefix, options?.signal);
    this.#stats.reads++;
    return (reply as Extract<Outcome, { keys: string[] }>).keys;
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    throwIfAborted('delete', key, options?.signal);
    this.#warm();
    await this.#call('delete', key, this.#writer.call({ op: 'delete', key }));
    this.#stats.writes++;
  }

  /**
   * Counts since the store was made: transactions committed, the writes in them, reads answered.
   * `writes / transactions` is how many writes each commit carried (group commit).
   */
  stats(): SqliteStoreStats {
    return { ...this.#stats };
  }

  /** Nothing to remove: the store keeps nothing under a stream but its rows (no temp files, no directories). */
  async removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    throwIfAborted('removeLeftovers', prefix, options?.signal);
  }

  /**
   * Answers the calls in flight, then closes the database (the last connection of the processes
   * folds the WAL into the file and removes it) and stops the threads. Calls after it reject STORAGE.
   */
  async close(): Promise<void> {
    // The reader first: the writer's connection, closed last, is the one that checkpoints the WAL
    // into the file (a query_only connection does not).
    // No write is accepted once close is called, though the writer closes last.
    this.#writer.refuse();
    await this.#reader.close();
    await this.#writer.close();
  }

  /** A thread's reply, or its failure as CORRUPT (a damaged file) or STORAGE, naming the call and the file. */
  async #call(op: string, key: string, reply: Promise<Outcome>): Promise<Outcome> {
    try {
      return await reply;
    } catch (err) {
      const code = err instanceof ThreadError ? err.sqliteCode : undefined;
      const what = `${op} ${key}: ${this.path}: ${(err as Error).message}`;
      if (isDamage(code))
        throw new StatefoldError('CORRUPT', `${what} (the database file is damaged)`, {
          key,
          path: this.path,
          cause: err,
        });
      throw new StatefoldError('STORAGE', what, { key, path: this.path, cause: err });
    }
  }
}
