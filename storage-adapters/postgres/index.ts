/**
 * PostgresStore: every object a row of one PostgreSQL table, with group commit. Needs `pg`
 * (node-postgres 8.x), an optional peer dependency: without it, importing `statefold/postgres`
 * fails with one message that says what to install.
 * @module statefold/postgres
 */
import type { ListOptions, ScannedObject, Store, StoreOptions } from '../store.js';
import { StatefoldError, describeCause, describeValue } from '../errors.js';
import { assertKey, assertPrefix, throwIfAborted } from '../kit/index.js';
import { GroupCommit, isLost, type CommitStats, type Write } from './commit.js';
import { Pool, QUERY_TIMEOUT_MS, type PgPool, type PgResult } from './driver.js';
import { DEFAULT_TABLE, SchemaOnce, quoteTable } from './schema.js';

export { DEFAULT_TABLE, createPostgresSchema, postgresSchema } from './schema.js';
export type { PgPool, PgPoolClient, PgQuery, PgResult } from './driver.js';

/** Options of `new PostgresStore(...)`: a pool of your own, or a connection string. */
export type PostgresStoreOptions = (
  | {
      /** A `pg.Pool` (or one that fits PgPool): the store uses it and leaves it open at `close()`. */
      pool: PgPool;
      connectionString?: undefined;
    }
  | {
      /** `postgres://user:password@host:port/database`: the store makes a pool of its own and ends it at `close()`. */
      connectionString: string;
      pool?: undefined;
    }
) & {
  /** The table, `name` or `schema.name` (letters, digits, `_`). Default `statefold_objects`. */
  table?: string;
  /**
   * Whether the store creates its table (if it is not there) before its first call. Default true;
   * false for teams that run `postgresSchema(table)` in their own migrations.
   */
  createSchema?: boolean;
  /**
   * How long a statement may go unanswered before it is taken as lost (ms; default 60,000): a
   * write's outcome is then resolved as any lost answer's, a read is sent once more.
   */
  queryTimeoutMs?: number;
};

/** What `PostgresStore.stats()` reports, counted since the store was made. */
export interface PostgresStoreStats extends CommitStats {
  /** Reads (gets, lists and scans) answered. */
  reads: number;
}

/** The connect timeout of a pool the store makes from a connection string, ms. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * A store in one PostgreSQL table, through node-postgres (`pg`, an optional peer dependency): one
 * row per object, `key text COLLATE "C" PRIMARY KEY, body bytea` (see `postgresSchema`).
 * - `putIfAbsent` is `INSERT ... ON CONFLICT (key) DO NOTHING`: atomic create-if-absent for every
 *   process and machine on the database; of concurrent creates of one key exactly one gets `true`.
 * - Group commit: the writes that arrive together (in one turn of the event loop, or while the
 *   previous statement commits) go to the server as one statement, so one transaction and one
 *   WAL flush for all of them, each call still getting its own result. A batch that mixes creates
 *   and deletes is cut where one kind follows the other: each run is one statement, in the calls'
 *   order. A statement that fails fails every call in it; none is acknowledged.
 * - A connection lost after a statement was sent is an unknown outcome: once that connection's
 *   backend is gone (waited for, then terminated after 2 s), the keys are read back: a create whose
 *   key holds exactly its bytes succeeded, one whose key holds other bytes found it there; when
 *   none landed the statement is sent again. Deletes are sent again. When the backend cannot be
 *   known gone (the server out of reach), the call fails STORAGE: its outcome is unknown, and
 *   nothing is sent again that could race it. A statement unanswered for 60 s is taken as lost
 *   (a peer that vanished without a reset). Behind a pooler in transaction
 *   mode (PgBouncer) the backend cannot be waited for: use a session-mode or direct connection.
 * - `list` reads a key range on the primary key (`key >= prefix AND key < next(prefix)`), in the
 *   keys' byte order, `startAfter` and `limit` in the query.
 * Durability is the server's: with PostgreSQL's defaults (`fsync`, `synchronous_commit = on`) a
 * write that resolved is on disk. There is nothing to remove besides keys, so `removeLeftovers`
 * does nothing.
 */
