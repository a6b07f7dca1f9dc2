import type { CheckpointEntry, ListedCheckpoint } from 'statefold';

/**
 * The entries of a listing that a test expects to be undamaged, typed as such; throws the first
 * damaged entry's error (which names stream, seq and key) when one is not.
 */
export function verified(entries: readonly ListedCheckpoint[]): CheckpointEntry[] {
  return entries.map((entry) => {
    if (entry.damaged) throw entry.error;
    return entry;
  });
}
