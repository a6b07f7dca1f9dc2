/**
 * statefold/langgraph as `require()` loads it. `require` of an ES module refuses top-level await,
 * which index.ts uses to load the saver after checking the peers; here the saver is loaded through
 * `require` instead (synchronously, the same files). index.ts stays the `import` entry because a
 * loader that transforms modules (vitest's) would otherwise load the saver's engine modules twice.
 */
import { createRequire } from 'node:module';
import type * as Saver from './saver.js';
import { assertPeers } from '../../storage-adapters/kit/index.js';
import { NOT_INSTALLED, PEERS } from './peers.js';

assertPeers(PEERS, NOT_INSTALLED);
const saver = createRequire(import.meta.url)('./saver.js') as typeof Saver;

/** A LangGraph checkpointer that stores each (thread_id, checkpoint_ns) as a statefold stream. */
export const StatefoldSaver: typeof Saver.StatefoldSaver = saver.StatefoldSaver;
export type StatefoldSaver = Saver.StatefoldSaver;
/** The engine schema of a StatefoldSaver's streams, for `statefold migrate` and `migrateStreams`. */
export const saverMigrations: typeof Saver.saverMigrations = saver.saverMigrations;