export class PostgresStore implements Store {
  /** The table, as given (or the default). */
  readonly table: string;
  readonly #pool: PgPool;
  readonly #ownsPool: boolean;
  readonly #sql: string;
  readonly #schema: SchemaOnce;
  readonly #commit: GroupCommit;
  #reads = 0;
  readonly #timeoutMs: number;
  #closed = false;
  /** Calls made and not settled: `close()` answers them before it ends the pool. */
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(options: PostgresStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        'new PostgresStore: options must be { pool } or { connectionString }',
      );
    }
    const { pool, connectionString } = options;
    if ((pool === undefined) === (connectionString === undefined)) {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        'new PostgresStore: give exactly one of options.pool (a pg.Pool) and options.connectionString',
      );
    }
    if (pool !== undefined && (typeof pool !== 'object' || typeof pool.query !== 'function')) {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new PostgresStore: options.pool must be a pg.Pool (got ${describeValue(pool)})`,
      );
    }
    if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString === '')) {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new PostgresStore: options.connectionString must be a non-empty string (got ${describeValue(connectionString)})`,
      );
    }
    const createSchema = options.createSchema ?? true;
    if (typeof createSchema !== 'boolean') {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new PostgresStore: options.createSchema must be true or false (got ${describeValue(createSchema)})`,
      );
    }
    this.table = options.table ?? DEFAULT_TABLE;
    this.#sql = quoteTable(this.table, 'new PostgresStore');
    this.#ownsPool = pool === undefined;
    // allowExitOnIdle: idle connections of a pool the store made do not keep the process alive
    // (a program that is done exits without close(), as it does on the other stores).
    this.#pool =
      pool ??
      new Pool({
        connectionString: connectionString!,
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
        allowExitOnIdle: true,
        // A connection whose peer vanished without a reset is found out (besides QUERY_TIMEOUT_MS).
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
      });
    // An idle connection of our own pool that the server drops must not crash the process (pg
    // emits it on the pool); the next call on it fails and says why.
    if (this.#ownsPool) this.#pool.on('error', () => {});
    this.#schema = new SchemaOnce(this.#pool, createSchema ? this.table : undefined);
    const timeout = options.queryTimeoutMs ?? QUERY_TIMEOUT_MS;
    if (typeof timeout !== 'number' || !(timeout > 0) || !Number.isFinite(timeout)) {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new PostgresStore: options.queryTimeoutMs must be a positive number of milliseconds (got ${describeValue(timeout)})`,
      );
    }
    this.#timeoutMs = timeout;
    this.#commit = new GroupCommit(this.#pool, this.#sql, timeout);
  }

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    throwIfAborted('get', key, options?.signal);
    const { rows } = await this.#run('get', key, () =>
      this.#read(`SELECT body FROM ${this.#sql} WHERE key = $1`, [key]),
    );
    throwIfAborted('get', key, options?.signal);
    this.#reads++;
    return rows.length === 0 ? undefined : (rows[0]!.body as Buffer);
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    assertKey('putIfAbsent', key);
    throwIfAborted('putIfAbsent', key, options?.signal);
    let copy: Buffer;
    try {
      // A copy of its own: the caller may reuse its buffer once the call is made.
      copy = Buffer.from(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength));
    } catch (err) {
      throw this.#error('putIfAbsent', key, err);
    }
    return (await this.#write('putIfAbsent', { op: 'put', key, body: copy })) === true;
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    const rows = await this.#range('list', 'key', prefix, options);
    return rows.map((r) => r.key as string);
  }

  /** `list` with each key's bytes: one query (`SELECT key, body`) for a chain's objects and their keys. */
  async scan(prefix: string, options?: ListOptions): Promise<ScannedObject[]> {
    const rows = await this.#range('scan', 'key, body', prefix, options);
    return rows.map((r) => ({ key: r.key as string, body: r.body as Buffer }));
  }

  /** The rows of a key range (`prefix`, after `startAfter`, at most `limit`), in key order. */
  async #range(
    op: 'list' | 'scan',
    columns: string,
    prefix: string,
    options: ListOptions | undefined,
  ): Promise<Record<string, unknown>[]> {
    assertPrefix(prefix, options?.limit);
    throwIfAborted(op, prefix, options?.signal);
    const where: string[] = [];
    const values: unknown[] = [];
    if (prefix !== '') {
      values.push(prefix, nextPrefix(prefix));
      where.push('key >= $1', 'key < $2');
    }
    const after = options?.startAfter;
    if (after !== undefined) {
      if (typeof after !== 'string') {
        throw new StatefoldError(
          'INVALID_ARGUMENT',
          `${op} ${prefix}: startAfter must be a string (got ${describeValue(after)})`,
        );
      }
      values.push(after);
      where.push(`key > $${values.length}`);
    }
    let text = `SELECT ${columns} FROM ${this.#sql}${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY key`;
    if (options?.limit !== undefined) {
      values.push(options.limit);
      text += ` LIMIT $${values.length}`;
    }
    const { rows } = await this.#run(op, prefix, () => this.#read(text, values));
    throwIfAborted(op, prefix, options?.signal);
    this.#reads++;
    return rows;
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    throwIfAborted('delete', key, options?.signal);
    await this.#write('delete', { op: 'delete', key });
  }

  /** Nothing to remove: the store keeps nothing under a stream but its rows. */
  async removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    throwIfAborted('removeLeftovers', prefix, options?.signal);
  }

  /**
   * Counts since the store was made: statements committed (`transactions`), the writes in them
   * (`writes / transactions` is how many each commit carried), lost answers resolved, reads.
   */
  stats(): PostgresStoreStats {
    return { ...this.#commit.stats, reads: this.#reads };
  }

  /**
   * Answers the writes in flight, then ends the pool if the store made it (from a connection
   * string); a pool you gave stays open. Calls after it reject STORAGE.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#inFlight]);
    await this.#commit.idle();
    if (this.#ownsPool) await this.#pool.end();
  }

  /** A read, sent once more on a new connection when its connection was lost (a server restart leaves dead ones). */
  async #read(text: string, values: unknown[]): Promise<PgResult> {
    const query = { text, values, query_timeout: this.#timeoutMs };
    try {
      return await this.#pool.query(query);
    } catch (err) {
      if (!isLost(err)) throw err;
      return this.#pool.query(query);
    }
  }

  async #write(op: string, write: Write): Promise<boolean | undefined> {
    return this.#run(op, write.key, () => this.#commit.push(write));
  }

  /** Runs `call` once the schema is there; its failure as STORAGE naming the call, the key and the table. */
  async #run<T>(op: string, key: string, call: () => Promise<T>): Promise<T> {
    if (this.#closed) throw this.#error(op, key, new Error('the store is closed'));
    const done = (async () => {
      await this.#schema.ready();
      return await call();
    })();
    this.#inFlight.add(done);
    try {
      return await done;
    } catch (err) {
      throw this.#error(op, key, err);
    } finally {
      this.#inFlight.delete(done);
    }
  }

  #error(op: string, key: string, err: unknown): StatefoldError {
    if (err instanceof StatefoldError) return err;
    return new StatefoldError('STORAGE', `${op} ${key}: postgres table ${this.table}: ${describeCause(err)}`, {
      key,
      cause: err,
    });
  }
}

/**
 * The smallest string above every key that starts with `prefix`, in byte order: its last character
 * one up. Keys and prefixes are ASCII below `~` + 1 (kit/keys.ts), so the result is ASCII too.
 */
function nextPrefix(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}
