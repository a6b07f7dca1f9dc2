/**
 * The snapshot engine: one writer of one stream.
 *
 *   checkpoint(state)  capture (sync: diff + validate, engine/diff.ts)
 *                      -> queue, in call order
 *                      -> encode (msgpack; base or delta by policy) -> frame (lz4, checksum)
 *                      -> commit (one create-if-absent write of the seq's key)
 *
 * `open` claims the stream with a writer epoch: it writes a fence frame into the next free slot
 * (engine/log.ts), so that an older engine's next commit finds its key taken and fails FENCED.
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../storage-adapters/store.js';
import { StatefoldError, describeCause, isStatefoldError } from './errors.js';
import { captureValue, createCapturer, thaw, type Capture, type Capturer, type UpdateMode } from './capture/index.js';
import type { Op } from './format/ops.js';
import { decodeValue, encodeValue } from './format/values.js';
import { decodeFrame, decodePayload, encodeFrame, type Frame, type FrameHeader, type FrameKind, type FrameLimits } from './format/frame.js';
import { applyOps } from './restore/fold.js';
import { assertStore, limitsOf } from './args.js';
import { committedView } from './log/committed.js';
import { StreamKeys } from './log/keys.js';
import { listLog } from './log/listing.js';
import { resolvePolicy, type Policy, type ResolvedPolicy } from './policy.js';
import { readChain } from './restore/chain.js';
import {
  EMPTY_LEDGER,
  assertToken,
  expired,
  ledgerEntries,
  resolveEffectRetention,
  storeRecord,
  type EffectRecord,
  type EffectRetention,
  type Ledger,
  type LedgerEntry,
  type PendingPolicy,
} from './effects/ledger.js';
import { gc, resolveRetention, type GcReport, type Retention } from './retention.js';

/** Options of `SnapshotEngine.open`. */
export interface EngineOptions {
  /** Where checkpoints are stored: MemoryStore, FileStore, S3Store, or any Store. */
  store: Store;
  /** The stream id: any non-empty string of up to 512 UTF-8 bytes. */
  stream: string;
  /** When bases are written and when `step()` checkpoints (see Policy for the defaults). */
  policy?: Policy;
  /**
   * How the caller changes its state between checkpoints. `'copy'` (default): any way, in place
   * included; each checkpoint walks the whole state. `'immutable'`: by replacing objects, never
   * mutating them (structural sharing); checkpoints skip unchanged subtrees and the engine
   * freezes the objects it captures, so an accidental in-place change throws instead of being lost.
   */
  updates?: UpdateMode;
  /** Largest uncompressed frame payload read back (default 1 GiB). */
  maxPayloadBytes?: number;
  /**
   * Which checkpoints to keep. Off by default: every checkpoint is kept. When set, the engine
   * deletes older ones in the background after each base it commits (see `gc`), never one that a
   * kept checkpoint needs.
   */
  retention?: Retention;
  /** What `effect()` does with a token found pending after a crash (default `'throw'`); see PendingPolicy. */
  onPendingEffect?: PendingPolicy;
  /** How long settled effect tokens are kept (defaults: 24 hours, 10,000 tokens). */
  effectRetention?: EffectRetention;
}

/** Options of `effect`. */
export interface EffectOptions<S = unknown, T = unknown> {
  /** What to do if the token is found pending (overrides the engine's `onPendingEffect`). */
  onPending?: PendingPolicy<T>;
  /** A state to checkpoint together with the intent (default: the last checkpointed state, unchanged). */
  state?: S;
  /** Meta for the intent's checkpoint. */
  meta?: unknown;
}

/** Options of `checkpoint` and `step`. */
export interface CheckpointOptions {
  /** Any encodable value stored with the checkpoint and returned by `restore` and `listCheckpoints`. */
  meta?: unknown;
}

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

interface Task {
  capture: Capture;
  meta: Uint8Array | undefined;
  createdAt: number;
  /** The effect ledger as of this capture, and what changed in it since the previous capture. */
  ledger: Ledger;
  ledgerChanges: LedgerEntry[];
  resolve(info: CheckpointInfo): void;
  reject(err: unknown): void;
}

