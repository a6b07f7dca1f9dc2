/**
 * Reading one checkpoint's chain: its base and the deltas after it, read in parallel, verified
 * as a whole (one base, then deltas each naming its base and its parent's checksum) before any
 * of it is decoded, then folded in order. Which seqs, and how they link, is the chain model's
 * (log/chain.ts).
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError, corrupt, failure } from '../errors.js';
import { EMPTY_LEDGER, type Ledger } from '../effects/ledger.js';
import { decodeMeta, decodePayload, isSpanDelta, type Frame, type FrameReading } from '../format/frame.js';
import { gapsBetween, linkError, nextSpan, planChain, spanLengthError, type SpanState } from '../log/chain.js';
import type { CommittedView } from '../log/committed.js';
import { applyEntriesAt, applyLedger, checkpointKind, opLists, opsOf } from '../log/frames.js';
import type { StreamKeys } from '../log/keys.js';
import { tailKey, type Slot } from '../log/listing.js';
import { listedThenGone, mapLimit, readFrame } from '../log/read.js';
import { thaw } from '../value.js';
import { assertReadable, inOrder, mixedSchema, storedSchema, upcast, type ResolvedSchema } from '../schema.js';
import { applyOps, PatchMismatch } from './fold.js';
import type { Restored } from './types.js';
/** What reading a chain gives: the public result, and what an engine opening the stream needs to go on writing it. */
export interface ReadChain<S> {
  restored: Restored<S>;
  /** The effect ledger as of the restored seq. */
  ledger: Ledger;
  /** CRC-32 of the restored seq's frame: the next delta's parent. */
  crc: number;
  baseSeq: number;
  /** Stored sizes of the chain's base and of its deltas together (the base policy's size trigger). */
  baseBytes: number;
  deltaBytes: number;
  /** The restored seq's meta as stored (msgpack), so that it need not be encoded again. */
  metaBytes: Uint8Array | undefined;
  /** The ids of the keys the chain's frames are sealed with (empty when not sealed). */
  keyIds: Set<string>;
  /** A chain written with span deltas: what the next span delta needs. */
  span: SpanState | undefined;
  /** With `keepFrom`: the checkpoints the fold passed through from that seq on, below the one restored, ascending. */
  kept: Restored<S>[];
  /** The schema version and readable-from the restored checkpoint was stored with. */
  stored: { version: number; readableFrom: number };
}

/** Options of readChain. */
export interface ChainOptions {
  signal?: AbortSignal;
  /** How many objects are read at once (default 64). */
  concurrency?: number;
  /** Also hand out, each as its own copy, the state of every seq from this one on that the fold passes through. */
  keepFrom?: number;
  /**
   * The reading code's schema: a state stored in a newer version is SCHEMA_TOO_NEW (unless its
   * writer declared it readable), an older one is upcast (every state handed out). Undefined: as stored.
   */
  schema?: ResolvedSchema | 'stored';
  /** The operation named in schema errors. */
  op?: string;
}

/** One verified link of a chain: its frame, its key, and whether it is a span delta read as a jump. */
interface Step {
  seq: number;
  frame: Frame;
  key: string;
  jump: boolean;
}

/** Reads, verifies and folds the chain of `seq` (or of the newest committed checkpoint) from a committed view. */
export async function readChain<S>(
  store: Store,
  view: CommittedView,
  seq: number | undefined,
  limits: FrameReading,
  options: ChainOptions = {},
): Promise<ReadChain<S>> {
  const keys = view.log.keys;
  const target = targetOf(view, seq);
  const bySeq = new Map(view.slots.map((s) => [s.seq, s]));
  const frameAt = frameReader(store, view, bySeq, target, limits, options.signal);
  const last = await frameAt(target);
  const lastKey = tailKey(bySeq.get(target)!);
  const schema = options.schema ?? 'stored';
  const at = (s: number, key: string) => ({ op: options.op ?? 'restore', stream: keys.stream, seq: s, key });
  // A state too new for this code fails before the rest of its chain is read.
  assertReadable(last.header, schema, at(target, lastKey));
  const kind = checkpointKind(last, keys, target, lastKey);
  const baseSeq = last.header.baseSeq!;
  const every = last.header.span;
  const read = await readLinks(frameAt, baseSeq, every, target, last, options.concurrency ?? 64);
  const steps = await linkedOrRelist(store, keys, target, options.signal, () =>
    verifyLinks(read, bySeq, keys, baseSeq, target),
  );
  const folded = foldSteps(steps, keys, baseSeq, every, options.keepFrom ?? target);
  const restored: Restored<S> = {
    state: (await upcast(folded.state, last.header, schema, at(target, lastKey))) as S,
    seq: target,
    meta: decodeMeta(last, { stream: keys.stream, key: lastKey, seq: target }),
    kind,
    createdAt: last.header.createdAt,
    effects: [...folded.ledger.values()],
    skipped: [],
    damage: [],
    schemaVersion: storedSchema(last.header).version,
  };
  const meta = last.header.meta;
  return {
    restored,
    ledger: folded.ledger,
    crc: last.crc,
    baseSeq,
    baseBytes: steps[0]!.frame.bytes,
    deltaBytes: folded.deltaBytes,
    span: folded.span,
    // A copy: the decoded header's bytes may be a view into the whole frame.
    metaBytes: meta === undefined ? undefined : new Uint8Array(meta),
    keyIds: new Set(steps.flatMap(({ frame: f }) => (f.keyId === undefined ? [] : [f.keyId]))),
    stored: storedSchema(last.header),
    kept: await inOrder(folded.kept, async ({ step, state, ledger }) => ({
      state: (await upcast(state, step.frame.header, schema, at(step.seq, step.key))) as S,
      seq: step.seq,
      meta: decodeMeta(step.frame, { stream: keys.stream, key: step.key, seq: step.seq }),
      kind: step === steps[0] ? 'base' : 'delta',
      createdAt: step.frame.header.createdAt,
      effects: [...ledger.values()],
      skipped: [],
      damage: [],
      schemaVersion: storedSchema(step.frame.header).version,
    })),
  };
}

