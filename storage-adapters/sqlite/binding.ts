/**
 * better-sqlite3, checked here when `statefold/sqlite` is imported. It is an optional peer
 * dependency: without it, the import fails with one message that says what to install, and the
 * rest of statefold never loads it. Only resolved here, not loaded: loading its addon took
 * 10-45 ms, paid at the store's first call, not at import (database.ts).
 */
import { createRequire } from 'node:module';

/** What `import 'statefold/sqlite'` throws when better-sqlite3 is not installed. */
const NOT_INSTALLED =
  'statefold/sqlite needs the optional peer dependency better-sqlite3, which is not installed: run npm install better-sqlite3';

try {
  createRequire(import.meta.url).resolve('better-sqlite3');
} catch (err) {
  if ((err as NodeJS.ErrnoException | undefined)?.code !== 'MODULE_NOT_FOUND') throw err;
  throw new Error(NOT_INSTALLED, { cause: err });
}
