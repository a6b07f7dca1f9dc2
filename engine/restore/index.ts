/**
 * Restore: list the part of the stream's log that holds the checkpoint asked for (the newest
 * committed one by default: from the hinted base; a given seq: from the base its frame names),
 * read its chain (chain.ts) and fold it; with `skipDamaged`, fall back past damage
 * (skip-damaged.ts). Listing checkpoints is in list.ts.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptionalBoolean, assertOptions, assertSeq, assertStore, readingOf } from '../args.js';
import { committedView } from '../log/committed.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { newestView } from '../log/hint.js';
import { StreamKeys } from '../log/keys.js';
import { listLog } from '../log/listing.js';
import { seqView } from '../log/range.js';
import { relistOnVanish } from '../log/read.js';
import { readChain } from './read-chain.js';
import { resolveSchema } from '../schema.js';
import { restoreIntact } from './skip-damaged.js';
import type { Restored, RestoreOptions } from './types.js';

export { listCheckpoints } from './list.js';
export type {
  CheckpointEntry,
  DamagedCheckpointEntry,
  ListCheckpointsOptions,
  ListedCheckpoint,
  Restored,
  RestoreOptions,
} from './types.js';

/** Restores the state of a stream's newest committed checkpoint, or of `options.seq`. */
export async function restore<S = unknown>(
  store: Store,
  stream: string,
  options: RestoreOptions = {},
): Promise<Restored<S>> {
  assertStore(store, 'restore');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'restore', keys.stream);
  if (options.seq !== undefined) assertSeq(options.seq, keys.stream, 'restore');
  assertOptionalBoolean(options.skipDamaged, 'skipDamaged', 'restore', keys.stream);
  const limits = readingOf(options, 'restore');
  const chain = { ...options, schema: resolveSchema(options.schema, 'restore', keys.stream), op: 'restore' };
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'restore'));
  return relistOnVanish(async () => {
    if (!options.skipDamaged) {
      // The newest checkpoint needs only its chain: list from the hinted base (log/hint.ts).
      // A given seq needs its own chain: list from the base its frame names (log/range.ts).
      const view =
        options.seq === undefined
          ? await newestView(store, keys, limits, options.signal)
          : ((await seqView(store, keys, options.seq, limits, options.signal)) ??
            (await committedView(store, await listLog(store, keys, options.signal), limits, options.signal)));
      return (await readChain<S>(store, view, options.seq, limits, chain)).restored;
    }
    return restoreIntact<S>(store, await listLog(store, keys, options.signal), options.seq, limits, chain);
  });
}
