/** The one table of a PostgresStore: its name, the statement that creates it, and creating it once. */
import { StatefoldError, describeValue } from '../errors.js';
import type { PgPool } from './driver.js';

/** The table a PostgresStore uses when none is named. */
export const DEFAULT_TABLE = 'statefold_objects';

/** A plain SQL identifier: a letter or `_`, then letters, digits or `_`, at most 63 bytes (PostgreSQL's limit). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * The table name as SQL, quoted: `name` or `schema.name`, each part a plain identifier (quoted, so
 * its case is kept). Anything else rejects INVALID_ARGUMENT: the name goes into SQL text.
 */
export function quoteTable(table: unknown, where: string): string {
  const parts = typeof table === 'string' ? table.split('.') : [];
  if (parts.length < 1 || parts.length > 2 || !parts.every((p) => IDENTIFIER.test(p))) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `${where}: table must be a name or schema.name of letters, digits and _ (not starting with a digit, at most 63 each) (got ${describeValue(table)})`,
    );
  }
  return parts.map((p) => `"${p}"`).join('.');
}

/**
 * The statement that creates a PostgresStore's table (if it is not there), for teams that run
 * their own migrations: run it once, then give the store `createSchema: false`. One row per
 * object; the key's collation "C" makes the primary key's order the keys' UTF-8 byte order, which
 * listing follows.
 */
export function postgresSchema(table: string = DEFAULT_TABLE): string {
  const name = quoteTable(table, 'postgresSchema');
  return `CREATE TABLE IF NOT EXISTS ${name} (key text COLLATE "C" PRIMARY KEY, body bytea NOT NULL)`;
}

/**
 * SQLSTATEs a CREATE TABLE IF NOT EXISTS fails with when it loses a race with another session's
 * creation of the same table (IF NOT EXISTS is checked before the catalog rows are written):
 * unique_violation on the catalog, duplicate_table, and duplicate_object ("type ... already
 * exists", the table's row type). Each is taken as done only once the table is seen there.
 */
const CREATED_BY_ANOTHER = new Set(['23505', '42P07', '42710']);

/**
 * Creates a PostgresStore's table on `pool` if it is not there (postgresSchema's statement; a
 * concurrent creation by another process counts as done), for a migration step or a setup script.
 */
export async function createPostgresSchema(pool: PgPool, table: string = DEFAULT_TABLE): Promise<void> {
  await new SchemaOnce(pool, table).ready();
}

/** Creates the table (postgresSchema's statement) once per store; a failure is thrown to this call and retried by the next. */
export class SchemaOnce {
  #done = false;
  #pending: Promise<void> | undefined;
  readonly #sql: string | undefined;
  readonly #name: string | undefined;

  /** `table` undefined: nothing to create (a store with `createSchema: false`). */
  constructor(
    private readonly pool: PgPool,
    table: string | undefined,
  ) {
    if (table === undefined) this.#done = true;
    else {
      this.#sql = postgresSchema(table);
      this.#name = quoteTable(table, 'postgresSchema');
    }
  }

  ready(): Promise<void> | undefined {
    if (this.#done) return undefined;
    this.#pending ??= this.#create().then(
      () => {
        this.#done = true;
      },
      (err: unknown) => {
        this.#pending = undefined;
        throw err;
      },
    );
    return this.#pending;
  }

  async #create(): Promise<void> {
    try {
      await this.pool.query(this.#sql!);
    } catch (err) {
      if (!CREATED_BY_ANOTHER.has((err as { code?: string } | undefined)?.code ?? '')) throw err;
      // Another session created it meanwhile, or something else holds the name (a type, an index): then say so.
      const { rows } = await this.pool.query(
        `SELECT coalesce((SELECT relkind IN ('r', 'p') FROM pg_class WHERE oid = to_regclass($1)), false) AS there`,
        [this.#name],
      );
      if ((rows[0] as { there?: boolean } | undefined)?.there !== true) throw err;
    }
  }
}
