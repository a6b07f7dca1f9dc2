/**
 * Filling: after a claim fenced a slot ahead of a busy writer, every slot below that fence which
 * the writer did not commit is closed, so that seqs stay contiguous: first a fence at its first
 * free key (which retention keeps, so the old writer stays fenced), then a filler checkpoint after
 * it (a delta with no operations, the same state as the seq before). The fences go in at once, so
 * that a writer still committing stops at the first after one round trip; the fillers follow in
 * order, each naming the frame before it.
 */
import type { Store } from '../../storage-adapters/store.js';
import { failure } from '../errors.js';
import { assertUnlocked, encodeFrame, type Frame, type FrameReading } from '../format/frame.js';
import type { SealingKey } from '../format/keyring.js';
import { encodeValue } from '../format/values.js';
import type { CommittedView } from '../log/committed.js';
import type { StreamKeys } from '../log/keys.js';
import { listLog, tailKey, type LogListing } from '../log/listing.js';
import { openFrame, readFrame, unlockFrame } from '../log/read.js';
import { wrapStorage } from '../errors.js';
import { MAX_KEYS_PER_SLOT, createOrRecognise, fenceFrame, putFence, type Identity } from './fence.js';

/**
 * The committed log below this claim's fence, from a listing in which every slot there holds a
 * checkpoint. Whatever later claims wrote above the fence is not this engine's to restore: its
 * first commit finds out.
 */
function viewBelow(log: LogListing, fenceSeq: number): CommittedView {
  return { log, slots: log.slots.filter((s) => s.seq < fenceSeq), tailSlot: undefined, tailFrame: undefined };
}

/** A slot below a claim's fence, once fenced or found committed, or found deleted (see fenceSlot). */
type Fenced = { seq: number; checkpoint: Frame } | { seq: number; fenceEpoch: number } | { seq: number; deleted: true };

/**
 * Makes every slot below `fenceSeq` hold a checkpoint: finds the newest committed checkpoint below
 * it, fences every slot above that one at once (so that a writer still committing stops at the
 * first, after one round trip whatever the distance), then fills each slot nobody committed with
 * a filler, in order (each names the frame before it). Returns the committed log below the fence,
 * or undefined when the claim must list again: its fence lies in deleted history, or nothing is
 * committed below it any more (the stream was deleted meanwhile).
 */
export async function fillBelow(
  store: Store,
  keys: StreamKeys,
  id: Identity,
  fenceSeq: number,
  limits: FrameReading,
  from?: number,
): Promise<CommittedView | undefined> {
  // From the hinted base the claim listed from (a committed base, so the scan below ends there at
  // the latest), else the whole log.
  const log = await listLog(store, keys, undefined, from);
  if (log.floor > fenceSeq) return undefined;
  const listed = new Map(log.slots.map((s) => [s.seq, s]));
  // Below the newest committed checkpoint every slot is committed (each commit and each filler
  // names its predecessor), so only the slots above it can need filling.
  let prev: Frame | undefined;
  let start = fenceSeq;
  for (let s = fenceSeq - 1; s >= Math.max(log.floor, from ?? 1) && prev === undefined; s--) {
    const slot = listed.get(s);
    if (slot !== undefined) {
      const frame = await readFrame(store, keys, s, tailKey(slot), limits);
      // A filler carries its predecessor's meta: never build one from a frame read without its key.
      assertUnlocked(frame, { stream: keys.stream, key: tailKey(slot), seq: s });
      if (frame.kind !== 'fence') {
        prev = frame;
        break;
      }
      // The stream was deleted up to here (deleteStream) after this claim listed it: list again.
      if (frame.header.deleted === true) return undefined;
    }
    start = s;
  }
  // Nothing to fill: this listing, made after the fence landed, is the view below it.
  if (start >= fenceSeq) return viewBelow(log, fenceSeq);
  // The hinted base was gone (retention, or damage): look through the whole log.
  if (prev === undefined && from !== undefined) return fillBelow(store, keys, id, fenceSeq, limits);
  // Nothing committed from the floor up to the fence: the checkpoints this claim listed were
  // deleted (deleteStream ran meanwhile). List again: the stream reads as new.
  if (prev === undefined) return undefined;
  const fenced = await Promise.all(
    Array.from({ length: fenceSeq - start }, (_, i) => fenceSlot(store, keys, id, start + i, limits)),
  );
  // Deleted meanwhile (deleteStream fenced a slot here): list again.
  if (fenced.some((slot) => 'deleted' in slot)) return undefined;
  let last: Frame = prev;
  for (const slot of fenced) {
    if ('deleted' in slot) continue;
    if ('checkpoint' in slot) last = slot.checkpoint;
    else {
      const key = keys.afterFence(slot.seq, slot.fenceEpoch);
      const filler = fillerFrame(id, slot.seq, last, await limits.keyring?.sealing(keys.stream));
      const there = await createOrRecognise(store, key, filler, keys.stream, slot.seq);
      const origin = { stream: keys.stream, key, seq: slot.seq };
      // Taken: a later claim fenced this one. Settle the slot as it now stands.
      const settled =
        there === 'ours'
          ? await openFrame(filler, origin, limits)
          : await settleSlot(store, keys, id, slot.seq, last, limits);
      if (settled === undefined) return undefined;
      last = settled;
    }
  }
  return settledBelow(store, keys, fenceSeq, from);
}