/** What the engine knows of the stream's last committed checkpoint. */
interface Committed {
  seq: number;
  /** CRC-32 of its frame: the next delta's `parent`. */
  crc: number;
  /** Its captured tree; undefined for a new stream, or when unknown (then the next checkpoint must be a base). */
  tree: unknown;
  /** Its meta, encoded (decoded when read through `engine.meta`). */
  meta: Uint8Array | undefined;
  baseSeq: number;
  baseBytes: number;
  deltaBytes: number;
}

const MAX_OPEN_ATTEMPTS = 64;

/** Checkpoints one stream's state incrementally; opened with `SnapshotEngine.open`. */
export class SnapshotEngine<S = unknown> {
  readonly store: Store;
  readonly stream: string;
  /** The writer epoch this engine claimed the stream with. */
  readonly epoch: number;
  readonly updates: UpdateMode;
  readonly policy: ResolvedPolicy;
  readonly #keys: StreamKeys;
  readonly #writer: string;
  readonly #capturer: Capturer;
  readonly #limits: FrameLimits;
  #committed: Committed;
  /** The key the next commit goes to. */
  #nextKey: string;
  #needBase = false;
  readonly #queue: Task[] = [];
  #draining: Promise<void> | undefined;
  #fenced: StatefoldError | undefined;
  #closed = false;
  // step() bookkeeping
  #steps = 0;
  #lastCheckpointAt = Date.now();
  #stepState: { state: unknown; options: CheckpointOptions | undefined } | undefined;
  readonly #retention: Retention | undefined;
  #gcRunning: Promise<GcReport> | undefined;
  #gcError: unknown;
  // Effects: the ledger as of the last capture plus changes not yet captured.
  #ledger: Ledger;
  readonly #ledgerChanges = new Map<string, EffectRecord | null>();
  readonly #effectsInFlight = new Map<string, Promise<unknown>>();
  readonly #onPendingEffect: PendingPolicy;
  readonly #effectRetention: Required<EffectRetention>;
  #lastExpiry = 0;
  /** Meta of the last capture, repeated by the checkpoints that only record effects. */
  #lastMeta: Uint8Array | undefined;
  /** The key of a write whose outcome is unknown (it may yet land, or have landed). */
  #uncertainKey: string | undefined;

  private constructor(init: {
    store: Store;
    keys: StreamKeys;
    epoch: number;
    writer: string;
    updates: UpdateMode;
    policy: ResolvedPolicy;
    limits: FrameLimits;
    committed: Committed;
    nextKey: string;
    capturer: Capturer;
    retention: Retention | undefined;
    ledger: Ledger;
    onPendingEffect: PendingPolicy;
    effectRetention: Required<EffectRetention>;
  }) {
    this.#retention = init.retention;
    this.#ledger = init.ledger;
    this.#onPendingEffect = init.onPendingEffect;
    this.#effectRetention = init.effectRetention;
    this.store = init.store;
    this.stream = init.keys.stream;
    this.#keys = init.keys;
    this.epoch = init.epoch;
    this.#writer = init.writer;
    this.updates = init.updates;
    this.policy = init.policy;
    this.#limits = init.limits;
    this.#committed = init.committed;
    this.#lastMeta = init.committed.meta;
    this.#nextKey = init.nextKey;
    this.#capturer = init.capturer;
  }

