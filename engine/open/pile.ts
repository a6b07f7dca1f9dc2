/**
 * Piled fences. Every open writes a fence into the slot after the newest checkpoint; an open that
 * finds a fence there (an engine that never committed, such as a process in a crash loop) fences
 * the key after it, in the same slot. Fences are never deleted (the engine each one fenced may
 * still be alive), and opens, restores and listings read every key of that slot, from the hinted
 * base on: each restart without a commit would make all of them list one more key, until the next
 * base. So an open that finds more than MAX_PILED_FENCES there moves the hint past them: it
 * commits a filler in that slot (the state it restored, no operations), then a base of the same
 * state in the next slot, and waits for that base's hint. The stream's seq goes up by two with no
 * change of state, as after a claim that filled slots below its fence.
 */

import { isStatefoldError } from '../errors.js';

/** Fences an open lets pile up in one slot before it commits past them. */
export const MAX_PILED_FENCES = 64;

/** What settling a pile needs of the engine that just opened. */
export interface PileHost {
  /** Commits the restored state again (a checkpoint with no operations). */
  unchanged(): Promise<unknown>;
  /** Makes the next commit a base. */
  requireBase(): void;
  /** Resolves when the hint of the last base is written (or failed to be). */
  hinted(): Promise<void>;
}

/** Commits a filler and a base past the piled fences (see above). */
export async function settlePile(host: PileHost): Promise<void> {
  try {
    await host.unchanged();
    host.requireBase();
    await host.unchanged();
    await host.hinted();
  } catch (err) {
    // Only speed is at stake: the engine is left as after any failed checkpoint (a FENCED one
    // stays fenced, and `engine.fenced` says so; after a store error its next checkpoint is a
    // base) and the pile stays listed. Anything else is a bug, not a store's failure.
    if (!isStatefoldError(err)) throw err;
  }
}