/** The seq to restore: `seq`, or the newest committed; NOT_FOUND when the view does not hold it. */
function targetOf(view: CommittedView, seq: number | undefined): number {
  const stream = view.log.keys.stream;
  const slots = view.slots;
  const newest = slots[slots.length - 1];
  if (newest === undefined) {
    throw failure('NOT_FOUND', { stream }, `no checkpoint`);
  }
  const target = seq ?? newest.seq;
  const oldest = slots[0]!.seq;
  if (target > newest.seq) {
    throw failure('NOT_FOUND', { stream, seq: target }, `beyond the newest checkpoint, ${newest.seq}`);
  }
  if (target < oldest) {
    throw failure(
      'NOT_FOUND',
      { stream, seq: target },
      `removed by retention (the oldest retained checkpoint is ${oldest})`,
    );
  }
  if (!view.slots.some((s) => s.seq === target)) {
    throw failure('NOT_FOUND', { stream, seq: target }, `not in the log (removed by retention)`);
  }
  return target;
}

/**
 * Reads the frame of one seq of the view (the view's tail and prefetched frames are not read
 * again). A seq the listing lacks, or a fence where it had a checkpoint, is deleted history when a
 * floor above it is recorded (NOT_FOUND, list again), else a gap in the chain.
 */
function frameReader(
  store: Store,
  view: CommittedView,
  bySeq: Map<number, Slot>,
  target: number,
  limits: FrameReading,
  signal: AbortSignal | undefined,
): (seq: number) => Promise<Frame> {
  const keys = view.log.keys;
  return async (s) => {
    const slot = bySeq.get(s);
    if (slot === undefined) {
      // Deleted after the log was listed, by retention that moved its floor past it: list again.
      throw (
        (await listedThenGone(store, keys, s, keys.slot(s), signal)) ??
        // The key in the details, not the message: no object was listed to name.
        new StatefoldError(
          'CORRUPT',
          `stream ${JSON.stringify(keys.stream)} seq ${s}: missing from the log (a gap in the chain to seq ${target})`,
          { stream: keys.stream, seq: s, key: keys.slot(s) },
        )
      );
    }
    if (slot === view.tailSlot && view.tailFrame) return view.tailFrame;
    const frame = await (view.frames?.get(s) ??
      readFrame(store, keys, s, tailKey(slot), limits, signal, view.log.bodies));
    // A fence where the listing had a checkpoint: the checkpoint was deleted since (a floor moved
    // past it; its fences are kept): list again.
    const gone = frame.kind === 'fence' ? await listedThenGone(store, keys, s, tailKey(slot), signal) : undefined;
    if (gone !== undefined) throw gone;
    return frame;
  };
}

/**
 * Reads the frames a restore of `target` folds (log/chain.ts), in parallel: its span path, then
 * the seqs around any span position whose frame is not a span delta from the position before.
 */
async function readLinks(
  frameAt: (seq: number) => Promise<Frame>,
  baseSeq: number,
  every: number | undefined,
  target: number,
  last: Frame,
  concurrency: number,
): Promise<Map<number, Frame>> {
  const { plan, points } = planChain(baseSeq, every, target);
  const read = new Map<number, Frame>([[target, last]]);
  const fetch = async (seqs: number[]): Promise<void> => {
    const frames = await mapLimit(seqs, concurrency, (s) => frameAt(s));
    seqs.forEach((s, i) => read.set(s, frames[i]!));
  };
  await fetch(plan);
  await fetch(
    gapsBetween(points, (s, from) => {
      const f = read.get(s)!;
      return f.kind === 'delta' && isSpanDelta(f) && f.header.jump === from;
    }),
  );
  return read;
}

