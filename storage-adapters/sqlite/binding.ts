/**
 * better-sqlite3, checked here when `statefold/sqlite` is imported. It is an optional peer
 * dependency: without it, the import fails with one message that says what to install, and the
 * rest of statefold never loads it. The store's threads load it themselves (database.ts).
 */

/** What `import 'statefold/sqlite'` throws when better-sqlite3 is not installed. */
const NOT_INSTALLED =
  'statefold/sqlite needs the optional peer dependency better-sqlite3, which is not installed: run npm install better-sqlite3';

try {
  await import('better-sqlite3');
} catch (err) {
  // Only the package itself missing: a broken install (an addon built for another Node) keeps its own error.
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const missing =
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
    String((err as Error).message).includes("'better-sqlite3'");
  if (!missing) throw err;
  throw new Error(NOT_INSTALLED, { cause: err });
}
