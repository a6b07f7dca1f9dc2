import { afterAll, describe, it } from 'vitest';
import pg from 'pg';
import { PostgresStore } from 'statefold/postgres';
import { validateSaver } from '../support/langgraph-validation.js';
import { PG_SKIP_LINE, freshTable, pgTestUrl } from '../support/pg-env.js';

// LangGraph's checkpointer validation suite through StatefoldSaver on PostgresStore: one pool, a
// table of its own for each checkpointer the suite asks for (its list tests count every thread).
const url = pgTestUrl();
if (url === undefined) {
  console.log(PG_SKIP_LINE);
  describe.skip('StatefoldSaver (postgres)', () => it('needs STATEFOLD_PG_URL', () => {}));
} else {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => {});
  const tables: string[] = [];
  afterAll(async () => {
    for (const table of tables) await pool.query(`DROP TABLE IF EXISTS "${table}"`);
    await pool.end();
  });
  validateSaver('postgres', () => {
    const table = freshTable('lg');
    tables.push(table);
    return new PostgresStore({ pool, table });
  });
}
