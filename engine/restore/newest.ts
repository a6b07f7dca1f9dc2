/**
 * newestCheckpoint: the newest committed checkpoint's entry, as `listCheckpoints` with `reverse`
 * and `limit: 1` gives it, with a restore of that checkpoint that reads nothing more: on a store
 * that scans, the listing that found the newest seq brought its chain's bytes too. For a caller
 * that needs the newest meta first and its state only sometimes (a lookup by checkpoint id that
 * turns out to be the newest), in the rounds a restore alone takes.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertStore, readingOf } from '../args.js';
import { isStatefoldError } from '../errors.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { newestView } from '../log/hint.js';
import { StreamKeys } from '../log/keys.js';
import { tailKey } from '../log/listing.js';
import { readFrame, vanished } from '../log/read.js';
import { resolveSchema } from '../schema.js';
import { restore } from './index.js';
import { entry, listCheckpoints } from './list.js';
import { readChain } from './read-chain.js';
import type { CheckpointEntry, Restored, RestoreOptions } from './types.js';

/** What `newestCheckpoint` found. */
export interface NewestCheckpoint<S = unknown> {
  /** The newest committed checkpoint, as `listCheckpoints` lists it. */
  entry: CheckpointEntry;
  /** Its state, as `restore(store, stream, { ...options, seq: entry.seq })` gives it, from what was read when possible. */
  restore(): Promise<Restored<S>>;
}

/**
 * The newest committed checkpoint of `stream` (undefined when it has none) and a restore of it.
 * Rejects as `listCheckpoints` does; a damaged newest checkpoint rejects CORRUPT (listCheckpoints
 * would list it as damaged). `options` are those of `restore` (the schema applies to the restore).
 */
export async function newestCheckpoint<S = unknown>(
  store: Store,
  stream: string,
  options: Omit<RestoreOptions, 'seq' | 'skipDamaged'> = {},
): Promise<NewestCheckpoint<S> | undefined> {
  assertStore(store, 'newestCheckpoint');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'newestCheckpoint', keys.stream);
  const limits = readingOf(options, 'newestCheckpoint');
  const schema = resolveSchema(options.schema, 'newestCheckpoint', keys.stream);
  const guarded = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'newestCheckpoint'));
  const { signal } = options;
  const again = (seq: number) => restore<S>(store, stream, { ...options, seq });
  try {
    const view = await newestView(guarded, keys, limits, signal, 'scan');
    const slot = view.slots[view.slots.length - 1];
    if (slot === undefined) return undefined;
    const frame =
      slot === view.tailSlot && view.tailFrame !== undefined
        ? view.tailFrame
        : await readFrame(guarded, keys, slot.seq, tailKey(slot), limits, signal, view.log.bodies);
    return {
      entry: entry(keys, slot, frame),
      restore: async () => {
        try {
          return (await readChain<S>(guarded, view, slot.seq, limits, { ...options, schema, op: 'restore' })).restored;
        } catch (err) {
          // Deleted since it was listed (retention moved on): restore says what is there now.
          if (vanished(err)) return again(slot.seq);
          throw err;
        }
      },
    };
  } catch (err) {
    // What listCheckpoints does then: list the whole log (a hint that does not hold, damage at the top).
    if (!vanished(err) && !isStatefoldError(err, 'CORRUPT')) throw err;
    const [newest] = await listCheckpoints(store, stream, { ...options, reverse: true, limit: 1 });
    if (newest === undefined) return undefined;
    if (newest.damaged) throw newest.error;
    return { entry: newest, restore: () => again(newest.seq) };
  }
}
