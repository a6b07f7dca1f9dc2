/**
 * statefold/langgraph: a LangGraph JS checkpointer that stores each thread as a statefold stream of
 * deltas. It needs `@langchain/langgraph-checkpoint`, an optional peer dependency: without it,
 * importing `statefold/langgraph` fails with one message that says what to install.
 */
import type * as Saver from './saver.js';

/** What `import 'statefold/langgraph'` throws when LangGraph's checkpoint package is not installed. */
const NOT_INSTALLED =
  'statefold/langgraph needs the optional peer dependencies @langchain/langgraph-checkpoint and @langchain/core, which are not installed: run npm install @langchain/langgraph-checkpoint @langchain/core';

try {
  await import('@langchain/langgraph-checkpoint');
} catch (err) {
  // Only the peers themselves missing: a broken install (a missing dependency of theirs) keeps its own error.
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const message = String((err as Error).message);
  const missing =
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
    (message.includes("'@langchain/langgraph-checkpoint'") || message.includes("'@langchain/core"));
  if (!missing) throw err;
  throw new Error(NOT_INSTALLED, { cause: err });
}
const saver: typeof Saver = await import('./saver.js');

/** A LangGraph checkpointer that stores each (thread_id, checkpoint_ns) as a statefold stream (see README, LangGraph). */
export const StatefoldSaver: typeof Saver.StatefoldSaver = saver.StatefoldSaver;
export type StatefoldSaver = Saver.StatefoldSaver;
export type { StatefoldSaverOptions } from './config.js';
export type { Plain, StoredCheckpoint, ThreadMeta, ThreadState, WriteRecord, Writes } from './codec.js';