  /**
   * Opens a stream for writing: claims it with a new writer epoch (fencing any engine that had it
   * open) and restores its last committed checkpoint into `engine.state` and `engine.seq`.
   */
  static async open<S = unknown>(options: EngineOptions): Promise<SnapshotEngine<S>> {
    if (options === null || typeof options !== 'object') throw new StatefoldError('INVALID_ARGUMENT', 'SnapshotEngine.open: options must be an object');
    const { store } = options;
    assertStore(store, 'SnapshotEngine.open');
    const keys = new StreamKeys(options.stream);
    const policy = resolvePolicy(options.policy);
    const updates = options.updates ?? 'copy';
    if (updates !== 'copy' && updates !== 'immutable') {
      throw new StatefoldError('INVALID_ARGUMENT', `SnapshotEngine.open: updates ${JSON.stringify(updates)} must be 'copy' or 'immutable'`, { stream: keys.stream });
    }
    const limits = limitsOf(options.maxPayloadBytes);
    if (options.retention !== undefined) resolveRetention(options.retention);
    const effectRetention = resolveEffectRetention(options.effectRetention);
    const onPendingEffect = options.onPendingEffect ?? 'throw';
    if (onPendingEffect !== 'retry' && onPendingEffect !== 'throw' && typeof onPendingEffect !== 'function') {
      throw new StatefoldError('INVALID_ARGUMENT', `SnapshotEngine.open: onPendingEffect must be 'retry', 'throw' or a function`, { stream: keys.stream });
    }
    // 64 random bits tell this engine's frames from any other's (epochs may tie while racing).
    const writer = randomBytes(8).toString('hex');

    for (let attempt = 0; attempt < MAX_OPEN_ATTEMPTS; attempt++) {
      const log = await listLog(store, keys);
      const view = await committedView(store, log, limits);
      const tail = view.tailFrame;
      const epoch = (tail?.header.epoch ?? 0) + 1;
      let fenceSeq: number;
      let fenceKey: string;
      if (tail === undefined) {
        fenceSeq = 1;
        fenceKey = keys.slot(1);
      } else if (tail.kind === 'fence') {
        fenceSeq = tail.header.seq;
        fenceKey = keys.afterFence(fenceSeq, tail.header.epoch);
      } else {
        fenceSeq = tail.header.seq + 1;
        fenceKey = keys.slot(fenceSeq);
      }
      const fence = encodeFrame('fence', { stream: keys.stream, seq: fenceSeq, epoch, writer, createdAt: Date.now() }, new Uint8Array(0));
      if (!(await createOrRecognise(store, fenceKey, fence, keys.stream, fenceSeq))) {
        // Another engine took the slot first (a commit or a fence): look again.
        await sleep(Math.min(50, 2 ** attempt) * Math.random());
        continue;
      }
      const capturer = createCapturer(updates);
      let committed: Committed = { seq: 0, crc: 0, tree: undefined, meta: undefined, baseSeq: 0, baseBytes: 0, deltaBytes: 0 };
      let ledger: Ledger = EMPTY_LEDGER;
      if (view.slots.length > 0) {
        const chain = await readChain<unknown>(store, view, undefined, limits);
        ledger = chain.ledger;
        capturer.seed(chain.restored.state);
        committed = { seq: chain.restored.seq, crc: chain.crc, tree: capturer.state, meta: chain.metaBytes, baseSeq: chain.baseSeq, baseBytes: chain.baseBytes, deltaBytes: chain.deltaBytes };
      }
      return new SnapshotEngine<S>({
        store,
        keys,
        epoch,
        writer,
        updates,
        policy,
        limits,
        committed,
        nextKey: keys.afterFence(fenceSeq, epoch),
        capturer,
        retention: options.retention,
        ledger,
        onPendingEffect,
        effectRetention,
      });
    }
    throw new StatefoldError('STORAGE', `open stream ${JSON.stringify(keys.stream)}: could not claim a slot after ${MAX_OPEN_ATTEMPTS} attempts (other engines keep opening or committing)`, { stream: keys.stream });
  }

  /**
   * The state of the last committed checkpoint (undefined for a new stream). With `updates: 'copy'`
   * each read returns a fresh mutable copy; with `'immutable'` the captured (frozen) state itself.
   */
  get state(): S | undefined {
    const c = this.#committed;
    if (c.tree === undefined) return undefined;
    return (this.updates === 'copy' ? thaw(c.tree) : c.tree) as S;
  }

  /** The seq of the last committed checkpoint, 0 for a new stream. */
  get seq(): number {
    return this.#committed.seq;
  }

  /** The meta of the last committed checkpoint. */
  get meta(): unknown {
    const meta = this.#committed.meta;
    return meta === undefined ? undefined : decodeValue(meta);
  }

  /** Checkpoints captured but not yet committed. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Whether a newer engine has taken the stream over (every further checkpoint fails FENCED). */
  get fenced(): boolean {
    return this.#fenced !== undefined;
  }

