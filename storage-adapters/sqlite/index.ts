/**
 * SqliteStore: every object a row of one SQLite database file, with group commit. Needs
 * `better-sqlite3` (12.x), an optional peer dependency: without it, importing `statefold/sqlite`
 * fails with one message that says what to install.
 * @module statefold/sqlite
 */
import * as path from 'node:path';
import './binding.js';
import type { ListOptions, ScannedObject, Store, StoreOptions } from '../store.js';
import { StatefoldError, describeValue } from '../errors.js';
import { assertKey, assertPrefix, storageError, throwIfAborted } from '../kit/index.js';
import { isDamage, type OpenSettings } from './database.js';
import { Runner, type Answer, type Job } from './runner.js';
import { StoreThread, ThreadError, type Outcome } from './thread.js';
import type { ThreadData } from './worker.js';

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
  /** Of `transactions`, those committed on the store's writer thread (the rest on the main thread). */
  threadTransactions: number;
}

/** The default of `SqliteStoreOptions.busyTimeoutMs`. */
export const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

/** Creates in one turn above which writes go to the writer thread (a load of many streams). */
const HERE_LIMIT = 4;
/** Writes in one turn above which they go to the writer thread, whatever they are. */
const BATCH_LIMIT = 64;
/** The window over which the main thread's share of time in commits is measured, ms. */
const DUTY_WINDOW_MS = 200;
/** The share of that window spent committing on the main thread above which writes go to the thread. */
const DUTY_LIMIT = 0.5;

interface Queued {
  job: Job;
  resolve(outcome: Outcome): void;
  reject(err: Error): void;
}

