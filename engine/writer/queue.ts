/**
 * The commit queue: checkpoints commit one at a time, in call order. Encoding and writing start on
 * a later turn of the event loop, never inside checkpoint(), so the caller's stall is the capture
 * alone (Flink's synchronous/asynchronous split). Each task is encoded as a base or a delta by the
 * policy, framed, and committed with one create-if-absent write (commit.ts).
 */
import type { Capture, Capturer } from '../capture/index.js';
import { thaw } from '../capture/index.js';
import { ledgerEntries, type Ledger, type LedgerEntry } from '../effects/ledger.js';
import { isStatefoldError, type StatefoldError } from '../errors.js';
import { decodePayload, SPAN_VERSION, type FrameHeader, type FrameKind } from '../format/frame.js';
import type { SealingKey } from '../format/keyring.js';
import { encodeFrameOffThread, frameOffThread } from '../format/offload.js';
import { encodeSpan } from '../format/span.js';
import { encodeValueInSlices } from '../format/sliced.js';
import { ownOps, type SpanHead } from '../restore/chain.js';
import { opsVersion } from '../format/ops.js';
import type { StreamKeys } from '../log/keys.js';
import type { ResolvedPolicy } from '../policy.js';
import { applyOps } from '../restore/fold.js';
import type { SlotWriter } from './commit.js';

/** What a committed checkpoint is. */
export interface CheckpointInfo {
  /** Its seq: 1 for the first checkpoint of a stream, then one more each time. */
  seq: number;
  /** Whether it was stored as a full base or as a delta on the previous seq. */
  kind: 'base' | 'delta';
  /** Size of the stored object in bytes. */
  bytes: number;
  /** Number of JSON Patch operations since the previous checkpoint. */
  ops: number;
  /** The seq of the base its chain starts from (its own seq for a base). */
  base: number;
  /** When it was captured (ms since the epoch). */
  createdAt: number;
  /** The store key it was committed under. */
  key: string;
}

/** One checkpoint waiting to be committed. */
export interface Task {
  capture: Capture;
  /** Meta, encoded. */
  meta: Uint8Array | undefined;
  createdAt: number;
  /** The effect ledger as of this capture, and what changed in it since the previous capture. */
  ledger: Ledger;
  ledgerChanges: LedgerEntry[];
  resolve(info: CheckpointInfo): void;
  reject(err: unknown): void;
}

/** What the engine knows of the stream's last committed checkpoint. */
export interface Head {
  seq: number;
  /** CRC-32 of its frame: the next delta's `parent`. */
  crc: number;
  /** Its captured state; undefined for a new stream, or when unknown (then the next checkpoint must be a base). */
  state: unknown;
  /** Its meta, encoded. */
  meta: Uint8Array | undefined;
  baseSeq: number;
  /** Stored sizes of its chain's base and of the deltas since (the base policy's size trigger). */
  baseBytes: number;
  deltaBytes: number;
  /** A chain written with span deltas: what its next span delta needs. */
  span?: SpanHead | undefined;
}

/** The head of a stream with no checkpoint. */
export const EMPTY_HEAD: Head = Object.freeze({
  seq: 0,
  crc: 0,
  state: undefined,
  meta: undefined,
  baseSeq: 0,
  baseBytes: 0,
  deltaBytes: 0,
});

/** Commits tasks in order; remembers the head, and whether this engine has been fenced. */
export class CommitQueue {
  #head: Head;
  /** The key the next commit goes to. */
  #nextKey: string;
  #needBase = false;
  readonly #tasks: Task[] = [];
  #draining: Promise<void> | undefined;
  #fenced: StatefoldError | undefined;

  constructor(
    private readonly keys: StreamKeys,
    private readonly identity: { epoch: number; writer: string },
    private readonly policy: ResolvedPolicy,
    private readonly capturer: Capturer,
    private readonly writer: SlotWriter,
    /** Called after each base commits, with its seq (hints and retention run behind bases). */
    private readonly onBase: (seq: number) => void,
    head: Head,
    nextKey: string,
    /** The key every frame is sealed with (an encrypted stream), else undefined. */
    private readonly sealing: SealingKey | undefined,
    /** Whether the first commit must be a base (the newest chain's base was sealed with another key). */
    needBase: boolean,
  ) {
    this.#head = head;
    this.#nextKey = nextKey;
    this.#needBase = needBase;
  }

  /** The last committed checkpoint. */
  get head(): Head {
    return this.#head;
  }

  /** Tasks not yet committed. */
  get length(): number {
    return this.#tasks.length;
  }

  /** The FENCED error, once a newer engine has taken the stream over. */
  get fenced(): StatefoldError | undefined {
    return this.#fenced;
  }

  /** Makes the next commit a base, whatever the policy says. */
  requireBase(): void {
    this.#needBase = true;
  }

  /** Queues a task; it commits after every task queued before it. */
  push(task: Task): void {
    this.#tasks.push(task);
    // Leaf versions older than the oldest capture still to be encoded can be dropped.
    this.capturer.oldestUnencoded = this.#tasks[0]!.capture.id;
    this.#kick();
  }

