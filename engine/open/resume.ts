/**
 * Where an engine that has claimed a stream starts from: the newest committed checkpoint (its
 * head, its state seeded into the capturer, its effect ledger), the key new checkpoints are sealed
 * with, and whether the first of them must be a base.
 */
import { captureValue, createCapturer, type Capturer } from '../capture/index.js';
import { EMPTY_LEDGER, type Ledger } from '../effects/ledger.js';
import { isStatefoldError, StatefoldError } from '../errors.js';
import type { SealingKey } from '../format/keyring.js';
import type { ResolvedEngineOptions } from '../options.js';
import { readChain, type ReadChain } from '../restore/read-chain.js';
import { claimStream, type Claim } from './claim.js';
import { vanished } from '../log/read.js';
import { withRepairHint } from './damaged.js';
import type { Opened } from './opened.js';
import { repair } from './repair.js';
import { EMPTY_HEAD, type Head } from '../writer/head.js';
import type { CommittedView } from '../log/committed.js';
import { tailKey } from '../log/listing.js';
import { readFrame } from '../log/read.js';
import { assertReadable, storedSchema } from '../schema.js';
import { thaw } from '../value.js';

export type { Opened, Repair } from './opened.js';

/** Claims made by one open whose listed chain was deleted before it could be read, before it gives up. */
const MAX_OPEN_ATTEMPTS = 4;

/** Claims the stream and reads where the engine starts from. */
export async function claimAndResume(
  options: ResolvedEngineOptions,
  sealing: SealingKey | undefined,
): Promise<{ claim: Claim; opened: Opened }> {
  for (let attempt = 1; ; attempt++) {
    const claim = await claimStream(options.store, options.keys, options.limits, options.repair, (view) =>
      checkSchema(options, view),
    );
    try {
      return { claim, opened: await resume(options, claim, sealing) };
    } catch (err) {
      // The chain the claim listed was deleted before it could be read (deleteStream ran
      // meanwhile): claim again, from what the stream holds now.
      if (!vanished(err) || attempt >= MAX_OPEN_ATTEMPTS) throw err;
    }
  }
}

/** Reads the newest chain below the claim's fence, and what the engine needs to go on writing it. */
export async function resume(
  options: ResolvedEngineOptions,
  claim: Claim,
  sealing: SealingKey | undefined,
): Promise<Opened> {
  const capturer = createCapturer(options.updates);
  // A new stream starts with no effects.
  if (claim.view.slots.length === 0)
    // Below its first commit's seq (1, or the floor of a stream recreated after an interrupted delete).
    return {
      head: { ...EMPTY_HEAD, seq: claim.seq - 1 },
      capturer,
      ledger: EMPTY_LEDGER,
      sealing,
      needBase: false,
    };
  let chain: ReadChain<unknown>;
  try {
    chain = await readChain<unknown>(options.store, claim.view, undefined, options.limits, {
      schema: options.schema,
      op: 'open',
    });
  } catch (err) {
    if (!isStatefoldError(err, 'CORRUPT')) throw err;
    if (options.repair) return repair(options, claim, sealing, err);
    throw withRepairHint(err);
  }
  capturer.seed(upcastChecked(chain, options));
  const { crc, baseSeq, baseBytes, deltaBytes } = chain;
  const head: Head = {
    seq: chain.restored.seq,
    crc,
    state: capturer.state,
    meta: chain.metaBytes,
    baseSeq,
    baseBytes,
    deltaBytes,
    span: chain.span,
  };
  // After a key rotation the first checkpoint is a base in the new key: from then on the newest
  // chain needs only that key, and the old one only history (retired once gc deletes that history).
  // (A chain can mix keys: fillers are sealed with the key of the engine that claimed.)
  const rotated = sealing !== undefined && [...chain.keyIds].some((id) => id !== sealing.id);
  // A chain holds one schema version: a state upcast (or read as stored from a newer version) is
  // written on as a base in this code's.
  const { version, readableFrom } = chain.stored;
  const reshaped = version !== options.schema.version || readableFrom !== options.schema.readableFrom;
  return { head, capturer, ledger: chain.ledger, sealing, needBase: rotated || reshaped };
}

/**
 * Before the claim fences: SCHEMA_TOO_NEW when the newest checkpoint is too new for this code,
 * and when it is older, its chain read and upcast, so that a migration that throws rejects
 * MIGRATION_FAILED with nothing written (the read is done again after the fence, from what the
 * claim found then). Nothing read for a stream in this code's version.
 */
async function checkSchema(options: ResolvedEngineOptions, view: CommittedView): Promise<void> {
  const newest = view.slots[view.slots.length - 1];
  if (newest === undefined) return;
  const frame =
    view.tailSlot === newest && view.tailFrame !== undefined
      ? view.tailFrame
      : await (view.frames?.get(newest.seq) ??
          readFrame(
            options.store,
            options.keys,
            newest.seq,
            tailKey(newest),
            options.limits,
            undefined,
            view.log.bodies,
          ));
  const at = { op: 'open', stream: options.keys.stream, seq: newest.seq, key: tailKey(newest) };
  assertReadable(frame.header, options.schema, at);
  if (storedSchema(frame.header).version >= options.schema.version) return;
  try {
    const chain = await readChain<unknown>(options.store, view, undefined, options.limits, {
      schema: options.schema,
      op: 'open',
    });
    upcastChecked(chain, options);
  } catch (err) {
    // Damage is the claim's and repair's to handle, after the fence, as without a schema.
    if (isStatefoldError(err, 'CORRUPT') && options.repair) return;
    throw isStatefoldError(err, 'CORRUPT') ? withRepairHint(err) : err;
  }
}

/**
 * The restored state an engine starts from: when migrations made it, checked as a checkpoint
 * would check it and copied (a migration may return what cannot be stored, or objects it shares),
 * a failure being MIGRATION_FAILED with the stream and seq.
 */
function upcastChecked(chain: ReadChain<unknown>, options: ResolvedEngineOptions): unknown {
  const { state, seq } = chain.restored;
  if (chain.stored.version >= options.schema.version) return state;
  try {
    return thaw(captureValue(state, '$'));
  } catch (err) {
    throw new StatefoldError(
      'MIGRATION_FAILED',
      `open stream ${JSON.stringify(options.keys.stream)} seq ${seq}: the migrations to schema version ${options.schema.version} returned a state that cannot be checkpointed: ${(err as Error).message}`,
      { stream: options.keys.stream, seq, cause: err },
    );
  }
}
