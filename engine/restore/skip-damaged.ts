/**
 * Restore with `skipDamaged`: when the checkpoint asked for, or one its chain needs, is damaged or
 * missing, fall back to the newest intact checkpoint before it and report what was passed over.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import type { FrameReading } from '../format/frame.js';
import { committedView, type CommittedView } from '../log/committed.js';
import type { LogListing } from '../log/listing.js';
import { vanished } from '../log/read.js';
import { readChain, type ChainOptions } from './read-chain.js';
import type { Restored, RestoreOptions } from './types.js';

/** Restores the newest intact checkpoint at or before `seq`, passing over damaged ones. */
export async function restoreIntact<S>(
  store: Store,
  log: LogListing,
  seq: number | undefined,
  limits: FrameReading,
  options: Omit<RestoreOptions, 'schema'> & ChainOptions,
): Promise<Restored<S>> {
  const damage: StatefoldError[] = [];
  let view: CommittedView;
  try {
    view = await committedView(store, log, limits, options.signal);
  } catch (err) {
    if (!isStatefoldError(err, 'CORRUPT')) throw err;
    // The last slot cannot be read, so it cannot be told committed: pass it over.
    damage.push(err);
    const slots = log.slots.slice(0, -1);
    view = { log, slots, tailSlot: undefined, tailFrame: undefined };
  }
  const newest = view.slots[view.slots.length - 1]?.seq ?? 0;
  const asked = seq ?? Math.max(newest, log.slots[log.slots.length - 1]?.seq ?? 0);
  let target = Math.min(seq ?? newest, newest);
  const oldest = view.slots[0]?.seq ?? 1;
  if (seq !== undefined && seq < oldest) return readChain<S>(store, view, seq, limits, options).then((r) => r.restored);
  while (target >= oldest && target > 0) {
    try {
      const { restored } = await readChain<S>(store, view, target, limits, options);
      const skipped: number[] = [];
      for (let s = restored.seq + 1; s <= asked; s++) skipped.push(s);
      return { ...restored, skipped, damage };
    } catch (err) {
      if (vanished(err) || (!isStatefoldError(err, 'CORRUPT') && !isStatefoldError(err, 'NOT_FOUND'))) throw err;
      if (isStatefoldError(err, 'NOT_FOUND') && err.seq === undefined) throw err;
      damage.push(err);
      // Everything from the damaged seq up depends on it (or is it): try just below.
      const at = err.seq ?? target;
      target = Math.min(target, at) - 1;
    }
  }
  const stream = log.keys.stream;
  throw new StatefoldError(
    'CORRUPT',
    `stream ${JSON.stringify(stream)}: no intact checkpoint at or before seq ${asked} (${damage.length} damaged object(s): ${damage.map((d) => d.message).join('; ')})`,
    { stream, cause: damage[0] },
  );
}
