/**
 * Claim: how an engine takes a stream for writing (fencing on open, as SlateDB's writer epoch).
 * It writes a fence frame into a slot of the log (see log/listing.ts) with an epoch one higher
 * than the last frame's, so that an older engine's commit into that slot finds its key taken and
 * fails FENCED.
 *
 * A free key is not proof that its slot is the next one: retention (or deleteStream) may have
 * deleted the checkpoint that was there. Both write a floor before deleting anything below it, so
 * a claim lists the floors once its fence stands, and lists the stream again when one is above it.
 *
 * Against a writer that commits as fast as it can, racing it for its very next key can lose
 * forever. So after one lost race the claim lists where the writer is now and fences 4 slots past
 * the newest slot it shows, then 8, ... 64, so that however far the writer got while this claim
 * listed and read, the fence lands ahead of it within a few tries. The old writer goes on committing below the fence, at most up to
 * it, and is fenced there. Then the claim makes the slots below its fence contiguous (fill.ts). A
 * claim that crashes before filling leaves the next claim to fill; until then the committed view
 * stops below the unfilled slots (log/committed.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../storage-adapters/store.js';
import { failure, isStatefoldError } from '../errors.js';
import { assertUnlocked, type Frame, type FrameReading } from '../format/frame.js';
import type { CommittedView } from '../log/committed.js';
import { newestView } from '../log/hint.js';
import type { StreamKeys } from '../log/keys.js';
import { floorAbove, putFloor } from '../log/floor.js';
import { newestSlotFrom, tailKey } from '../log/listing.js';
import { vanished } from '../log/read.js';
import { sleep } from '../log/create.js';
import { putFence, type Identity, type LostTo } from './fence.js';
import { fillBelow } from './fill.js';
import { damagedTail, withRepairHint } from './damaged.js';

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
/** Slots past the newest listed one that the first jump fences, then doubled per lost try up to MAX_JUMP. */
const FIRST_JUMP = 4;
const MAX_JUMP = 64;

/**
 * The next free key of a log whose last listed object is `tail`: the first slot after a committed
 * tail or a delete fence, or the key after any other fence. An empty log starts at 1, or at its retention floor (a stream
 * deleted by an interrupted deleteStream).
 */
export function nextFree(keys: StreamKeys, tail: Frame | undefined, floor: number): { seq: number; key: string } {
  if (tail === undefined) {
    const seq = Math.max(1, floor);
    return { seq, key: keys.slot(seq) };
  }
  // Nothing is written after a delete fence in its slot: the stream starts anew in the next.
  if (tail.kind === 'fence' && tail.header.deleted !== true)
    return { seq: tail.header.seq, key: keys.afterFence(tail.header.seq, tail.header.epoch) };
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
  /** Checks the listed stream before anything is written (the schema): a rejection ends the claim. */
  beforeFence: (view: CommittedView) => Promise<void> = async () => undefined,
): Promise<Claim> {
  const writer = randomBytes(8).toString('hex');
  for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
    let claim: Claim | undefined;
    try {
      claim = await tryClaim(store, keys, limits, repair, writer, beforeFence);
    } catch (err) {
      // Retention deleted what this try listed before it could read it: the stream moved on. List again.
      if (!vanished(err)) throw err;
    }
    if (claim !== undefined) return claim;
    await sleep(Math.min(50, 2 ** attempt) * Math.random());
  }
  throw failure(
    'STORAGE',
    { op: 'open', stream: keys.stream },
    `could not claim a slot after ${MAX_CLAIM_ATTEMPTS} attempts (other engines keep opening or committing)`,
  );
}

/**
 * One try of a claim, from a new listing: the claim, or undefined when it must list again (it lost
 * to another claim, or its fence landed in history that retention or a delete had removed).
 */
async function tryClaim(
  store: Store,
  keys: StreamKeys,
  limits: FrameReading,
  repair: boolean,
  writer: string,
  beforeFence: (view: CommittedView) => Promise<void>,
): Promise<Claim | undefined> {
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
    if ((await putFence(store, keys, id, damaged.nextSeq, damaged.nextKey, limits)).lostTo !== undefined) return;
    if (await floorAbove(store, keys, damaged.nextSeq)) return;
    return claimed(keys, id, damaged.view, damaged.nextSeq, 0);
  }
  const tail = view.tailFrame;
  // An encrypted stream opened without its keys: fail before fencing the engine that has them.
  if (tail !== undefined && view.tailSlot !== undefined)
    assertUnlocked(tail, { stream: keys.stream, seq: tail.header.seq, key: tailKey(view.tailSlot) });
  await beforeFence(view);
  const id: Identity = { stream: keys.stream, epoch: (tail?.header.epoch ?? 0) + 1, writer };
  // The next free key: the first slot after a committed tail, or the key after a fence.
  const { seq: nextSeq, key: nextKey } = nextFree(keys, tail, view.log.floor);
  let { lostTo } = await putFence(store, keys, id, nextSeq, nextKey, limits);
  if (lostTo === undefined) {
    // Slots below a fence that was the tail may have been left unfilled by a claim that crashed;
    // the fences in its slot are of opens that never committed (pile.ts).
    if (tail?.kind === 'fence' && view.slots.length > 0) {
      const settled = await fillBelow(store, keys, id, nextSeq, limits, view.log.from);
      return settled && claimed(keys, id, settled, nextSeq, view.tailSlot?.keys.length ?? 0);
    }
    // A free key is not proof that the slot is next: retention (or a delete) may have deleted
    // the checkpoint that was there, below a floor it wrote first.
    if (await floorAbove(store, keys, nextSeq)) return;
    // A stream with nothing committed (new, or deleted up to a delete fence) that starts here above
    // slots holding only fences (claims that jumped and never filled, a delete's fences): a floor
    // at this seq, so that readers never take those for a gap in its history.
    if (view.slots.length === 0 && view.log.slots.some((s) => s.seq < nextSeq)) await putFloor(store, keys, nextSeq);
    return claimed(keys, id, view, nextSeq, 0);
  }
  // Lost the next key to a commit (or to a write still landing: nothing to read yet, S3's 409)
  // after a committed tail: a writer is committing, perhaps as fast as it can. Jump ahead of it.
  // Lost to a fence, another claim is racing this one: list again, so that the later claim gets
  // the higher epoch.
  const busy = (lost: LostTo | undefined): boolean =>
    (lost === 'checkpoint' || lost === 'nothing') && tail !== undefined && tail.kind !== 'fence';
  for (let jump = FIRST_JUMP, lostAt = nextSeq; busy(lostTo) && jump <= MAX_JUMP; jump *= 2) {
    // Fence ahead of where the writer is now (one listing), not of where an older listing saw it,
    // further ahead each try, so that however fast the writer goes, the fence lands past it.
    const target = (await newestSlotFrom(store, keys, lostAt)) + jump;
    lostAt = target;
    ({ lostTo } = await putFence(store, keys, id, target, keys.slot(target), limits));
    if (lostTo === undefined) {
      const settled = await fillBelow(store, keys, id, target, limits, view.log.from);
      return settled && claimed(keys, id, settled, target, 0);
    }
  }
  return undefined;
}

/** The claim of an engine whose fence stands in slot `seq` with the committed `view` below it. */
function claimed(keys: StreamKeys, id: Identity, view: CommittedView, seq: number, piled: number): Claim {
  return { epoch: id.epoch, writer: id.writer, view, nextKey: keys.afterFence(seq, id.epoch), seq, piled };
}