/** The committed view below a fence once every slot there is settled; undefined when retention has moved past the fence meanwhile. */
async function settledBelow(
  store: Store,
  keys: StreamKeys,
  fenceSeq: number,
  from: number | undefined,
): Promise<CommittedView | undefined> {
  const log = await listLog(store, keys, undefined, from);
  return log.floor > fenceSeq ? undefined : viewBelow(log, fenceSeq);
}

/**
 * Fences slot `seq` for this claim at its first free key, or finds it committed: the checkpoint
 * there, or the epoch of the fence of ours after which its filler goes. Keys already taken by
 * fences of other claims (that crashed, or race this one) are followed, as settleSlot does.
 */
async function fenceSlot(
  store: Store,
  keys: StreamKeys,
  id: Identity,
  seq: number,
  limits: FrameReading,
): Promise<Fenced> {
  let key = keys.slot(seq);
  let epoch = id.epoch;
  for (let i = 0; i < MAX_KEYS_PER_SLOT; i++) {
    const { lostTo, frame } = await putFence(store, keys, id, seq, key, limits, epoch);
    if (lostTo === undefined) return { seq, fenceEpoch: epoch };
    if (frame === undefined) continue; // never read back (S3's 409 again and again, with backoff): again
    const origin = { stream: keys.stream, key, seq };
    if (frame.kind !== 'fence') {
      const checkpoint = await unlockFrame(frame, origin, limits);
      assertUnlocked(checkpoint, origin);
      return { seq, checkpoint };
    }
    if (frame.header.writer === id.writer) return { seq, fenceEpoch: frame.header.epoch };
    if (frame.header.deleted === true) return { seq, deleted: true };
    // Epochs rise along a slot's keys, so that each fence's next key is new.
    epoch = frame.header.epoch + 1;
    key = keys.afterFence(seq, frame.header.epoch);
  }
  throw failure(
    'STORAGE',
    { op: 'open', stream: keys.stream, seq },
    `more than ${MAX_KEYS_PER_SLOT} fences in one slot`,
  );
}

/**
 * Returns the checkpoint that decides slot `seq` (undefined when a delete fence does: the claim
 * lists again). Where the slot has none, closes it: first a
 * fence at its first free key, then a filler equal to `prev` at the key after that fence. The
 * fence stays when retention later deletes the filler (retention keeps fences), so an engine that
 * would have written that key, the old writer or a claim that never got to commit, finds it taken
 * and fails FENCED instead of committing into deleted history.
 */
async function settleSlot(
  store: Store,
  keys: StreamKeys,
  id: Identity,
  seq: number,
  prev: Frame,
  limits: FrameReading,
): Promise<Frame | undefined> {
  let key = keys.slot(seq);
  /** The epoch of the fence just before `key` in this slot, and whether it is this claim's. */
  let before: { epoch: number; ours: boolean } | undefined;
  for (let i = 0; i < MAX_KEYS_PER_SLOT; i++) {
    const there = await store.get(key).catch((err: unknown) => {
      throw wrapStorage(err, keys.stream, seq, key, 'open (filling the slots below its fence)');
    });
    if (there === undefined) {
      if (before?.ours) {
        const filler = fillerFrame(id, seq, prev, await limits.keyring?.sealing(keys.stream));
        if ((await createOrRecognise(store, key, filler, keys.stream, seq)) === 'ours')
          return openFrame(filler, { stream: keys.stream, key, seq }, limits);
      } else {
        // Epochs rise along a slot's keys, so that each fence's next key is new.
        const epoch = before === undefined ? id.epoch : before.epoch + 1;
        const fence = await fenceFrame(keys, seq, epoch, id.writer, limits);
        if ((await createOrRecognise(store, key, fence, keys.stream, seq)) === 'ours') {
          before = { epoch, ours: true };
          key = keys.afterFence(seq, epoch);
        }
      }
      continue; // taken meanwhile (by the old writer's commit, or another claim): read what is there
    }
    const frame = await openFrame(there, { stream: keys.stream, key, seq }, limits);
    assertUnlocked(frame, { stream: keys.stream, key, seq });
    if (frame.kind !== 'fence') return frame;
    if (frame.header.deleted === true) return undefined;
    before = { epoch: frame.header.epoch, ours: frame.header.writer === id.writer };
    key = keys.afterFence(seq, frame.header.epoch);
  }
  throw failure(
    'STORAGE',
    { op: 'open', stream: keys.stream, seq },
    `more than ${MAX_KEYS_PER_SLOT} fences in one slot`,
  );
}

/**
 * A checkpoint of seq `seq` equal to `prev`: a delta with no operations, carrying `prev`'s meta;
 * sealed with `sealing` in an encrypted stream.
 */
function fillerFrame(id: Identity, seq: number, prev: Frame, sealing: SealingKey | undefined): Uint8Array {
  const header = {
    stream: id.stream,
    seq,
    epoch: id.epoch,
    writer: id.writer,
    createdAt: Date.now(),
    baseSeq: prev.kind === 'base' ? prev.header.seq : prev.header.baseSeq!,
    parent: prev.crc,
    filler: true,
    // The chain's span length, so that a reader of the filler finds the chain's span deltas.
    ...(prev.header.span !== undefined && { span: prev.header.span }),
    ...(prev.header.meta !== undefined && { meta: prev.header.meta }),
    // (Its chain's schema version: a chain holds one.)
    ...(prev.header.schemaVersion !== undefined && { schemaVersion: prev.header.schemaVersion }),
    ...(prev.header.readableFrom !== undefined && { readableFrom: prev.header.readableFrom }),
  };
  return encodeFrame('delta', header, encodeValue([]), 1, sealing);
}
