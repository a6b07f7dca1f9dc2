/**
 * node-postgres (`pg`), loaded here and nowhere else in statefold. It is an optional peer
 * dependency: without it, importing `statefold/postgres` fails with one message that says what to
 * install, and the rest of statefold never loads it. The types below are the little of `pg` the
 * store uses, so that statefold's declarations do not need `@types/pg`: a `pg.Pool` fits them.
 */
import { loadPeer } from '../peers.js';

/** What `import 'statefold/postgres'` throws when `pg` is not installed. */
export const NOT_INSTALLED =
  'statefold/postgres needs the optional peer dependency pg, which is not installed: run npm install pg';

/** A query's answer, as `pg` gives it. */
export interface PgResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

/** A query as node-postgres takes it in one object, with its own read timeout (`query_timeout`, ms). */
export interface PgQuery {
  text: string;
  values?: unknown[];
  query_timeout?: number;
}

/**
 * How long a statement may go unanswered before it is taken as lost (its outcome then resolved
 * as any lost answer's): a connection whose peer vanished without a reset (a host gone, a silent
 * middlebox) would otherwise hold the call, and every write queued behind it, forever.
 */
export const QUERY_TIMEOUT_MS = 60_000;

/** A connection checked out of a pool (`pg.PoolClient`). */
export interface PgPoolClient {
  query(query: PgQuery): Promise<PgResult>;
  query(text: string, values?: unknown[]): Promise<PgResult>;
  /** Back to the pool; with an error, the pool closes the connection instead of reusing it. */
  release(err?: Error | boolean): void;
  /** The server backend's process id (from the server at connect time). */
  processID?: number | null;
  on(event: 'error', listener: (err: Error) => void): unknown;
  off(event: 'error', listener: (err: Error) => void): unknown;
}

/** A pool of connections (`pg.Pool`): what `PostgresStoreOptions.pool` takes. */
export interface PgPool {
  query(query: PgQuery): Promise<PgResult>;
  query(text: string, values?: unknown[]): Promise<PgResult>;
  connect(): Promise<PgPoolClient>;
  end(): Promise<void>;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

interface PgModule {
  Pool: new (config: {
    connectionString: string;
    connectionTimeoutMillis?: number;
    allowExitOnIdle?: boolean;
    keepAlive?: boolean;
    keepAliveInitialDelayMillis?: number;
  }) => PgPool;
}

const pg = loadPeer<PgModule & { default?: PgModule }>('pg', NOT_INSTALLED);

/** `pg.Pool`: loaded as CommonJS, or as the default export of its ES module wrapper. */
export const Pool: PgModule['Pool'] = pg.Pool ?? pg.default!.Pool;
