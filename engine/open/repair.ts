/**
 * Opening a stream whose newest chain is damaged (`repair: true`): the engine starts from the
 * newest intact checkpoint, its first checkpoint a base at the next seq. How the claim fences
 * such a log is in damaged.ts.
 */
import { createCapturer } from '../capture/index.js';
import type { Ledger } from '../effects/ledger.js';
import { StatefoldError } from '../errors.js';
import type { SealingKey } from '../format/keyring.js';
import { encodeValue } from '../format/values.js';
import { listLog } from '../log/listing.js';
import type { ResolvedEngineOptions } from '../options.js';
import { restoreIntact } from '../restore/skip-damaged.js';
import type { Claim } from './claim.js';
import type { Head } from '../writer/head.js';
import type { Opened } from './opened.js';

/**
 * Opens on the newest intact checkpoint below a damaged newest chain: its state, meta and effect
 * ledger, with the head still at the newest committed seq, so the first checkpoint is a base at the
 * next seq and every restore from then on reads past the damage.
 */
export async function repair(
  options: ResolvedEngineOptions,
  claim: Claim,
  sealing: SealingKey | undefined,
  err: StatefoldError,
): Promise<Opened> {
  const newest = claim.view.slots[claim.view.slots.length - 1]!.seq;
  const log = await listLog(options.store, options.keys);
  const restored = await restoreIntact<unknown>(options.store, log, newest, options.limits, {
    schema: options.schema,
    op: 'open',
  });
  const capturer = createCapturer(options.updates);
  capturer.seed(restored.state);
  const skipped: number[] = [];
  for (let s = restored.seq + 1; s <= newest; s++) skipped.push(s);
  const head: Head = {
    seq: newest,
    crc: 0,
    state: capturer.state,
    meta: restored.meta === undefined ? undefined : encodeValue(restored.meta),
    baseSeq: newest,
    baseBytes: 0,
    deltaBytes: 0,
  };
  const ledger: Ledger = new Map(restored.effects.map((r) => [r.token, r]));
  const damage = restored.damage.length > 0 ? restored.damage : [err];
  return { head, capturer, ledger, sealing, needBase: true, repaired: { restoredSeq: restored.seq, skipped, damage } };
}