  /** Resolves when every queued task has settled. */
  async idle(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  #kick(): void {
    if (this.#draining) return;
    this.#draining = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.#drain())
      .finally(() => {
        this.#draining = undefined;
        if (this.#tasks.length > 0) this.#kick();
      });
  }

  async #drain(): Promise<void> {
    while (this.#tasks.length > 0) {
      const task = this.#tasks[0]!;
      try {
        if (this.#fenced) throw this.#fenced;
        task.resolve(await this.#commit(task));
      } catch (err) {
        if (isStatefoldError(err, 'FENCED')) this.#fenced ??= err;
        // The chain must not depend on what failed: the next commit is a full base.
        else this.#needBase = true;
        task.reject(err);
      }
      this.#tasks.shift();
      this.capturer.oldestUnencoded = this.#tasks[0]?.capture.id ?? Infinity;
    }
  }

  /** Encodes and commits one task; retries on a later seq only when our own earlier write turns out to have landed. */
  async #commit(task: Task): Promise<CheckpointInfo> {
    const stream = this.keys.stream;
    for (;;) {
      const c = this.#head;
      const seq = c.seq + 1;
      const resolver = this.capturer.resolverFor(task.capture.id);
      // Span deltas (format/span.ts): a chain keeps the span length it was started with.
      const every = this.policy.spanEvery;
      const span = every > 1 && c.span?.every === every ? c.span : undefined;
      const atPosition = span !== undefined && (seq - c.baseSeq) % every === 0;
      const spanning = atPosition && span.seq === seq - every && span.raws.length === every - 1;
      const header = (kind: FrameKind): FrameHeader => {
        const h: FrameHeader = {
          stream,
          seq,
          epoch: this.identity.epoch,
          writer: this.identity.writer,
          createdAt: task.createdAt,
          baseSeq: kind === 'base' ? seq : c.baseSeq,
        };
        if (kind === 'delta') h.parent = c.crc;
        if (task.meta !== undefined) h.meta = task.meta;
        const entries = kind === 'base' ? ledgerEntries(task.ledger) : task.ledgerChanges;
        if (entries.length > 0) h.ledger = entries;
        if (every > 1) h.span = every;
        if (kind === 'delta' && spanning) {
          h.jump = span.seq;
          h.jumpCrc = span.crc;
          if (span.ledger.length > 0) h.spanLedger = span.ledger;
        }
        return h;
      };
      let kind: FrameKind =
        this.#needBase ||
        c.state === undefined ||
        seq - c.baseSeq >= this.policy.baseEvery ||
        (every > 1 && span === undefined)
          ? 'base'
          : 'delta';
      let frame: Uint8Array | undefined;
      let ops: Uint8Array | undefined;
      if (kind === 'delta') {
        ops = await encodeValueInSlices(task.capture.ops, resolver);
        // Version 1 unless the delta appends: streams that never append stay readable by older statefold.
        frame = await frameOffThread(
          'delta',
          header('delta'),
          spanning ? encodeSpan([...span.raws, ops]) : ops,
          spanning ? SPAN_VERSION : opsVersion(task.capture.ops),
          this.sealing,
        );
        // Redis-style size trigger: once the deltas a restore folds outgrow the base, a new base is cheaper to restore.
        const folded = (spanning ? span.deltaBytes : c.deltaBytes) + frame.byteLength;
        if (folded > this.policy.maxDeltaRatio * c.baseBytes) kind = 'base';
      }
      // A large base is encoded in slices and compressed on the frame worker: the caller's loop stays free.
      if (kind === 'base')
        frame = await encodeFrameOffThread('base', header('base'), task.capture.state, resolver, 1, this.sealing);
      frame = frame!;
      const key = this.#nextKey;
      const outcome = await this.writer.write(key, seq, frame);
      if (outcome === 'ours') {
        const crc = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).readUInt32LE(frame.byteLength - 4);
        const deltaBytes = kind === 'base' ? 0 : (spanning ? span.deltaBytes : c.deltaBytes) + frame.byteLength;
        // A span position starts the next span, even one that could not be a span delta (then
        // readers walk the seqs before it one by one).
        let next: SpanHead | undefined;
        if (every > 1 && (kind === 'base' || atPosition)) next = { every, seq, crc, raws: [], ledger: [], deltaBytes };
        else if (span !== undefined)
          // Kept for the next span delta (a copy: the encoder's bytes may be reused).
          next = {
            ...span,
            raws: [...span.raws, new Uint8Array(ops!)],
            ledger: [...span.ledger, ...task.ledgerChanges],
          };
        this.#head = {
          seq,
          crc,
          state: task.capture.state,
          meta: task.meta,
          baseSeq: kind === 'base' ? seq : c.baseSeq,
          baseBytes: kind === 'base' ? frame.byteLength : c.baseBytes,
          deltaBytes,
          span: next,
        };
        this.#nextKey = this.keys.slot(seq + 1);
        this.#needBase = false;
        if (kind === 'base') this.onBase(seq);
        return {
          seq,
          kind,
          bytes: frame.byteLength,
          ops: task.capture.ops.length,
          base: kind === 'base' ? seq : c.baseSeq,
          createdAt: task.createdAt,
          key,
        };
      }
      // An earlier write of ours, reported failed, had landed after all: it is seq `seq`.
      // Rebuild its state from the frame, so that engine.state and engine.seq stay one checkpoint.
      const landed = outcome;
      const origin = { stream, key, seq };
      let state: unknown;
      if (landed.kind === 'base') state = decodePayload(landed, origin);
      else if (c.state !== undefined && landed.header.parent === c.crc)
        state = applyOps(thaw(c.state), ownOps(landed, origin), landed.version);
      this.#head = {
        seq,
        crc: landed.crc,
        state,
        meta: landed.header.meta,
        baseSeq: landed.header.baseSeq!,
        baseBytes: 0,
        deltaBytes: 0,
      };
      this.#nextKey = this.keys.slot(seq + 1);
      this.#needBase = true;
    }
  }
}
