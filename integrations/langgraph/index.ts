/**
 * statefold/langgraph: a LangGraph JS checkpointer that stores each thread as a statefold stream of
 * deltas. It needs `@langchain/langgraph-checkpoint`, an optional peer dependency: without it,
 * importing `statefold/langgraph` fails with one message that says what to install.
 */
import type * as Saver from './saver.js';
import { assertPeers } from '../../storage-adapters/kit/index.js';
import { NOT_INSTALLED, PEERS } from './peers.js';

assertPeers(PEERS, NOT_INSTALLED);
// A dynamic import (not a static one, which would fail before the check with a bare "Cannot find package").
const saver: typeof Saver = await import('./saver.js');

/** A LangGraph checkpointer that stores each (thread_id, checkpoint_ns) as a statefold stream (see README, LangGraph). */
export const StatefoldSaver: typeof Saver.StatefoldSaver = saver.StatefoldSaver;
export type StatefoldSaver = Saver.StatefoldSaver;
export type { StatefoldSaverOptions } from './config.js';
export type { SaverSchema, SaverState } from './schema.js';
/** The engine schema of a StatefoldSaver's streams, for `statefold migrate` and `migrateStreams` (see docs/langgraph.md). */
export const saverMigrations: typeof Saver.saverMigrations = saver.saverMigrations;
export type { Plain, StoredCheckpoint, ThreadMeta, ThreadState, WriteRecord, Writes } from './codec.js';
