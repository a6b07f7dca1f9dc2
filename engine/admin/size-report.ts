/**
 * sizeReport: where a stream's bytes go. The state of one checkpoint sized by JSON path (as msgpack
 * stores it, before compression), the large values it holds more than once, what the retained
 * objects cost (bases, deltas, headers) and each path's share of it, and how the state grew over
 * the last checkpoints. An admin read: it reads every retained object once, a window at a time.
 */
import { unescapePathComponent } from 'fast-json-patch';
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertSeq, assertStore, invalidArgument, readingOf } from '../args.js';
import { createCapturer } from '../capture/index.js';
import { failure } from '../errors.js';
import { decodePayload, type Frame } from '../format/frame.js';
import { OP_REMOVE, type Op } from '../format/ops.js';
import { largestOps, sizeOf, walkSizes } from '../format/sizes.js';
import { committedView } from '../log/committed.js';
import { opLists, opsOf } from '../log/frames.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { listLog, tailKey } from '../log/listing.js';
import { mapLimit, readFrame, vanished } from '../log/read.js';
import { restoreRange } from '../restore/range.js';
import type { RestoreOptions } from '../restore/types.js';

/** Seqs restored by one restoreRange call of the growth. */
const WINDOW = 8;

/** Options of `sizeReport`. */
export interface SizeReportOptions extends Pick<
  RestoreOptions,
  'encryption' | 'signal' | 'storeTimeoutMs' | 'maxPayloadBytes' | 'concurrency'
> {
  /** The checkpoint whose state is sized (default: the newest). */
  seq?: number;
  /** How many of the largest subtrees to report (default 20). */
  top?: number;
  /** How many checkpoints, up to `seq`, the growth covers (default 20). */
  last?: number;
}

/** A subtree of the state, with what it takes. */
export interface PathReport {
  /** Its JSON Pointer (RFC 6901). */
  path: string;
  /** Its size in the state, as stored before compression (msgpack). */
  bytes: number;
  /** `bytes` as a share (0 to 1) of the whole state's. */
  ofState: number;
  /**
   * The stored bytes (compressed) of the retained objects that hold it: its part of each base's
   * payload and of each delta's operations, each at that object's compression ratio. Estimated.
   */
  stored: number;
  /** `stored` as a share of every retained object's bytes. */
  ofStored: number;
}

/** A string or binary value held at more than one path of the state. */
export interface RepeatedValue {
  /** Its size, once. */
  bytes: number;
  /** How many paths hold it. */
  copies: number;
  /** The bytes the copies after the first take: `bytes * (copies - 1)`. */
  extra: number;
  paths: string[];
}

/** One checkpoint of the growth: what its state took, and what grew most since the one before. */
export interface StepGrowth {
  seq: number;
  kind: 'base' | 'delta';
  /** The stored object's bytes. */
  bytes: number;
  /** Its state's size before compression. */
  stateBytes: number;
  /** `stateBytes` minus the previous retained checkpoint's (0 for the first retained). */
  growth: number;
  /** The paths added or replaced since the previous checkpoint with the most bytes (at most 3), largest first. */
  grew: { path: string; bytes: number }[];
}

/** What `sizeReport` gives. */
export interface SizeReport {
  stream: string;
  /** The checkpoint sized. */
  seq: number;
  /** Its state's size as stored before compression (msgpack). */
  stateBytes: number;
  /** The largest subtrees (ancestors included), largest first. */
  paths: PathReport[];
  /** Strings and binary values of at least 256 bytes held at more than one path, most extra bytes first. */
  repeated: RepeatedValue[];
  /** The retained objects: how many, and their bytes, by kind; `headers` is every frame's bytes outside its payload (meta, effect ledger, framing). */
  stored: {
    checkpoints: number;
    bases: number;
    baseBytes: number;
    deltas: number;
    deltaBytes: number;
    headerBytes: number;
    totalBytes: number;
  };
  /** The last checkpoints up to `seq`, oldest first. */
  growth: StepGrowth[];
}

