/**
 * better-sqlite3, loaded here when `statefold/sqlite` is imported. It is an optional peer
 * dependency: without it, the import fails with one message that says what to install, and the
 * rest of statefold never loads it. Its native addon is loaded now too (about 10 ms, as
 * SqliteSaver's import pays it), not at the store's first call, where it would delay a restarted
 * agent's first read; an addon built for another Node fails the import, saying what to run.
 */
import { createRequire } from 'node:module';

/** What `import 'statefold/sqlite'` throws when better-sqlite3 is not installed. */
const NOT_INSTALLED =
  'statefold/sqlite needs the optional peer dependency better-sqlite3, which is not installed: run npm install better-sqlite3';

const require = createRequire(import.meta.url);
try {
  require.resolve('better-sqlite3');
} catch (err) {
  if ((err as NodeJS.ErrnoException | undefined)?.code !== 'MODULE_NOT_FOUND') throw err;
  throw new Error(NOT_INSTALLED, { cause: err });
}
try {
  // An in-memory database: loads the addon, touches no file.
  const Database = require('better-sqlite3') as new (file: string) => { close(): void };
  new Database(':memory:').close();
} catch (err) {
  throw new Error(
    `statefold/sqlite could not load better-sqlite3 (${(err as Error)?.message}): if it was built for another Node, run npm rebuild better-sqlite3`,
    { cause: err },
  );
}
