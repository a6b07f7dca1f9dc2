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
import { decodePayload, SPAN_VERSION, type Frame, type FrameHeader, type FrameKind } from '../format/frame.js';
import type { SealingKey } from '../format/keyring.js';
import { encodeFrameOffThread, frameOffThread } from '../format/offload.js';
import { encodeSpan } from '../format/span.js';
import { encodeValueInSlices } from '../format/sliced.js';
import { ownOps } from '../log/frames.js';
import { canJump, nextSpan, type SpanState } from '../log/chain.js';
import { opsVersion } from '../format/ops.js';
import type { StreamKeys } from '../log/keys.js';
import type { ResolvedPolicy } from '../policy.js';
import { applyOps } from '../restore/fold.js';
import { BudgetCheck } from './budget.js';
import type { Committer } from './commit.js';
import type { Head } from './head.js';

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

/** What a commit queue works with: who writes, how, where it starts, and whom it tells. */
export interface CommitQueueOptions {
  keys: StreamKeys;
  identity: { epoch: number; writer: string };
  policy: ResolvedPolicy;
  /** The capturer whose captures the tasks hold; told when the oldest capture still to encode moves on. */
  capturer: Capturer;
  committer: Committer;
  /** Called after each base commits (hints, the index and retention run behind bases): its seq, the base of the chain before it (0: none), its meta as stored. */
  onBase: (seq: number, prev: number, meta: Uint8Array | undefined) => void;
  /** The schema fields every frame it writes records (none at schema version 1). */
  schemaFields: Pick<FrameHeader, 'schemaVersion' | 'readableFrom'>;
  /** The last committed checkpoint when the engine opened. */
  head: Head;
  /** The key of the first commit (the one after the engine's fence). */
  nextKey: string;
  /** The key every frame is sealed with (an encrypted stream), else undefined. */
  sealing: SealingKey | undefined;
  /** Whether the first commit must be a base (the newest chain's base was sealed with another key). */
  needBase: boolean;
}

/** How the next seq is written: its seq, the chain's span length, and the span delta it can be, if any. */
interface Plan {
  seq: number;
  /** The policy's span length (1: no span deltas). */
  every: number;
  /** The chain's span state, when the chain has the policy's span length. */
  span: SpanState | undefined;
  /** Whether the seq, written as a delta, is a span delta jumping from `span`'s position. */
  spanning: boolean;
}

/** Commits tasks in order; remembers the head, and whether this engine has been fenced. */
export class CommitQueue {
  readonly #o: Omit<CommitQueueOptions, 'head' | 'nextKey' | 'needBase'>;
  #head: Head;
  /** The key the next commit goes to. */
  #nextKey: string;
  #needBase = false;
  readonly #tasks: Task[] = [];
  #draining: Promise<void> | undefined;
  #fenced: StatefoldError | undefined;
  readonly #budget: BudgetCheck | undefined;

  constructor(options: CommitQueueOptions) {
    const { head, nextKey, needBase, ...rest } = options;
    this.#o = rest;
    const budget = rest.policy.budget;
    this.#budget = budget && new BudgetCheck(budget, rest.keys.stream);
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
    this.#o.capturer.encodingFrom(this.#tasks[0]!.capture.id);
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
      this.#budget?.observe(task.capture.ops);
      try {
        if (this.#fenced) throw this.#fenced;
        task.resolve(await this.#checkpoint(task));
      } catch (err) {
        if (isStatefoldError(err, 'FENCED')) this.#fenced ??= err;
        // The chain must not depend on what failed: the next commit is a full base.
        else this.#needBase = true;
        task.reject(err);
      }
      this.#tasks.shift();
      this.#o.capturer.encodingFrom(this.#tasks[0]?.capture.id ?? Infinity);
    }
  }

  /** Encodes and commits one task; retries on a later seq only when our own earlier write turns out to have landed. */
  async #checkpoint(task: Task): Promise<CheckpointInfo> {
    for (;;) {
      const plan = this.#plan();
      // Over a budget: BUDGET_EXCEEDED before anything is encoded or written ('reject'), or a warning.
      this.#budget?.checkState(plan.seq, task.capture.state, task.capture.ops);
      const { kind, frame, ops } = await this.#encode(task, plan);
      this.#budget?.checkObject(plan.seq, task.capture.ops, frame.byteLength);
      const key = this.#nextKey;
      const outcome = await this.#o.committer.commit(key, plan.seq, frame);
      if (outcome === 'ours') return this.#committed(task, plan, key, kind, frame, ops);
      this.#adoptLanded(outcome, key, plan.seq);
    }
  }

