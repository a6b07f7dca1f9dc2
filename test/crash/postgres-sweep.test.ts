import { afterAll, describe } from 'vitest';
import { PostgresStore } from 'statefold/postgres';
import { describeStoreSweep } from '../support/store-sweep.js';
import { PG_SKIP_LINE, dropTables, freshTable, pgTestUrl } from '../support/pg-env.js';

/**
 * Crash points of PostgresStore. A store operation is one statement, its own transaction, which
 * lands whole or not at all: a crash falls before the statement reaches the server (nothing
 * landed), or after it committed and before the answer (landed, not acknowledged); a process
 * SIGKILLed in the middle of one is in postgres-kill.test.ts, a connection lost in the middle of
 * one in test/adapters/postgres.test.ts. This runs the engine's crash-point sweep
 * (test/crash/crash-sweep.test.ts) on a PostgresStore, every operation crashing both before and
 * after it lands, as sqlite-sweep.test.ts does on SQLite.
 */

const url = pgTestUrl();
if (url === undefined) console.log(PG_SKIP_LINE);
const describePg = url === undefined ? describe.skip : describe;

const stores: PostgresStore[] = [];
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  if (url !== undefined)
    await dropTables(
      url,
      stores.map((s) => s.table),
    );
});
function freshStore(): PostgresStore {
  const store = new PostgresStore({ connectionString: url!, table: freshTable('sweep') });
  stores.push(store);
  return store;
}

// The engine's crash-point sweep, on a PostgresStore: one table per seed, one stream per case.
describeStoreSweep({ name: 'postgres', seeds: [1, 2, 3, 4], create: freshStore, run: describePg });