/**
 * A store in one SQLite database file, through better-sqlite3 (an optional peer dependency):
 * one row per object. Every write that arrives together (in one turn of the event loop, or while
 * the previous transaction commits) goes into one transaction, one WAL append and one fsync for
 * all of them, each call still getting its own result (group commit). Where calls run:
 * - Reads run on the main thread, on a connection of their own (in WAL mode a reader never waits
 *   for a writer): a query is microseconds, a hop to a thread and back ~0.1 ms.
 * - Writes run on the main thread too while the load is light, so that a process that resumes a
 *   stream or an agent that commits now and then starts no thread (starting one costs tens of
 *   milliseconds); the main thread then waits for each commit's fsync, as SqliteSaver does. Writes
 *   go to a writer thread of the store's own (started the first time) instead once a turn brings
 *   more than 4 creates (many streams committing) or 64 writes, or commits took more than half of
 *   the main thread's time over 200 ms, or another process holds the write lock; they stay there
 *   until the thread has had no write for 200 ms: the fsyncs and the waits leave the main thread,
 *   and what arrives while one runs joins the next transaction. A write goes to the main thread
 *   only when none is on the thread, so transactions keep the order of the calls.
 * `putIfAbsent` is an insert of a unique key in that transaction: atomic,
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
  /** The main thread's connections: one for reads (query_only, never creates the file), one for writes. */
  readonly #reader: Runner;
  readonly #here: Runner;
  readonly #stats: SqliteStoreStats = { transactions: 0, writes: 0, reads: 0, threadTransactions: 0 };
  /** Writes of this turn, to run on the main thread (undefined when none are waiting). */
  #batch: Queued[] | undefined;
  /** Whether the writer thread was started (the first time the load asked for it). */
  #threaded = false;
  /** Writes sent to the writer thread and not answered yet. */
  #inThread = 0;
  /** Whether a transaction committed on the main thread in this turn: the turn's later writes then wait for its end. */
  #hot = false;
  #closed = false;
  /** The current duty window: when it started, and the ms spent committing on the main thread in it. */
  #window = { start: 0, busy: 0 };
  /** When writes were last sent to the thread (ms): later ones go there too until a window has passed. */
  #loadedAt = -Infinity;

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
    const settings: OpenSettings = {
      path: this.path,
      synchronous: synchronous === 'full' ? 'FULL' : 'NORMAL',
      busyTimeoutMs: busy,
    };
    const count = (answer: Answer): void => {
      this.#stats.transactions += answer.transactions;
      this.#stats.threadTransactions += answer.transactions;
    };
    this.#writer = new StoreThread({ ...settings, role: 'write' } satisfies ThreadData, count);
    this.#reader = new Runner(settings, 'read');
    // No wait for the lock on the main thread: a batch that finds it taken goes to the thread, which waits.
    this.#here = new Runner({ ...settings, busyTimeoutMs: 0 }, 'write');
  }

  /** Whether the store's writer thread was started (see the class doc): false until the load asks for it. */
  get threaded(): boolean {
    return this.#threaded;
  }

  /** Runs a read on the main thread's read connection. */
  #read(job: Job): Promise<Outcome> {
    if (this.#closed) return Promise.reject(new ThreadError('the store is closed', undefined));
    return settled(this.#reader.run([job]).replies[0]!);
  }

  /** Queues a write in this turn's batch. */
  #write(job: Job): Promise<Outcome> {
    if (this.#closed) return Promise.reject(new ThreadError('the store is closed', undefined));
    return new Promise((resolve, reject) => {
      if (this.#batch === undefined) {
        this.#batch = [];
        // The first writes of a turn commit once its microtasks are done. After a commit here, the
        // turn's later writes (other engines' checkpoints, each a few awaits behind) wait for the
        // turn's end, so that they commit together instead of one transaction each.
        if (this.#hot) setImmediate(this.#flush);
        else queueMicrotask(this.#flush);
      }
      this.#batch.push({ job, resolve, reject });
    });
  }

  /** Runs this turn's writes: in one transaction here, or (a heavy load, see the class doc) on the writer thread. */
  readonly #flush = (): void => {
    const batch = this.#batch;
    this.#batch = undefined;
    if (batch === undefined || batch.length === 0) return;
    const now = performance.now();
    if (now - this.#window.start > DUTY_WINDOW_MS) this.#window = { start: now, busy: 0 };
    let creates = 0;
    for (const q of batch) if (q.job.op === 'put') creates++;
    const loaded =
      creates > HERE_LIMIT || batch.length > BATCH_LIMIT || this.#window.busy > DUTY_LIMIT * DUTY_WINDOW_MS;
    if (!loaded && this.#inThread === 0 && now - this.#loadedAt > DUTY_WINDOW_MS) {
      const answer = this.#here.run(batch.map((q) => q.job));
      this.#window.busy += performance.now() - now;
      const busy =
        answer.unrun === true &&
        answer.replies.some((r) => 'error' in r && r.error.code?.startsWith('SQLITE_BUSY') === true);
      if (!busy) {
        if (!this.#hot) {
          this.#hot = true;
          setImmediate(() => (this.#hot = false));
        }
        this.#stats.transactions += answer.transactions;
        answer.replies.forEach((reply, i) => settled(reply).then(batch[i]!.resolve, batch[i]!.reject));
        return;
      }
      // Another connection (another process) holds the write lock: the thread waits for it, not this one.
    }
    // On the thread, writes stay there until it has had none for a window.
    this.#loadedAt = performance.now();
    this.#threaded = true;
    for (const q of batch) {
      const body = q.job.op === 'put' ? q.job.body : undefined;
      this.#inThread++;
      this.#writer
        .call(q.job, body?.buffer as ArrayBuffer | undefined)
        .finally(() => this.#inThread--)
        .then(q.resolve, q.reject);
    }
  };

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    throwIfAborted('get', key, options?.signal);
    const reply = await this.#call('get', key, this.#read({ id: 0, op: 'get', key }));
    throwIfAborted('get', key, options?.signal);
    this.#stats.reads++;
    const body = (reply as Extract<Outcome, { body: unknown }>).body;
    return body === null ? undefined : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    assertKey('putIfAbsent', key);
    throwIfAborted('putIfAbsent', key, options?.signal);
    let copy: Uint8Array;
    try {
      // A copy of its own, handed over to the thread: a view into Node's pool would otherwise be
      // cloned with its whole slab. A detached body throws here, before anything is sent.
      copy = new Uint8Array(body);
    } catch (err) {
      throw storageError('putIfAbsent', key, err);
    }
    const reply = await this.#call('putIfAbsent', key, this.#write({ id: 0, op: 'put', key, body: copy }));
    this.#stats.writes++;
    return (reply as Extract<Outcome, { created: boolean }>).created;
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    return ((await this.#range('list', prefix, options)) as Extract<Outcome, { keys: string[] }>).keys;
  }

  async scan(prefix: string, options?: ListOptions): Promise<ScannedObject[]> {
    return ((await this.#range('scan', prefix, options)) as Extract<Outcome, { objects: unknown }>).objects;
  }

  /** A key range (`prefix`, after `startAfter`, at most `limit`): its keys, or its keys and bytes. */
  async #range(op: 'list' | 'scan', prefix: string, options: ListOptions | undefined): Promise<Outcome> {
    assertPrefix(prefix, options?.limit);
    throwIfAborted(op, prefix, options?.signal);
    const reply = await this.#call(
      op,
      prefix,
      this.#read({ id: 0, op, prefix, after: options?.startAfter, limit: options?.limit }),
    );
    throwIfAborted(op, prefix, options?.signal);
    this.#stats.reads++;
    return reply;
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    throwIfAborted('delete', key, options?.signal);
    await this.#call('delete', key, this.#write({ id: 0, op: 'delete', key }));
    this.#stats.writes++;
  }

  /**
   * Counts since the store was made: transactions committed (and how many of them on the writer
   * thread), the writes in them, reads answered. `writes / transactions` is how many writes each
   * commit carried (group commit).
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
    if (this.#closed) return this.#writer.close();
    // Writes called before close still run; none is accepted after it.
    this.#flush();
    this.#closed = true;
    this.#writer.refuse();
    // The reader first: a writer's connection, closed last, is the one that checkpoints the WAL
    // into the file (a query_only connection does not); the main thread's last of all.
    this.#reader.close();
    await this.#writer.close();
    this.#here.close();
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

/** A reply as a call's outcome: resolved, or rejected with SQLite's message and code. */
function settled(reply: Answer['replies'][number]): Promise<Outcome> {
  if ('error' in reply) return Promise.reject(new ThreadError(reply.error.message, reply.error.code));
  return Promise.resolve(reply);
}
