// The store that the kill and race children, and the harness checking on them, open at `where`:
// a FileStore directory, or with kind 'sqlite' a SqliteStore database file. The children read the
// kind from STATEFOLD_TEST_STORE (the harness sets it), so that their arguments stay as they were.
import { FileStore } from 'statefold';

/** The kind the harness asked this child for: 'file' (the default) or 'sqlite'. */
export const childKind = process.env.STATEFOLD_TEST_STORE === 'sqlite' ? 'sqlite' : 'file';

/** A store of `kind` at `where`. */
export async function storeAt(kind, where) {
  if (kind !== 'sqlite') return new FileStore({ dir: where });
  const { SqliteStore } = await import('statefold/sqlite');
  return new SqliteStore({ path: where });
}
