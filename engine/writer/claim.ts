/**
 * Claim: how an engine takes a stream for writing (fencing on open, as SlateDB's writer epoch).
 * It writes a fence frame into a slot of the log (see log/listing.ts) with an epoch one higher
 * than the last frame's, so that an older engine's commit into that slot finds its key taken and
 * fails FENCED.
 *
 * Against a writer that commits as fast as it can, racing it for its very next key can lose
 * forever. So after one lost race the claim fences a slot further ahead (4, 8, ... 64 slots past
 * the one lost), with no listing in between: one conditional write per try, while the old writer
 * can advance one slot per write. The old writer goes on committing below the fence, at most up to
 * it, and is fenced there. Then the claim makes the slots below its fence contiguous: each slot
 * the old writer did not commit gets a fence (which retention keeps, so the old writer stays
 * fenced) and then a filler checkpoint after it (a delta with no operations, the same state as the
 * seq before). A claim that crashes before filling leaves the next claim to fill; until then the
 * committed view stops below the unfilled slots (log/committed.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import { assertUnlocked, decodeFrame, encodeFrame, type Frame, type FrameReading } from '../format/frame.js';
import type { SealingKey } from '../format/keyring.js';
import { encodeValue } from '../format/values.js';
import type { CommittedView } from '../log/committed.js';
import { newestView } from '../log/hint.js';
import type { StreamKeys } from '../log/keys.js';
import { listLog, tailKey, type LogListing } from '../log/listing.js';
import { openFrame } from '../log/read.js';
import { sameBytes, sleep, wrapStorage } from './commit.js';
import { damagedTail, withRepairHint } from './repair.js';

/** A claimed stream: the committed view after the claim, and where this engine writes next. */
export interface Claim {
  /** The writer epoch this engine claimed the stream with. */
  epoch: number;
  /** 64 random bits (hex) that tell this engine's frames from any other's (epochs may tie while racing). */
  writer: string;
  /** The committed log as it was when the claim completed. */
  view: CommittedView;
  /** The key of this engine's first commit: the one after its fence. */
  nextKey: string;
  /** The seq of that first commit: the slot of its fence. */
  seq: number;
  /** Fences already in that slot above a committed checkpoint, of opens that never committed (pile.ts). */
  piled: number;
}

const MAX_CLAIM_ATTEMPTS = 64;
/** Slots past the lost one that the first jump fences, then doubled per lost try up to MAX_JUMP. */
const FIRST_JUMP = 4;
const MAX_JUMP = 64;
/** Keys followed within one slot (fence after fence) before giving up. */
const MAX_KEYS_PER_SLOT = 64;

interface Identity {
  stream: string;
  epoch: number;
  writer: string;
}

/**
 * The next free key of a log whose last listed object is `tail`: the first slot after a committed
 * tail, or the key after a fence. An empty log starts at 1, or at its retention floor (a stream
 * deleted by an interrupted deleteStream).
 */
export function nextFree(keys: StreamKeys, tail: Frame | undefined, floor: number): { seq: number; key: string } {
  if (tail === undefined) {
    const seq = Math.max(1, floor);
    return { seq, key: keys.slot(seq) };
  }
  if (tail.kind === 'fence') return { seq: tail.header.seq, key: keys.afterFence(tail.header.seq, tail.header.epoch) };
  return { seq: tail.header.seq + 1, key: keys.slot(tail.header.seq + 1) };
}

/**
 * Claims `keys.stream` with a new writer epoch, fencing any engine that had it. With `repair`, a
 * damaged newest object is taken as a committed checkpoint (that does not restore): the claim
 * fences the slot after it, and the engine opens on what is below (resume.ts).
 */