/**
 * Sizes checkpoint `seq` (default: the newest) of `stream` and the objects the store retains for
 * it. Reads every retained object once; states are read as stored (no schema upcast). Rejects
 * NOT_FOUND for a stream without checkpoints or a seq it does not retain, and as `restore` does
 * for damage (CORRUPT) or a missing key (KEY_UNAVAILABLE).
 */
export async function sizeReport(store: Store, stream: string, options: SizeReportOptions = {}): Promise<SizeReport> {
  assertStore(store, 'sizeReport');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'sizeReport', keys.stream);
  if (options.seq !== undefined) assertSeq(options.seq, keys.stream, 'sizeReport');
  const top = count(options.top, 20, 'top', keys.stream);
  const last = count(options.last, 20, 'last', keys.stream);
  const reading = readingOf(options, 'sizeReport');
  store = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'sizeReport'));
  const { signal } = options;
  const view = await committedView(store, await listLog(store, keys, signal), reading, signal);
  const newest = view.slots[view.slots.length - 1]?.seq;
  const seq = options.seq ?? newest;
  if (seq === undefined || newest === undefined || seq > newest || seq < view.slots[0]!.seq)
    throw failure('NOT_FOUND', { op: 'sizeReport', stream: keys.stream, seq }, 'no retained checkpoint there');
  const from = Math.max(view.slots[0]!.seq, seq - last);
  const { state, growth } = await growthUpTo(store, keys.stream, from, seq, last, options);
  if (state === undefined)
    throw failure('NOT_FOUND', { op: 'sizeReport', stream: keys.stream, seq }, 'no retained checkpoint there');
  const walked = walkSizes(state.state, { top });
  const paths = walked.top.map((p) => ({ path: p.path, tokens: tokensOf(p.path), stored: 0 }));
  const stored = { checkpoints: 0, bases: 0, baseBytes: 0, deltas: 0, deltaBytes: 0, headerBytes: 0, totalBytes: 0 };
  const objects = new Map<number, { kind: 'base' | 'delta'; bytes: number }>();
  const window = options.concurrency ?? 16;
  for (let i = 0; i < view.slots.length; i += window) {
    const slots = view.slots.slice(i, i + window);
    const frames = await mapLimit(slots, window, (slot) =>
      readFrame(store, keys, slot.seq, tailKey(slot), reading, signal).catch((err: unknown) => {
        if (vanished(err)) return undefined; // (deleted by retention since the listing)
        throw err;
      }),
    );
    for (const [j, frame] of frames.entries()) {
      if (frame === undefined || frame.kind === 'fence') continue;
      const origin = { stream: keys.stream, seq: slots[j]!.seq, key: tailKey(slots[j]!) };
      objects.set(origin.seq, { kind: frame.kind, bytes: frame.bytes });
      stored.checkpoints++;
      stored[frame.kind === 'base' ? 'bases' : 'deltas']++;
      stored[frame.kind === 'base' ? 'baseBytes' : 'deltaBytes'] += frame.bytes;
      stored.headerBytes += frame.bytes - frame.payload.byteLength;
      stored.totalBytes += frame.bytes;
      attribute(frame, origin, paths);
    }
  }
  const share = (part: number, whole: number): number => (whole === 0 ? 0 : part / whole);
  return {
    stream: keys.stream,
    seq,
    stateBytes: walked.bytes,
    paths: walked.top.map((p, i) => ({
      path: p.path,
      bytes: p.bytes,
      ofState: share(p.bytes, walked.bytes),
      stored: Math.round(paths[i]!.stored),
      ofStored: share(paths[i]!.stored, stored.totalBytes),
    })),
    repeated: walked.repeated.map((r) => ({
      bytes: r.bytes,
      copies: r.paths.length,
      extra: r.bytes * (r.paths.length - 1),
      paths: r.paths,
    })),
    stored,
    growth: growth.map((g) => ({
      ...g,
      kind: objects.get(g.seq)?.kind ?? 'delta',
      bytes: objects.get(g.seq)?.bytes ?? 0,
    })),
  };
}