  /**
   * Checkpoints `state`. The capture is synchronous: once this returns, the caller may change
   * `state` (in place, with `updates: 'copy'`) without affecting this checkpoint. The promise
   * resolves when the checkpoint is durable and visible to `restore`; checkpoints commit in call order.
   */
  checkpoint(state: S, options?: CheckpointOptions): Promise<CheckpointInfo> {
    try {
      this.#assertOpen('checkpoint');
      const meta = this.#encodeMeta(options);
      const capture = this.#capturer.capture(state);
      return this.#enqueue(capture, meta);
    } catch (err) {
      return Promise.reject(this.#wrapCaptureError(err));
    }
  }

  /**
   * Records one step of the agent and checkpoints when the policy says so: `everySteps` steps or
   * `everyMs` milliseconds since the last checkpoint, or `maxPendingBytes` of change, whichever
   * comes first. Returns the checkpoint's promise when it took one, undefined otherwise.
   */
  step(state: S, options?: CheckpointOptions): Promise<CheckpointInfo> | undefined {
    if (this.#closed || this.#fenced) return this.checkpoint(state, options);
    this.#steps++;
    const p = this.policy;
    let due = this.#steps >= p.everySteps || Date.now() - this.#lastCheckpointAt >= p.everyMs;
    if (!due && p.maxPendingBytes !== Infinity) {
      try {
        due = this.#capturer.estimate(state) >= p.maxPendingBytes;
      } catch (err) {
        return Promise.reject(this.#wrapCaptureError(err));
      }
    }
    if (due) return this.checkpoint(state, options);
    this.#stepState = { state, options };
    return undefined;
  }

  /**
   * Checkpoints the state of the last `step()` that did not checkpoint (if any), then waits
   * until every checkpoint in flight has committed. Resolves the forced checkpoint's info.
   */
  async flush(): Promise<CheckpointInfo | undefined> {
    this.#assertOpen('flush');
    const pending = this.#stepState;
    const forced = pending ? this.checkpoint(pending.state as S, pending.options) : undefined;
    await this.#idle();
    return forced;
  }

  /** Flushes (see flush), then closes the engine: later calls reject with CLOSED. */
  async close(): Promise<void> {
    if (this.#closed) this.#assertOpen('close');
    // A fenced engine closes too: it only waits for what is in flight (which will fail FENCED).
    try {
      if (this.#stepState && !this.#fenced) await this.flush();
      await this.#idle();
      await this.#gcRunning?.catch(() => undefined);
    } finally {
      this.#closed = true;
    }
  }

  /**
   * Deletes the checkpoints that `retention` (default: the engine's) does not keep, only behind
   * the base of the oldest kept one, so every kept seq still restores. Safe while writing.
   */
  async gc(retention?: Retention): Promise<GcReport> {
    this.#assertOpen('gc');
    const r = retention ?? this.#retention;
    if (r === undefined) throw new StatefoldError('INVALID_ARGUMENT', `gc stream ${JSON.stringify(this.stream)}: no retention given and none set at open`, { stream: this.stream });
    return gc(this.store, this.stream, r, { limits: this.#limits });
  }

  /** The error of the last background gc, if it failed (it is retried after the next base). */
  get gcError(): unknown {
    return this.#gcError;
  }

  #backgroundGc(): void {
    if (this.#retention === undefined || this.#gcRunning) return;
    const run = gc(this.store, this.stream, this.#retention, { limits: this.#limits });
    this.#gcRunning = run;
    run.then(
      () => (this.#gcError = undefined),
      (err: unknown) => (this.#gcError = err),
    ).finally(() => (this.#gcRunning = undefined));
  }

  #assertOpen(op: string): void {
    if (this.#closed) {
      throw new StatefoldError('CLOSED', `${op} stream ${JSON.stringify(this.stream)}: the engine is closed`, { stream: this.stream });
    }
    if (this.#fenced) throw this.#fenced;
  }

  #wrapCaptureError(err: unknown): unknown {
    if (isStatefoldError(err, 'INVALID_STATE')) {
      return new StatefoldError('INVALID_STATE', `checkpoint stream ${JSON.stringify(this.stream)}: ${err.message}`, { stream: this.stream, path: err.path, cause: err });
    }
    return err;
  }

  #encodeMeta(options: CheckpointOptions | undefined): Uint8Array | undefined {
    if (options === undefined || options === null) return undefined;
    if (typeof options !== 'object') throw new StatefoldError('INVALID_ARGUMENT', `checkpoint stream ${JSON.stringify(this.stream)}: options must be an object`, { stream: this.stream });
    if (options.meta === undefined) return undefined;
    return encodeValue(captureValue(options.meta, 'meta'));
  }

  /** Checkpoints the last captured state again (an effect's intent or outcome), with `meta`. */
  #enqueueUnchanged(meta: Uint8Array | undefined): Promise<CheckpointInfo> {
    if (this.#capturer.state === undefined && this.#committed.seq === 0 && this.#queue.length === 0) {
      return Promise.reject(
        new StatefoldError('INVALID_STATE', `effect on stream ${JSON.stringify(this.stream)}: no state has been checkpointed yet; checkpoint one first or pass options.state`, { stream: this.stream, path: '$' }),
      );
    }
    let capture: Capture;
    try {
      capture = this.#capturer.unchanged();
    } catch (err) {
      return Promise.reject(this.#wrapCaptureError(err));
    }
    return this.#enqueue(capture, meta);
  }

  #enqueue(capture: Capture, meta: Uint8Array | undefined): Promise<CheckpointInfo> {
    this.#lastMeta = meta;
    this.#expireEffects();
    const ledgerChanges: LedgerEntry[] = [];
    if (this.#ledgerChanges.size > 0) {
      const next = new Map(this.#ledger);
      for (const [token, record] of this.#ledgerChanges) {
        if (record === null) next.delete(token);
        else next.set(token, record);
        ledgerChanges.push([token, record === null ? null : storeRecord(record)]);
      }
      this.#ledger = next;
      this.#ledgerChanges.clear();
    }
    let task: Task;
    const promise = new Promise<CheckpointInfo>((resolve, reject) => {
      task = { capture, meta, createdAt: Date.now(), ledger: this.#ledger, ledgerChanges, resolve, reject };
    });
    this.#queue.push(task!);
    // Leaf versions older than the oldest capture still to be encoded can be dropped.
    this.#capturer.oldestUnencoded = this.#queue[0]!.capture.id;
    this.#steps = 0;
    this.#lastCheckpointAt = Date.now();
    this.#stepState = undefined;
    this.#kick();
    return promise;
  }

  /** The ledger as the next checkpoint will record it. */
  #currentRecord(token: string): EffectRecord | undefined {
    const changed = this.#ledgerChanges.get(token);
    if (changed !== undefined) return changed ?? undefined;
    return this.#ledger.get(token);
  }

  #expireEffects(): void {
    const now = Date.now();
    if (this.#ledger.size === 0 || now - this.#lastExpiry < 1000) return;
    this.#lastExpiry = now;
    for (const token of expired(this.#ledger, this.#effectRetention, now)) {
      if (!this.#ledgerChanges.has(token)) this.#ledgerChanges.set(token, null);
    }
  }

  /** Effect tokens found pending: their intent was recorded but not their outcome (a crash came between). */
  pendingEffects(): EffectRecord[] {
    const out: EffectRecord[] = [];
    const tokens = new Set([...this.#ledger.keys(), ...this.#ledgerChanges.keys()]);
    for (const token of tokens) {
      const r = this.#currentRecord(token);
      if (r?.status === 'pending') out.push(r);
    }
    return out;
  }

  /** The effect ledger: every token kept, with its status. */
  get effects(): EffectRecord[] {
    const tokens = new Set([...this.#ledger.keys(), ...this.#ledgerChanges.keys()]);
    return [...tokens].map((t) => this.#currentRecord(t)).filter((r): r is EffectRecord => r !== undefined);
  }

  /**
   * Runs `fn(token)` at most once per token per stream, as far as the store can know: the intent
   * is committed before `fn` runs, the outcome after it settles. A token already `done` returns its
   * recorded result without calling `fn`; one `failed` rejects with EFFECT_FAILED; one found
   * `pending` (a crash between intent and outcome) follows `onPending`. Pass the token to the
   * external service as its idempotency key: a request can succeed before its outcome is recorded.
   */
  effect<T>(token: string, fn: (token: string) => T | Promise<T>, options: EffectOptions<S, T> = {}): Promise<T> {
    try {
      this.#assertOpen('effect');
      assertToken(token, this.stream);
      if (typeof fn !== 'function') throw new StatefoldError('INVALID_ARGUMENT', `effect ${JSON.stringify(token)} on stream ${JSON.stringify(this.stream)}: fn must be a function`, { stream: this.stream });
    } catch (err) {
      return Promise.reject(err);
    }
    const running = this.#effectsInFlight.get(token);
    if (running) return running as Promise<T>;
    const run = this.#runEffect(token, fn, options).finally(() => this.#effectsInFlight.delete(token));
    this.#effectsInFlight.set(token, run);
    return run;
  }

  async #runEffect<T>(token: string, fn: (token: string) => T | Promise<T>, options: EffectOptions<S, T>): Promise<T> {
    const where = `effect ${JSON.stringify(token)} on stream ${JSON.stringify(this.stream)}`;
    const record = this.#currentRecord(token);
    if (record?.status === 'done') {
      if (record.error) throw new StatefoldError('INVALID_STATE', `${where}: done, but its result was not recorded: ${record.error.message}`, { stream: this.stream });
      return thaw(record.result) as T;
    }
    if (record?.status === 'failed') {
      throw new StatefoldError('EFFECT_FAILED', `${where}: failed earlier (${record.error?.name ?? 'Error'}: ${record.error?.message ?? 'unknown'}); an effect runs at most once per token`, { stream: this.stream });
    }
    if (record?.status === 'pending') {
      const policy = (options.onPending ?? this.#onPendingEffect) as PendingPolicy<T>;
      if (policy === 'throw') {
        throw new StatefoldError('EFFECT_PENDING', `${where}: pending since ${new Date(record.startedAt).toISOString()}: its intent was recorded but not its outcome (did the process crash while it ran?); choose onPending 'retry' or a reconcile function`, { stream: this.stream });
      }
      if (typeof policy === 'function') {
        const result = await policy(token, record);
        return this.#settle(token, record.startedAt, { ok: true, value: result }, where);
      }
      // 'retry': the intent is already durable; call fn again with the same token.
    } else {
      // A new token: make its intent durable before anything happens.
      this.#ledgerChanges.set(token, { token, status: 'pending', startedAt: Date.now() });
      try {
        if (options.state !== undefined) {
          await this.checkpoint(options.state, options.meta === undefined ? undefined : { meta: options.meta });
        } else {
          await this.#enqueueUnchanged(options.meta === undefined ? this.#lastMeta : this.#encodeMeta({ meta: options.meta }));
        }
      } catch (err) {
        // Not durable, fn not called: forget the intent so nothing claims it is pending.
        if (this.#currentRecord(token)?.status === 'pending') this.#ledgerChanges.set(token, null);
        throw err;
      }
    }
    const startedAt = this.#currentRecord(token)?.startedAt ?? Date.now();
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await fn(token) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    return this.#settle(token, startedAt, outcome, where);
  }

  /** Records an effect's outcome and commits it; resolves its value or rethrows its error. */
  async #settle<T>(token: string, startedAt: number, outcome: { ok: true; value: T } | { ok: false; error: unknown }, where: string): Promise<T> {
    const settledAt = Date.now();
    let record: EffectRecord;
    let encodeError: StatefoldError | undefined;
    if (outcome.ok) {
      try {
        const stored = outcome.value === undefined ? undefined : captureValue(outcome.value, 'result');
        record = { token, status: 'done', startedAt, settledAt };
        if (stored !== undefined) record.result = stored;
      } catch (err) {
        encodeError = new StatefoldError('INVALID_STATE', `${where}: ran, but its result cannot be recorded: ${(err as Error).message}`, { stream: this.stream, path: (err as StatefoldError).path, cause: err });
        record = { token, status: 'done', startedAt, settledAt, error: { name: 'StatefoldError', code: 'INVALID_STATE', message: encodeError.message } };
      }
    } else {
      const e = outcome.error as { name?: unknown; message?: unknown; code?: unknown } | undefined;
      record = { token, status: 'failed', startedAt, settledAt, error: { name: typeof e?.name === 'string' ? e.name : 'Error', message: typeof e?.message === 'string' ? e.message : String(outcome.error) } };
      if (typeof e?.code === 'string') record.error!.code = e.code;
    }
    this.#ledgerChanges.set(token, record);
    await this.#enqueueUnchanged(this.#lastMeta);
    if (encodeError) throw encodeError;
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  #kick(): void {
    if (this.#draining) return;
    // Encoding and writing start on a later turn of the event loop, never inside checkpoint():
    // the caller's stall is the capture alone (Flink's synchronous/asynchronous split).
    this.#draining = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.#drain())
      .finally(() => {
        this.#draining = undefined;
        if (this.#queue.length > 0) this.#kick();
      });
  }

  async #idle(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const task = this.#queue[0]!;
      try {
        if (this.#fenced) throw this.#fenced;
        task.resolve(await this.#commit(task));
      } catch (err) {
        if (isStatefoldError(err, 'FENCED')) this.#fenced ??= err;
        // The chain must not depend on what failed: the next commit is a full base.
        else this.#needBase = true;
        task.reject(err);
      }
      this.#queue.shift();
      this.#capturer.oldestUnencoded = this.#queue[0]?.capture.id ?? Infinity;
    }
  }

  /** Encodes and commits one task; retries on a later seq only when our own earlier write turns out to have landed. */
  async #commit(task: Task): Promise<CheckpointInfo> {
    for (;;) {
      const c = this.#committed;
      const seq = c.seq + 1;
      const resolver = this.#capturer.resolverFor(task.capture.id);
      const header = (kind: FrameKind): FrameHeader => {
        const h: FrameHeader = { stream: this.stream, seq, epoch: this.epoch, writer: this.#writer, createdAt: task.createdAt, baseSeq: kind === 'base' ? seq : c.baseSeq };
        if (kind === 'delta') h.parent = c.crc;
        if (task.meta !== undefined) h.meta = task.meta;
        const effects = kind === 'base' ? ledgerEntries(task.ledger) : task.ledgerChanges;
        if (effects.length > 0) h.ledger = effects;
        return h;
      };
      let kind: FrameKind = this.#needBase || c.tree === undefined || seq - c.baseSeq >= this.policy.baseEvery ? 'base' : 'delta';
      let frame: Uint8Array | undefined;
      if (kind === 'delta') {
        frame = encodeFrame('delta', header('delta'), encodeValue(task.capture.ops, resolver));
        // Redis-style size trigger: once the deltas outgrow the base, a new base is cheaper to restore.
        if (c.deltaBytes + frame.byteLength > this.policy.maxDeltaRatio * c.baseBytes) kind = 'base';
      }
      if (kind === 'base') frame = encodeFrame('base', header('base'), encodeValue(task.capture.state, resolver));
      frame = frame!;
      const key = this.#nextKey;
      const outcome = await this.#write(key, seq, frame);
      if (outcome === 'ours') {
        const crc = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).readUInt32LE(frame.byteLength - 4);
        this.#committed = {
          seq,
          crc,
          tree: task.capture.state,
          meta: task.meta,
          baseSeq: kind === 'base' ? seq : c.baseSeq,
          baseBytes: kind === 'base' ? frame.byteLength : c.baseBytes,
          deltaBytes: kind === 'base' ? 0 : c.deltaBytes + frame.byteLength,
        };
        this.#nextKey = this.#keys.slot(seq + 1);
        this.#needBase = false;
        if (kind === 'base') this.#backgroundGc();
        return { seq, kind, bytes: frame.byteLength, ops: task.capture.ops.length, base: kind === 'base' ? seq : c.baseSeq, createdAt: task.createdAt, key };
      }
      // An earlier write of ours, reported failed, had landed after all: it is seq `seq`.
      // Rebuild its state from the frame, so that engine.state and engine.seq stay one checkpoint.
      const landed = outcome;
      const origin = { stream: this.stream, key, seq };
      let tree: unknown;
      if (landed.kind === 'base') tree = decodePayload(landed, origin);
      else if (c.tree !== undefined && landed.header.parent === c.crc) tree = applyOps(thaw(c.tree), decodePayload(landed, origin) as Op[]);
      this.#committed = { seq, crc: landed.crc, tree, meta: landed.header.meta, baseSeq: landed.header.baseSeq!, baseBytes: 0, deltaBytes: 0 };
      this.#nextKey = this.#keys.slot(seq + 1);
      this.#needBase = true;
    }
  }

  /**
   * Creates `key`. Resolves 'ours' when our frame is there (created now, or by an earlier try
   * whose answer was lost), the landed frame when an earlier failed write of this engine is
   * there, and throws FENCED when another engine's frame is there.
   */
  /**
   * After creating a key that an earlier write of ours may have landed on: if that write landed,
   * the stream moved on past it and retention deleted it, this create succeeded on a freed key of
   * deleted history. Newer seqs (or a retention floor above ours) tell; then we are stale: take
   * the object back and fail FENCED. Only ever runs after an unknown outcome, so it costs a list
   * on that rare path alone.
   */
  async #checkNotStale(key: string, seq: number): Promise<void> {
    const later = await this.store.list(this.#keys.log, { startAfter: key });
    const newer = later.some((k) => (this.#keys.parse(k)?.seq ?? 0) > seq);
    const floors = newer ? [] : await this.store.list(this.#keys.floors);
    if (!newer && !floors.some((k) => (this.#keys.parseFloor(k) ?? 0) > seq)) return;
    await this.store.delete(key).catch(() => undefined);
    throw new StatefoldError('FENCED', `commit stream ${JSON.stringify(this.stream)} seq ${seq} (${key}): the stream has moved past this engine (newer seqs exist, and this seq's earlier copy was deleted by retention); this engine may no longer write`, { stream: this.stream, seq, key });
  }

  async #write(key: string, seq: number, frame: Uint8Array): Promise<'ours' | Frame> {
    let there: Uint8Array | undefined;
    for (let attempt = 0; ; attempt++) {
      let created: boolean;
      try {
        created = await this.store.putIfAbsent(key, frame);
      } catch (err) {
        // The write may have landed before the error: look before reporting failure.
        const landed = await this.store.get(key).catch(() => undefined);
        if (landed !== undefined && Buffer.compare(Buffer.from(landed), Buffer.from(frame)) === 0) return 'ours';
        // It may still land (a request that timed out), or have landed and later be deleted.
        this.#uncertainKey = key;
        throw wrapStorage(err, this.stream, seq, key, 'commit');
      }
      if (created) {
        if (this.#uncertainKey === key) await this.#checkNotStale(key, seq);
        this.#uncertainKey = undefined;
        return 'ours';
      }
      there = await this.store.get(key);
      if (there !== undefined) break;
      // "Exists" yet nothing to read: a conditional write that lost a race to a write that then
      // failed (S3's 409 ConditionalRequestConflict). The key may be free again: try again.
      if (attempt >= 4) {
        throw new StatefoldError('STORAGE', `commit stream ${JSON.stringify(this.stream)} seq ${seq} (${key}): the store keeps reporting the key exists but it cannot be read`, { stream: this.stream, seq, key });
      }
      await sleep(10 * 2 ** attempt * (0.5 + Math.random()));
    }
    if (Buffer.compare(Buffer.from(there), Buffer.from(frame)) === 0) return 'ours';
    const other = decodeFrame(there, { stream: this.stream, key, seq }, this.#limits);
    if (other.header.writer === this.#writer && other.kind !== 'fence') return other;
    throw new StatefoldError(
      'FENCED',
      `commit stream ${JSON.stringify(this.stream)} seq ${seq} (${key}): taken by another engine (its epoch ${other.header.epoch}, ours ${this.epoch}); this engine may no longer write`,
      { stream: this.stream, seq, key },
    );
  }
}

/** Creates `key` with `frame`, or recognises that an earlier try of ours already did. */
async function createOrRecognise(store: Store, key: string, frame: Uint8Array, stream: string, seq: number): Promise<boolean> {
  try {
    if (await store.putIfAbsent(key, frame)) return true;
  } catch (err) {
    const there = await store.get(key).catch(() => undefined);
    if (there === undefined) throw wrapStorage(err, stream, seq, key, 'open');
  }
  // Ours (an earlier try landed), or another engine's; nothing there means a lost race to a
  // failed write (S3's 409): the caller lists again and retries.
  const there = await store.get(key);
  return there !== undefined && Buffer.compare(Buffer.from(there), Buffer.from(frame)) === 0;
}

function wrapStorage(err: unknown, stream: string, seq: number, key: string, op: string): StatefoldError {
  if (isStatefoldError(err) && err.code !== 'STORAGE') return err;
  return new StatefoldError('STORAGE', `${op} stream ${JSON.stringify(stream)} seq ${seq} (${key}): ${describeCause(err)}`, { stream, seq, key, cause: err });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
