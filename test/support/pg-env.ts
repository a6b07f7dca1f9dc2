/** The PostgreSQL server the PostgresStore tests run against, from STATEFOLD_PG_URL. */

/** The one line printed when the PostgreSQL tests are skipped. */
export const PG_SKIP_LINE =
  'PostgreSQL tests skipped: set STATEFOLD_PG_URL=postgres://... to run them; as root: test/support/pg.sh install && eval "$(test/support/pg.sh start)" && npm test';

/**
 * The connection string in STATEFOLD_PG_URL. Undefined when it is not set (the tests skip), except
 * under CI=true, where a missing URL is an error: CI must not pass by skipping.
 */
export function pgTestUrl(): string | undefined {
  const url = process.env.STATEFOLD_PG_URL;
  if (url === undefined || url === '') {
    if (process.env.CI === 'true') {
      throw new Error(
        'STATEFOLD_PG_URL is not set and CI=true: start a server first (eval "$(test/support/pg.sh start)") so the PostgreSQL tests run',
      );
    }
    return undefined;
  }
  if (!/^postgres(ql)?:\/\//.test(url)) throw new Error(`STATEFOLD_PG_URL must be a postgres:// URL (got ${url})`);
  return url;
}

/** A table name of its own for each test (a table per test keeps them apart on one database). */
let counter = 0;
export function freshTable(label: string): string {
  counter++;
  return `t_${label}_${process.pid}_${Date.now().toString(36)}_${counter}`.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 63);
}

/** Drops the tables the tests made (each test file cleans up after itself: one database serves them all). */
export async function dropTables(url: string, tables: Iterable<string>): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    for (const table of new Set(tables)) await client.query(`DROP TABLE IF EXISTS "${table}"`);
  } finally {
    await client.end();
  }
}
