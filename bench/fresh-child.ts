/**
 * One read from a fresh process, as a restarted agent would do it first thing: either the engine's
 * own open + state of a stream (`engine`), or a LangGraph thread's latest checkpoint through a new
 * saver (`langgraph`). Timed from constructing the store (or saver) until the state is in hand,
 * after the modules are loaded: what a resume costs, not what Node's start-up does.
 * Arguments: one JSON object (FreshTask); prints the FreshResult as JSON on stdout.
 */
import { FileStore, SnapshotEngine, type Store } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';
import { PostgresStore } from 'statefold/postgres';
import { StatefoldSaver } from 'statefold/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import type { FreshResult, FreshTask } from './fresh.js';

const task = JSON.parse(process.argv[2] ?? '') as FreshTask;

function storeOf(where: FreshTask['where']): Store {
  if (where.store === 'file') return new FileStore({ dir: where.path });
  if (where.store === 'sqlite') return new SqliteStore({ path: where.path });
  if (where.store === 'postgres') return new PostgresStore({ connectionString: where.path, table: where.schema! });
  throw new Error(`fresh read: no store for ${JSON.stringify(where)}`);
}

async function run(): Promise<FreshResult> {
  if (task.kind === 'engine') {
    const t0 = performance.now();
    const store = storeOf(task.where);
    const engine = await SnapshotEngine.open({ store, stream: task.stream });
    const state = engine.state;
    const ms = performance.now() - t0;
    if (state === undefined || engine.seq !== task.seq)
      throw new Error(`fresh open: seq ${engine.seq}, expected ${task.seq} with a state`);
    await engine.close();
    if (store instanceof SqliteStore) await store.close();
    return { ms, seq: engine.seq };
  }
  const config = { configurable: { thread_id: task.thread } };
  const w = task.where;
  const t0 = performance.now();
  let close: () => Promise<void>;
  let tuple;
  if (w.store === 'sqlite-saver') {
    const saver = SqliteSaver.fromConnString(w.path);
    tuple = await saver.getTuple(config);
    close = async () => saver.db.close();
  } else if (w.store === 'postgres-saver') {
    const saver = PostgresSaver.fromConnString(w.path, { schema: w.schema! });
    tuple = await saver.getTuple(config);
    close = () => saver.end();
  } else {
    const store = storeOf(w);
    const saver = new StatefoldSaver({ store });
    tuple = await saver.getTuple(config);
    close = async () => {
      await saver.close();
      if (store instanceof SqliteStore || store instanceof PostgresStore) await store.close();
    };
  }
  const ms = performance.now() - t0;
  if (tuple?.checkpoint.id !== task.checkpointId)
    throw new Error(`fresh getTuple: got ${tuple?.checkpoint.id}, expected ${task.checkpointId}`);
  await close();
  return { ms };
}

process.stdout.write(`${JSON.stringify(await run())}\n`);
