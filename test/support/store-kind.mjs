// The store that the kill and race children, and the harness checking on them, open at `where`:
// a FileStore directory; with kind 'sqlite' a SqliteStore database file; with kind 'postgres' a
// PostgresStore, `where` being `<postgres:// URL>#<table>`. The children read the kind from
// STATEFOLD_TEST_STORE (the harness sets it), so that their arguments stay as they were.
import { FileStore } from 'statefold';

/** The kind the harness asked this child for: 'file' (the default), 'sqlite' or 'postgres'. */
export const childKind = ['sqlite', 'postgres'].includes(process.env.STATEFOLD_TEST_STORE)
  ? process.env.STATEFOLD_TEST_STORE
  : 'file';

/** The application_name of the children's PostgreSQL connections (afterChildExit waits for them). */
const CHILD_APP = 'statefold-test-child';

function postgresWhere(where) {
  const cut = where.lastIndexOf('#');
  const url = new URL(where.slice(0, cut));
  return { url, table: where.slice(cut + 1) };
}

/** A store of `kind` at `where`. */
export async function storeAt(kind, where) {
  if (kind === 'postgres') {
    const { PostgresStore } = await import('statefold/postgres');
    const { url, table } = postgresWhere(where);
    if (process.env.STATEFOLD_TEST_STORE === 'postgres') url.searchParams.set('application_name', CHILD_APP);
    return new PostgresStore({ connectionString: url.toString(), table });
  }
  if (kind !== 'sqlite') return new FileStore({ dir: where });
  const { SqliteStore } = await import('statefold/sqlite');
  return new SqliteStore({ path: where });
}

/**
 * After a child was killed: on PostgreSQL, waits (bounded, 10 s) until the server has no backend
 * of a child left. A statement a killed process sent may still commit after it died, until its
 * backend notices; the checks that follow must see what it did, as a process that starts after a
 * crash does once the server has dropped the dead one's connections.
 */
export async function afterChildExit(kind, where) {
  if (kind !== 'postgres') return;
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: postgresWhere(where).url.toString() });
  client.on('error', () => {});
  await client.connect();
  try {
    for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
      const { rows } = await client.query(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
        [CHILD_APP],
      );
      if (rows[0].n === 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('a killed child still had a PostgreSQL backend after 10 s');
  } finally {
    await client.end();
  }
}
