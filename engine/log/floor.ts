/**
 * Retention floors (`<stream>/gc/<seq>`): every seq below a floor is deleted history. Retention
 * and deleteStream write one before they delete anything below it, so a reader or claim that
 * finds a key missing, or a create that finds one free, can tell deleted history from a gap by
 * listing the floors afterwards.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import type { StreamKeys } from './keys.js';

/** Tries of putFloor while the store keeps answering "exists" with nothing to read. */
const FLOOR_TRIES = 6;

/**
 * Writes the floor `seq` and resolves once it is readable: created now, or there already. A store
 * may answer "exists" for a create that lost a race to a write still landing, or one that then
 * failed (S3's 409): nothing below the floor may be deleted before the floor is really there.
 */
export async function putFloor(store: Store, keys: StreamKeys, seq: number, signal?: AbortSignal): Promise<void> {
  const key = keys.floor(seq);
  const opt = signal ? { signal } : undefined;
  for (let attempt = 0; attempt < FLOOR_TRIES; attempt++) {
    if (await store.putIfAbsent(key, new Uint8Array(0), opt)) return;
    if ((await store.get(key, opt)) !== undefined) return;
    await new Promise((r) => setTimeout(r, 10 * 2 ** attempt * (0.5 + Math.random())));
  }
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
