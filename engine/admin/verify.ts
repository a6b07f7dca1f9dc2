/**
 * verifyStream: every retained checkpoint of a stream read, verified and folded, the way a restore
 * of each would, in one pass: a report of what restores and what does not, never a throw for
 * damage. Objects are read a window at a time and one state is held at a time (two in a chain
 * with span deltas: a copy at the last span position, so that a jump over a damaged delta is
 * verified as restore would read it), so memory stays bounded whatever the history.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertStore, readingOf } from '../args.js';
import { applyEntries, EMPTY_LEDGER, type Ledger } from '../effects/ledger.js';
import { StatefoldError, corrupt, isStatefoldError } from '../errors.js';
import { decodePayload, isSpanDelta, type Frame, type FrameReading } from '../format/frame.js';
import type { Encryption } from '../format/keyring.js';
import { atSpanPosition, linkError, nextSpan, spanLengthError, type SpanState } from '../log/chain.js';
import { committedView, type CommittedView } from '../log/committed.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { listLog, tailKey, type Slot } from '../log/listing.js';
import { mapLimit, readFrame, vanished } from '../log/read.js';
import { opLists, opsOf, spanParts } from '../log/frames.js';
import { applyOps, PatchMismatch } from '../restore/fold.js';
import { thaw } from '../capture/index.js';
import { mixedSchema, type Schema } from '../schema.js';
import { unreadableSeqs } from './verify-schema.js';

/** Options of `verifyStream`. */
export interface VerifyOptions {
  /** Called after each checkpoint is checked, with how many are checked and how many there are. */
  onProgress?: (progress: { checked: number; total: number }) => void;
  /** The keys of an encrypted stream (without them, its first sealed checkpoint rejects KEY_UNAVAILABLE). */
  encryption?: Encryption;
  /** Aborts the reads (they then reject ABORTED). */
  signal?: AbortSignal;
  /** How many objects are read at once (default 16). */
  concurrency?: number;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
  /** Largest uncompressed frame payload accepted (default 1 GiB). */
  maxPayloadBytes?: number;
  /** Also upcast every intact seq with this schema, and report those it cannot read in `unreadable`. */
  schema?: Schema;
}

/** What `verifyStream` found. */
export interface VerifyReport {
  stream: string;
  /** Retained seqs checked: every seq from the oldest retained to the newest committed. */
  checked: number;
  /** The seqs that restore: object, chain and fold all verified. */
  intact: number[];
  /**
   * The seqs that do not restore, ascending, each with why (a CORRUPT error naming stream, seq and
   * key): its own object is damaged or missing, or its delta does not apply, or an earlier link of
   * its chain is damaged (then the message names that seq).
   */
  damaged: { seq: number; error: StatefoldError }[];
  /** The newest seq that restores (0 when none does). */
  newestIntact: number;
  /** With `schema`: the intact seqs whose state that code cannot read (MIGRATION_FAILED, SCHEMA_TOO_NEW). */
  unreadable?: { seq: number; error: StatefoldError }[];
}

/** Where the fold stands: the chain being folded, or why it is broken. */
interface Chain {
  base: number;
  state: unknown;
  ledger: Ledger;
  /** The last frame folded, for the next delta's parent check. */
  last: Frame;
  /** A chain with span deltas: the last span position, and the operations and ledger changes since. */
  span: SpanState | undefined;
}

/**
 * The newest span position (or base) folded intact (`at`), with a copy of its state: a span delta
 * that jumps from it restores even when a delta between them is damaged, as restore would read it.
 */
interface Position {
  base: number;
  at: SpanState;
  state: unknown;
  ledger: Ledger;
}

/**
 * Checks every retained checkpoint of `stream`: reads and verifies each object, checks each delta's
 * link to its base and parent, and folds each chain. Rejects only for what is not damage (the store
 * failing, a missing key, an abort); damage is reported.
 */