  /** The next seq, and whether it can be a span delta (format/span.ts: a chain keeps the span length it was started with). */
  #plan(): Plan {
    const c = this.#head;
    const seq = c.seq + 1;
    const every = this.#o.policy.spanEvery;
    const span = every > 1 && c.span?.every === every ? c.span : undefined;
    return { seq, every, span, spanning: span !== undefined && canJump(span, c.baseSeq, seq) };
  }

  /**
   * Encodes the task as a delta when the policy allows, else (or when the deltas a restore would
   * fold outgrow the base) as a base.
   */
  async #encode(
    task: Task,
    plan: Plan,
  ): Promise<{ kind: 'base' | 'delta'; frame: Uint8Array; ops: Uint8Array | undefined }> {
    const c = this.#head;
    const { seq, every, span, spanning } = plan;
    const resolver = this.#o.capturer.resolverFor(task.capture.id);
    const policy = this.#o.policy;
    let kind: 'base' | 'delta' =
      this.#needBase ||
      c.state === undefined ||
      seq - c.baseSeq >= policy.baseEvery ||
      (every > 1 && span === undefined)
        ? 'base'
        : 'delta';
    if (kind === 'delta') {
      const ops = await encodeValueInSlices(task.capture.ops, resolver);
      // Version 1 unless the delta appends: streams that never append stay readable by older statefold.
      const frame = await frameOffThread(
        'delta',
        this.#header('delta', task, plan),
        spanning ? encodeSpan([...span!.raws, ops]) : ops,
        spanning ? SPAN_VERSION : opsVersion(task.capture.ops),
        this.#o.sealing,
      );
      // Redis-style size trigger: once the deltas a restore folds outgrow the base, a new base is cheaper to restore.
      if (this.#foldedAfter(plan, frame) <= policy.maxDeltaRatio * c.baseBytes) return { kind, frame, ops };
      kind = 'base';
    }
    // A large base is encoded in slices and compressed on the frame worker: the caller's loop stays free.
    const frame = await encodeFrameOffThread(
      'base',
      this.#header('base', task, plan),
      task.capture.state,
      resolver,
      1,
      this.#o.sealing,
    );
    return { kind, frame, ops: undefined };
  }

  /** The stored delta bytes a restore of the planned seq folds, written as the delta `frame`. */
  #foldedAfter(plan: Plan, frame: Uint8Array): number {
    return (plan.spanning ? plan.span!.deltaBytes : this.#head.deltaBytes) + frame.byteLength;
  }

  #header(kind: FrameKind, task: Task, plan: Plan): FrameHeader {
    const c = this.#head;
    const { seq, every, span, spanning } = plan;
    const h: FrameHeader = {
      stream: this.#o.keys.stream,
      seq,
      epoch: this.#o.identity.epoch,
      writer: this.#o.identity.writer,
      createdAt: task.createdAt,
      baseSeq: kind === 'base' ? seq : c.baseSeq,
    };
    if (kind === 'delta') h.parent = c.crc;
    if (task.meta !== undefined) h.meta = task.meta;
    Object.assign(h, this.#o.schemaFields);
    const entries = kind === 'base' ? ledgerEntries(task.ledger) : task.ledgerChanges;
    if (entries.length > 0) h.ledger = entries;
    if (every > 1) h.span = every;
    if (kind === 'delta' && spanning) {
      h.jump = span!.seq;
      h.jumpCrc = span!.crc;
      if (span!.ledger.length > 0) h.spanLedger = span!.ledger;
    }
    return h;
  }

  /** Our frame is the planned seq: it becomes the head. */
  #committed(
    task: Task,
    plan: Plan,
    key: string,
    kind: 'base' | 'delta',
    frame: Uint8Array,
    ops: Uint8Array | undefined,
  ): CheckpointInfo {
    const c = this.#head;
    const { seq, every, span } = plan;
    const crc = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).readUInt32LE(frame.byteLength - 4);
    const baseSeq = kind === 'base' ? seq : c.baseSeq;
    const deltaBytes = kind === 'base' ? 0 : this.#foldedAfter(plan, frame);
    const next =
      every > 1
        ? nextSpan(kind === 'base' ? undefined : span, every, baseSeq, {
            seq,
            crc,
            // Kept for the next span delta (a copy: the encoder's bytes may be reused).
            own: ops === undefined ? new Uint8Array(0) : new Uint8Array(ops),
            ledger: task.ledgerChanges,
            deltaBytes,
          })
        : undefined;
    this.#head = {
      seq,
      crc,
      state: task.capture.state,
      meta: task.meta,
      baseSeq,
      baseBytes: kind === 'base' ? frame.byteLength : c.baseBytes,
      deltaBytes,
      span: next,
    };
    this.#nextKey = this.#o.keys.slot(seq + 1);
    this.#needBase = false;
    if (kind === 'base') this.#o.onBase(seq, c.baseSeq, task.meta);
    return {
      seq,
      kind,
      bytes: frame.byteLength,
      ops: task.capture.ops.length,
      base: baseSeq,
      createdAt: task.createdAt,
      key,
    };
  }

  /**
   * An earlier write of ours, reported failed, had landed after all: it is seq `seq`. Rebuilds its
   * state from the frame, so that engine.state and engine.seq stay one checkpoint; the next commit
   * is a base.
   */
  #adoptLanded(landed: Frame, key: string, seq: number): void {
    const c = this.#head;
    const origin = { stream: this.#o.keys.stream, key, seq };
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
    this.#nextKey = this.#o.keys.slot(seq + 1);
    this.#needBase = true;
  }
}