function count(value: unknown, fallback: number, name: string, stream: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    invalidArgument('sizeReport', `${name} ${String(value)} is not a non-negative integer`, stream);
  return value;
}

type Tracked = { path: string; tokens: string[]; stored: number };

/** Adds each tracked path's part of a frame's payload, at the frame's compression ratio. */
function attribute(frame: Frame, origin: { stream: string; seq: number; key: string }, paths: Tracked[]): void {
  if (paths.length === 0 || frame.rawLength === 0) return;
  const ratio = frame.payload.byteLength / frame.rawLength;
  if (frame.kind === 'base') {
    const state = decodePayload(frame, origin);
    for (const p of paths) {
      const sub = at(state, p.tokens);
      if (sub !== undefined) p.stored += sizeOf(sub) * ratio;
    }
    return;
  }
  // (A span delta's copies of earlier deltas' operations are stored too: counted as well.)
  for (const raw of opLists(frame, origin)) {
    for (const op of opsOf(raw, origin) as Op[]) {
      if (op[0] === OP_REMOVE) continue;
      const target = op[1];
      for (const p of paths) {
        if (target === p.path || target.startsWith(`${p.path}/`)) p.stored += sizeOf(op) * ratio;
        else if (p.path.startsWith(`${target}/`)) {
          const sub = at(op[2], p.tokens.slice(tokensOf(target).length));
          if (sub !== undefined) p.stored += sizeOf(sub) * ratio;
        }
      }
    }
  }
}

function tokensOf(pointer: string): string[] {
  return pointer === '' ? [] : pointer.slice(1).split('/').map(unescapePathComponent);
}

/** The value at `tokens` inside `value`, or undefined. */
function at(value: unknown, tokens: string[]): unknown {
  let node = value;
  for (const t of tokens) {
    if (node === null || typeof node !== 'object' || !Object.prototype.hasOwnProperty.call(node, t)) return undefined;
    node = (node as Record<string, unknown>)[t];
  }
  return node;
}

/**
 * The state at `seq` and the growth of the last `last` checkpoints up to it, from the retained
 * states from `from` on (one more than `last` when history allows, for the first one's growth),
 * restored a window at a time and held two at a time (the one before, and this one).
 */
async function growthUpTo(
  store: Store,
  stream: string,
  from: number,
  seq: number,
  last: number,
  options: SizeReportOptions,
): Promise<{ state: { seq: number; state: unknown } | undefined; growth: Omit<StepGrowth, 'kind' | 'bytes'>[] }> {
  const { encryption, signal, storeTimeoutMs, maxPayloadBytes, concurrency } = options;
  const reading = { encryption, signal, storeTimeoutMs, maxPayloadBytes, concurrency };
  for (const k of Object.keys(reading) as (keyof typeof reading)[]) if (reading[k] === undefined) delete reading[k];
  const capturer = createCapturer('copy');
  const growth: Omit<StepGrowth, 'kind' | 'bytes'>[] = [];
  let before: { seq: number; state: unknown; bytes: number } | undefined;
  // (A few seqs a call: restoreRange holds each state of its range at once.)
  for (let lo = from; lo <= seq; lo += WINDOW) {
    const hi = Math.min(seq, lo + WINDOW - 1);
    for (const r of await restoreRange(store, stream, { ...reading, from: lo, to: hi, schema: 'stored' })) {
      const stateBytes = sizeOf(r.state);
      if (before === undefined) capturer.seed(r.state);
      const ops = before === undefined ? [] : capturer.capture(r.state).ops;
      // (The first state is only the one before, unless history holds no more than `last`.)
      if (before !== undefined || seq - r.seq < last) {
        const grew = largestOps(ops, 3);
        growth.push({ seq: r.seq, stateBytes, growth: before === undefined ? 0 : stateBytes - before.bytes, grew });
      }
      before = { seq: r.seq, state: r.state, bytes: stateBytes };
    }
  }
  return { state: before?.seq === seq ? before : undefined, growth: last === 0 ? [] : growth.slice(-last) };
}
