/**
 * A LangGraph JS checkpointer that stores each thread as a statefold stream of deltas. It needs
 * `@langchain/langgraph-checkpoint` and `@langchain/core`, optional peer dependencies: without
 * them, importing `statefold/langgraph` fails with one message that says what to install.
 *
 * This file is what the API reference documents: the exports of `statefold/langgraph` as one static
 * module. The entry itself (index.ts, require.ts) loads the saver only after checking the peers.
 * @module statefold/langgraph
 */
export { StatefoldSaver } from './saver.js';
export type { StatefoldSaverOptions } from './config.js';
export { saverMigrations } from './schema.js';
export type { SaverSchema, SaverState } from './schema.js';
export type { Plain, StoredCheckpoint, ThreadMeta, ThreadState, WriteRecord, Writes } from './codec.js';