export async function claimStream(
  store: Store,
  keys: StreamKeys,
  limits: FrameReading,
  repair = false,
): Promise<Claim> {
  const writer = randomBytes(8).toString('hex');
  for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
    // The tail and the newest chain are all a claim needs: list from the hinted base (log/hint.ts).
    let view: CommittedView;
    try {
      view = await newestView(store, keys, limits);
    } catch (err) {
      if (!isStatefoldError(err, 'CORRUPT') || err.seq === undefined) throw err;
      if (!repair) throw withRepairHint(err);
      // The newest object is damaged: fence after it, and open on what is below (resume.ts).
      const damaged = await damagedTail(store, keys, err.seq, limits);
      const id: Identity = { stream: keys.stream, epoch: damaged.epoch, writer };
      if ((await putFence(store, keys, id, damaged.nextSeq, damaged.nextKey, limits)) === 'won') {
        const commitKey = keys.afterFence(damaged.nextSeq, id.epoch);
        return { epoch: id.epoch, writer, view: damaged.view, nextKey: commitKey, seq: damaged.nextSeq, piled: 0 };
      }
      await sleep(Math.min(50, 2 ** attempt) * Math.random());
      continue;
    }
    const tail = view.tailFrame;
    // An encrypted stream opened without its keys: fail before fencing the engine that has them.
    if (tail !== undefined && view.tailSlot !== undefined)
      assertUnlocked(tail, { stream: keys.stream, seq: tail.header.seq, key: tailKey(view.tailSlot) });
    const id: Identity = { stream: keys.stream, epoch: (tail?.header.epoch ?? 0) + 1, writer };
    // The next free key: the first slot after a committed tail, or the key after a fence.
    const { seq: nextSeq, key: nextKey } = nextFree(keys, tail, view.log.floor);
    let lostTo = await putFence(store, keys, id, nextSeq, nextKey, limits);
    if (lostTo === 'won') {
      // Slots below a fence that was the tail may have been left unfilled by a claim that crashed;
      // the fences in its slot are of opens that never committed (pile.ts).
      const aboveCommitted = tail?.kind === 'fence' && view.slots.length > 0;
      const settled = aboveCommitted ? await fillBelow(store, keys, id, nextSeq, limits, view.log.from) : view;
      const piled = aboveCommitted ? (view.tailSlot?.keys.length ?? 0) : 0;
      const commitKey = keys.afterFence(nextSeq, id.epoch);
      return { epoch: id.epoch, writer, view: settled, nextKey: commitKey, seq: nextSeq, piled };
    }
    // Lost the next key to a commit: a writer is committing, perhaps as fast as it can. Jump ahead
    // of it (there is a committed checkpoint to fill from). Lost to a fence, another claim is racing
    // this one: list again, so that the later claim gets the higher epoch.
    for (let jump = FIRST_JUMP, from = nextSeq; lostTo === 'checkpoint' && jump <= MAX_JUMP; from += jump, jump *= 2) {
      const target = from + jump;
      lostTo = await putFence(store, keys, id, target, keys.slot(target), limits);
      if (lostTo === 'won') {
        return {
          epoch: id.epoch,
          writer,
          view: await fillBelow(store, keys, id, target, limits, view.log.from),
          nextKey: keys.afterFence(target, id.epoch),
          seq: target,
          piled: 0,
        };
      }
    }
    await sleep(Math.min(50, 2 ** attempt) * Math.random());
  }
  throw new StatefoldError(
    'STORAGE',
    `open stream ${JSON.stringify(keys.stream)}: could not claim a slot after ${MAX_CLAIM_ATTEMPTS} attempts (other engines keep opening or committing)`,
    { stream: keys.stream },
  );
}

/**
 * The committed log below this claim's fence, from a listing in which every slot there holds a
 * checkpoint. Whatever later claims wrote above the fence is not this engine's to restore: its
 * first commit finds out.
 */
function viewBelow(log: LogListing, fenceSeq: number): CommittedView {
  return { log, slots: log.slots.filter((s) => s.seq < fenceSeq), tailSlot: undefined, tailFrame: undefined };
}

/** A fence of `writer` at `epoch` in slot `seq`; sealed in an encrypted stream, so that none can be forged there. */
async function fenceFrame(
  keys: StreamKeys,
  seq: number,
  epoch: number,
  writer: string,
  limits: FrameReading,
): Promise<Uint8Array> {
  const header = { stream: keys.stream, seq, epoch, writer, createdAt: Date.now() };
  return encodeFrame('fence', header, new Uint8Array(0), 1, await limits.keyring?.sealing(keys.stream));
}

/** Writes this claim's fence into slot `seq` at `key`: 'won', or what holds the key instead. */
async function putFence(
  store: Store,
  keys: StreamKeys,
  id: Identity,
  seq: number,
  key: string,
  limits: FrameReading,
): Promise<'won' | 'checkpoint' | 'fence' | 'nothing'> {
  const fence = await fenceFrame(keys, seq, id.epoch, id.writer, limits);
  const there = await createOrRecognise(store, key, fence, keys.stream, seq);
  if (there === 'ours') return 'won';
  if (there === undefined) return 'nothing';
  return decodeFrame(there, { stream: keys.stream, key, seq }, limits).kind === 'fence' ? 'fence' : 'checkpoint';
}