/**
 * Runs the link checks; a chain that does not link, when a floor above it is recorded, is deleted
 * history (NOT_FOUND, list again), not damage: a delete (or retention) removed the seqs after
 * they were listed, and an engine fenced before it, its writes held, may since have written
 * other checkpoints into those slots, below the floor where no reader looks. A read that spans
 * the two sees frames of both.
 */
async function linkedOrRelist<T>(
  store: Store,
  keys: StreamKeys,
  target: number,
  signal: AbortSignal | undefined,
  check: () => T,
): Promise<T> {
  try {
    return check();
  } catch (err) {
    if (!(err instanceof StatefoldError) || err.code !== 'CORRUPT') throw err;
    throw (await listedThenGone(store, keys, target, keys.slot(target), signal)) ?? err;
  }
}

/**
 * Verifies the whole chain before decoding any of it: one base, then deltas each naming the frame
 * it applies to (the seq before, or for a span delta the seq it jumps from) by its checksum.
 */
function verifyLinks(
  read: Map<number, Frame>,
  bySeq: Map<number, Slot>,
  keys: StreamKeys,
  baseSeq: number,
  target: number,
): Step[] {
  const stream = keys.stream;
  const seqs = [...read.keys()].sort((a, b) => a - b);
  return seqs.map((s, i) => {
    const frame = read.get(s)!;
    const key = tailKey(bySeq.get(s)!);
    const k = checkpointKind(frame, keys, s, key);
    if (i === 0) {
      if (k !== 'base') throw corrupt(stream, s, key, `expected the base of seq ${target}'s chain, found a ${k}`);
      return { seq: s, frame, key, jump: false };
    }
    if (k !== 'delta') throw corrupt(stream, s, key, `expected a delta in the chain of seq ${target}, found a ${k}`);
    const before = { seq: seqs[i - 1]!, crc: read.get(seqs[i - 1]!)!.crc };
    const jump = before.seq !== s - 1;
    const broken = linkError(stream, s, key, frame, baseSeq, before, jump);
    if (broken !== undefined) throw broken;
    // One schema version per chain: a delta's operations apply to a state of its base's version.
    const mixed = mixedSchema(frame.header, read.get(seqs[0]!)!.header, { stream, seq: s, key });
    if (mixed !== undefined) throw mixed;
    return { seq: s, frame, key, jump };
  });
}

/** A seq the fold passed through, with a copy of its state and its ledger (see ChainOptions.keepFrom). */
interface Kept {
  step: Step;
  state: unknown;
  ledger: Ledger;
}

/**
 * Folds verified steps in order: the state, the effect ledger, the stored delta bytes folded, and
 * the span state a writer going on from the last step needs; and a copy of the state at every
 * step before the last from seq `keepFrom` on.
 */
function foldSteps(
  steps: Step[],
  keys: StreamKeys,
  baseSeq: number,
  every: number | undefined,
  keepFrom: number,
): { state: unknown; ledger: Ledger; deltaBytes: number; span: SpanState | undefined; kept: Kept[] } {
  const stream = keys.stream;
  const base = steps[0]!;
  const last = steps[steps.length - 1]!;
  const kept: Kept[] = [];
  const keep = (step: Step): void => {
    if (step !== last && step.seq >= keepFrom) kept.push({ step, state: thaw(state), ledger });
  };
  let state = decodePayload(base.frame, { stream, key: base.key, seq: baseSeq });
  let ledger = applyLedger(base.frame, keys, baseSeq, base.key, EMPTY_LEDGER);
  keep(base);
  let deltaBytes = 0;
  let span = nextSpan(undefined, every, baseSeq, {
    seq: baseSeq,
    crc: base.frame.crc,
    own: new Uint8Array(0),
    ledger: [],
    deltaBytes,
  });
  for (const step of steps.slice(1)) {
    const { seq: s, frame, key, jump } = step;
    const origin = { stream, key, seq: s };
    const raws = opLists(frame, origin);
    const short = jump ? spanLengthError(stream, s, key, raws.length, frame.header.jump!) : undefined;
    if (short !== undefined) throw short;
    if (jump) ledger = applyEntriesAt(frame.header.spanLedger, keys, s, key, ledger);
    ledger = applyLedger(frame, keys, s, key, ledger);
    try {
      for (const raw of jump ? raws : raws.slice(-1)) state = applyOps(state, opsOf(raw, origin), frame.version);
    } catch (err) {
      if (err instanceof PatchMismatch) throw corrupt(stream, s, key, `delta does not apply: ${err.message}`, err);
      throw err;
    }
    deltaBytes += frame.bytes;
    const own = raws[raws.length - 1]!;
    span = nextSpan(span, every, baseSeq, {
      seq: s,
      crc: frame.crc,
      own,
      ledger: frame.header.ledger ?? [],
      deltaBytes,
    });
    keep(step);
  }
  return { state, ledger, deltaBytes, span, kept };
}
