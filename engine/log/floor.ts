/**
 * Retention floors (`<stream>/gc/<seq>`): every seq below a floor is deleted history. Retention
 * and deleteStream write one before they delete anything below it, so a reader or claim that
 * finds a key missing, or a create that finds one free, can tell deleted history from a gap by
 * listing the floors afterwards.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import { createOrRead } from './create.js';
import type { StreamKeys } from './keys.js';

/**
 * Writes the floor `seq` and resolves once it is readable: created now, or there already. A store
 * may answer "exists" for a create that lost a race to a write still landing, or one that then
 * failed (S3's 409): nothing below the floor may be deleted before the floor is really there.
 */
export async function putFloor(store: Store, keys: StreamKeys, seq: number, signal?: AbortSignal): Promise<void> {
  const key = keys.floor(seq);
  // Every floor is empty: any that reads back is this one.
  if ((await createOrRead(store, key, new Uint8Array(0), signal)) !== undefined) return;
  throw new StatefoldError(
    'STORAGE',
    `stream ${JSON.stringify(keys.stream)}: writing floor ${key}: the store keeps reporting it exists but it cannot be read`,
    { stream: keys.stream, seq, key },
  );
}

/**
 * Whether a floor above `seq` is recorded now: then whatever a listing lacks (or a create found
 * free) at `seq` is deleted history.
 */
export async function floorAbove(store: Store, keys: StreamKeys, seq: number, signal?: AbortSignal): Promise<boolean> {
  const floors = await store.list(keys.floors, signal ? { signal } : undefined);
  return floors.some((k) => (keys.parseFloor(k) ?? 0) > seq);
}