/**
 * Makes every slot below `fenceSeq` hold a checkpoint: finds the newest committed checkpoint below
 * it, then fills each slot above that one which nobody committed with a filler. Returns the
 * committed log below the fence.
 */
async function fillBelow(
  store: Store,
  keys: StreamKeys,
  id: Identity,
  fenceSeq: number,
  limits: FrameReading,
  from?: number,
): Promise<CommittedView> {
  // From the hinted base the claim listed from (a committed base, so the scan below ends there at
  // the latest), else the whole log.
  const log = await listLog(store, keys, undefined, from);
  const listed = new Map(log.slots.map((s) => [s.seq, s]));
  // Below the newest committed checkpoint every slot is committed (each commit and each filler
  // names its predecessor), so only the slots above it can need filling.
  let prev: Frame | undefined;
  let start = fenceSeq;
  for (let s = fenceSeq - 1; s >= Math.max(log.floor, from ?? 1) && prev === undefined; s--) {
    const slot = listed.get(s);
    if (slot !== undefined) {
      const origin = { stream: keys.stream, key: tailKey(slot), seq: s };
      const frame = await openFrame(await readKey(store, keys, s, tailKey(slot)), origin, limits);
      // A filler carries its predecessor's meta: never build one from a frame read without its key.
      assertUnlocked(frame, origin);
      if (frame.kind !== 'fence') {
        prev = frame;
        break;
      }
    }
    start = s;
  }
  if (start >= fenceSeq) return viewBelow(log, fenceSeq);
  // The hinted base was gone (retention, or damage): look through the whole log.
  if (prev === undefined && from !== undefined) return fillBelow(store, keys, id, fenceSeq, limits);
  if (prev === undefined) {
    throw new StatefoldError(
      'CORRUPT',
      `open stream ${JSON.stringify(keys.stream)}: slots ${start} to ${fenceSeq - 1} hold no checkpoint and none is committed below them`,
      { stream: keys.stream, seq: start },
    );
  }
  for (let s = start; s < fenceSeq; s++) prev = await settleSlot(store, keys, id, s, prev, limits);
  return viewBelow(await listLog(store, keys, undefined, from), fenceSeq);
}

/**
 * Returns the checkpoint that decides slot `seq`. Where the slot has none, closes it: first a
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
): Promise<Frame> {
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
    before = { epoch: frame.header.epoch, ours: frame.header.writer === id.writer };
    key = keys.afterFence(seq, frame.header.epoch);
  }
  throw new StatefoldError(
    'STORAGE',
    `open stream ${JSON.stringify(keys.stream)} seq ${seq}: more than ${MAX_KEYS_PER_SLOT} fences in one slot`,
    { stream: keys.stream, seq },
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
  };
  return encodeFrame('delta', header, encodeValue([]), 1, sealing);
}

async function readKey(store: Store, keys: StreamKeys, seq: number, key: string): Promise<Uint8Array> {
  let bytes: Uint8Array | undefined;
  try {
    bytes = await store.get(key);
  } catch (err) {
    throw wrapStorage(err, keys.stream, seq, key, 'open (filling the slots below its fence)');
  }
  if (bytes === undefined) {
    throw new StatefoldError(
      'STORAGE',
      `open stream ${JSON.stringify(keys.stream)} seq ${seq} (${key}): listed, then gone (removed by retention?); open again`,
      { stream: keys.stream, seq, key },
    );
  }
  return bytes;
}

/**
 * Creates `key` with `frame`, or recognises that an earlier try of ours already did: 'ours', or
 * the bytes another engine put there (undefined when none can be read: a lost race to a write that
 * then failed, S3's 409; the caller tries again).
 */
async function createOrRecognise(
  store: Store,
  key: string,
  frame: Uint8Array,
  stream: string,
  seq: number,
): Promise<'ours' | Uint8Array | undefined> {
  try {
    if (await store.putIfAbsent(key, frame)) return 'ours';
  } catch (err) {
    const there = await store.get(key).catch(() => undefined);
    if (there === undefined) throw wrapStorage(err, stream, seq, key, 'open');
  }
  let there: Uint8Array | undefined;
  try {
    there = await store.get(key);
  } catch (err) {
    throw wrapStorage(err, stream, seq, key, 'open (reading back a key found taken)');
  }
  return there !== undefined && sameBytes(there, frame) ? 'ours' : there;
}