export async function verifyStream(store: Store, stream: string, options: VerifyOptions = {}): Promise<VerifyReport> {
  assertStore(store, 'verifyStream');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'verifyStream', keys.stream);
  const reading = readingOf(options, 'verifyStream');
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'verifyStream'));
  const log = await listLog(store, keys, options.signal);
  const report: VerifyReport = { stream: keys.stream, checked: 0, intact: [], damaged: [], newestIntact: 0 };
  let view: CommittedView;
  let top: StatefoldError | undefined;
  try {
    view = await committedView(store, log, reading, options.signal);
  } catch (err) {
    if (!isStatefoldError(err, 'CORRUPT') || err.seq === undefined) throw err;
    // A damaged object at the top cannot be told committed: report it, and check what is below it.
    top = err;
    view = { log, slots: log.slots.filter((s) => s.seq < err.seq!), tailSlot: undefined, tailFrame: undefined };
  }
  const slots = view.slots;
  const first = slots[0]?.seq;
  const newest = top?.seq ?? slots[slots.length - 1]?.seq;
  if (first === undefined || newest === undefined) {
    if (top !== undefined) report.damaged.push({ seq: top.seq!, error: top });
    report.checked = report.damaged.length;
    return report;
  }
  const total = newest - first + 1;
  const bySeq = new Map(slots.map((s) => [s.seq, s]));
  const window = options.concurrency ?? 16;
  let chain: Chain | undefined;
  let position: Position | undefined;
  /** The damage that broke the chain being folded, until the next base. */
  let broken: StatefoldError | undefined;
  for (let from = first; from <= newest; from += window) {
    const seqs = Array.from({ length: Math.min(window, newest - from + 1) }, (_, i) => from + i);
    const read = await mapLimit(seqs, window, (seq) => readOne(store, keys, bySeq.get(seq), seq, reading, options));
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i]!;
      const got = seq === top?.seq ? top : read[i]!;
      if (got === 'gone') {
        // Deleted by retention since the listing: no longer retained, not damage.
        report.checked++;
        options.onProgress?.({ checked: report.checked, total });
        continue;
      }
      if (got instanceof StatefoldError) {
        report.damaged.push({ seq, error: got });
        broken = got;
        chain = undefined;
      } else {
        // Its own failure (a base, or a delta on an intact chain) breaks the chain; a delta of a chain
        // already broken only reports the seq that broke it.
        const own = chain !== undefined || got.kind === 'base';
        const result =
          chain === undefined && got.kind === 'delta' && jumpsFrom(got, position)
            ? jump(keys, bySeq.get(seq)!, got, position!)
            : fold(keys, bySeq.get(seq)!, got, chain, broken);
        if (result instanceof StatefoldError) {
          report.damaged.push({ seq, error: result });
          if (own) broken = result;
          chain = undefined;
        } else {
          chain = result;
          broken = undefined;
          // A copy of the state at each span position (and base), for jumps over later damage.
          if (
            result.span !== undefined &&
            got.header.span !== undefined &&
            atSpanPosition(seq, result.base, got.header.span)
          )
            position = { base: result.base, at: result.span, state: thaw(result.state), ledger: result.ledger };
          report.intact.push(seq);
          report.newestIntact = seq;
        }
      }
      report.checked++;
      options.onProgress?.({ checked: report.checked, total });
    }
  }
  if (options.schema !== undefined) {
    const { encryption, signal, maxPayloadBytes } = options;
    const reading = {
      ...(encryption && { encryption }),
      ...(signal && { signal }),
      ...(maxPayloadBytes && { maxPayloadBytes }),
    };
    report.unreadable = await unreadableSeqs(store, keys.stream, report.intact, options.schema, reading);
  }
  return report;
}

/** Reads one slot's checkpoint: its frame, the CORRUPT error that says why it is damaged or missing, or 'gone'. */
async function readOne(
  store: Store,
  keys: StreamKeys,
  slot: Slot | undefined,
  seq: number,
  reading: FrameReading,
  options: VerifyOptions,
): Promise<Frame | StatefoldError | 'gone'> {
  if (slot === undefined)
    return corrupt(keys.stream, seq, keys.slot(seq), 'missing from the log (a gap between retained checkpoints)');
  try {
    const frame = await readFrame(store, keys, seq, tailKey(slot), reading, options.signal);
    if (frame.kind === 'fence')
      return corrupt(keys.stream, seq, tailKey(slot), 'a fence where a checkpoint belongs (later seqs exist)');
    return frame;
  } catch (err) {
    if (vanished(err)) return 'gone';
    if (isStatefoldError(err, 'CORRUPT')) return err;
    throw err;
  }
}

/** Whether `frame` is a span delta that jumps from `position` (same chain, its checksum). */
function jumpsFrom(frame: Frame, position: Position | undefined): boolean {
  return (
    position !== undefined &&
    isSpanDelta(frame) &&
    frame.header.baseSeq === position.base &&
    frame.header.jump === position.at.seq &&
    frame.header.jumpCrc === position.at.crc
  );
}

