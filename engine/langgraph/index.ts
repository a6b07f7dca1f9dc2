/**
 * statefold/langgraph: a LangGraph JS checkpointer that stores each thread as a statefold stream of
 * deltas. Needs `@langchain/langgraph-checkpoint` (an optional peer dependency of statefold).
 */
export { StatefoldSaver } from './saver.js';
export type { StatefoldSaverOptions } from './saver.js';
export type { Plain, StoredCheckpoint, ThreadMeta, ThreadState, WriteRecord, Writes } from './codec.js';