/** Folds a span delta onto a copy of the state at the position it jumps from, as restore does. */
function jump(keys: StreamKeys, slot: Slot, frame: Frame, position: Position): Chain | StatefoldError {
  const seq = slot.seq;
  const key = tailKey(slot);
  const origin = { stream: keys.stream, seq, key };
  try {
    const raws = spanParts(frame, origin);
    const short = spanLengthError(keys.stream, seq, key, raws.length, position.at.seq);
    if (short !== undefined) return short;
    let state = thaw(position.state);
    for (const raw of raws) state = applyOps(state, opsOf(raw, origin), frame.version);
    let ledger: Ledger;
    try {
      ledger = applyEntries(applyEntries(position.ledger, frame.header.spanLedger), frame.header.ledger);
    } catch (err) {
      return corrupt(keys.stream, seq, key, `effect ledger: ${(err as Error).message}`, err);
    }
    // The span it jumped to starts here, as at any span position.
    const span = {
      every: frame.header.span ?? position.at.every,
      seq,
      crc: frame.crc,
      raws: [],
      ledger: [],
      deltaBytes: 0,
    };
    return { base: position.base, state, ledger, last: frame, span };
  } catch (err) {
    if (err instanceof PatchMismatch)
      return corrupt(keys.stream, seq, key, `delta does not apply: ${err.message}`, err);
    if (isStatefoldError(err, 'CORRUPT')) return err;
    throw err;
  }
}

/** Folds one verified frame onto the chain: the chain after it, or the error that says why it does not restore. */
function fold(
  keys: StreamKeys,
  slot: Slot,
  frame: Frame,
  chain: Chain | undefined,
  broken: StatefoldError | undefined,
): Chain | StatefoldError {
  const seq = slot.seq;
  const key = tailKey(slot);
  const origin = { stream: keys.stream, seq, key };
  try {
    if (frame.kind === 'base') {
      const span = nextSpan(undefined, frame.header.span, seq, {
        seq,
        crc: frame.crc,
        own: new Uint8Array(0),
        ledger: [],
        deltaBytes: 0,
      });
      return {
        base: seq,
        state: decodePayload(frame, origin),
        ledger: ledgerOf(frame, EMPTY_LEDGER),
        last: frame,
        span,
      };
    }
    if (chain === undefined) {
      const why =
        broken !== undefined
          ? `its chain is broken at seq ${broken.seq}`
          : `its base, seq ${frame.header.baseSeq}, is not retained`;
      return corrupt(keys.stream, seq, key, `does not restore: ${why}`, broken);
    }
    const link = linkError(keys.stream, seq, key, frame, chain.base, { seq: seq - 1, crc: chain.last.crc }, false);
    if (link !== undefined) return link;
    const mixed = mixedSchema(frame.header, chain.last.header, { stream: keys.stream, seq, key });
    if (mixed !== undefined) return mixed;
    const raws = opLists(frame, origin);
    const own = raws[raws.length - 1]!;
    // A span delta is checked against the deltas it spans, which restores of later seqs skip.
    const spanned = chain.span;
    if (isSpanDelta(frame) && spanned !== undefined && frame.header.jump === spanned.seq) {
      const why = spanMismatch(frame, raws, spanned);
      if (why !== undefined) return corrupt(keys.stream, seq, key, `span delta does not match: ${why}`);
    }
    const state = applyOps(chain.state, opsOf(own, origin), frame.version);
    const span = nextSpan(spanned, frame.header.span, chain.base, {
      seq,
      crc: frame.crc,
      own,
      ledger: frame.header.ledger ?? [],
      deltaBytes: 0,
    });
    return { base: chain.base, state, ledger: ledgerOf(frame, chain.ledger), last: frame, span };
  } catch (err) {
    if (err instanceof PatchMismatch)
      return corrupt(keys.stream, seq, key, `delta does not apply: ${err.message}`, err);
    if (isStatefoldError(err, 'CORRUPT')) return err;
    throw err;
  }

  function spanMismatch(f: Frame, raws: Uint8Array[], spanned: SpanState): string | undefined {
    if (f.header.jumpCrc !== spanned.crc) return `the checksum of seq ${spanned.seq} differs`;
    if (raws.length !== spanned.raws.length + 1)
      return `it holds ${raws.length} operation lists for ${spanned.raws.length + 1} seqs`;
    for (let i = 0; i < spanned.raws.length; i++)
      if (Buffer.compare(raws[i]!, spanned.raws[i]!) !== 0)
        return `its operations for seq ${spanned.seq + i + 1} differ`;
    if (!isDeepStrictEqual(f.header.spanLedger ?? [], spanned.ledger)) return 'its effect ledger changes differ';
    return undefined;
  }

  function ledgerOf(f: Frame, ledger: Ledger): Ledger {
    try {
      return applyEntries(ledger, f.header.ledger);
    } catch (err) {
      throw corrupt(keys.stream, seq, key, `effect ledger: ${(err as Error).message}`, err);
    }
  }
}
