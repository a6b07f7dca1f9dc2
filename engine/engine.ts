/**
 * The snapshot engine: one writer of one stream, a thin facade over named parts.
 *
 *   open               claim the stream (open/claim.ts), read its chain (restore/read-chain.ts)
 *   checkpoint(state)  capture (sync: diff + validate, capture/)
 *                      -> queue, in call order (writer/queue.ts)
 *                      -> encode (msgpack; base or delta by policy) -> frame (format/)
 *                      -> commit (one create-if-absent write of the seq's key, writer/commit.ts)
 *   step(state)        the step trigger (writer/trigger.ts) decides when to checkpoint
 *   effect(token, fn)  the effect runner (effects/runner.ts): intent -> fn -> outcome
 */
import type { Store } from '../storage-adapters/store.js';
import { captureValue, thaw, type Capture, type Capturer, type UpdateMode } from './capture/index.js';
import type { EffectRecord } from './effects/ledger.js';
import { EffectRunner, type EffectOptions } from './effects/runner.js';
import { StatefoldError, describeValue, failure, isStatefoldError } from './errors.js';
import { decodeValue, encodeValue } from './format/values.js';
import {
  resolveEngineOptions,
  type CheckpointOptions,
  type EngineOptions,
  type ResolvedEngineOptions,
} from './options.js';
import type { ResolvedPolicy } from './policy.js';
import type { GcReport, Retention } from './retention.js';
import type { Claim } from './open/claim.js';
import { Committer } from './writer/commit.js';
import { claimAndResume, type Opened, type Repair } from './open/resume.js';
import { CommitQueue, type CheckpointInfo } from './writer/queue.js';
import { AfterBase } from './writer/after-base.js';
import { StepTrigger } from './writer/trigger.js';
import { MAX_PILED_FENCES, settlePile, type PileHost } from './open/pile.js';
import { schemaFields } from './schema.js';

export type { CheckpointInfo } from './writer/queue.js';
export type { EffectOptions } from './effects/runner.js';
export type { CheckpointOptions, EngineOptions } from './options.js';

/** Checkpoints one stream's state incrementally; opened with `SnapshotEngine.open`. */
export class SnapshotEngine<S = unknown> {
  readonly store: Store;
  readonly stream: string;
  /** The writer epoch this engine claimed the stream with. */
  readonly epoch: number;
  /** Opened with `repair: true` on a damaged newest chain: the seq it started from and what it passed over. */
  readonly repaired: Repair | undefined;
  readonly updates: UpdateMode;
  readonly policy: ResolvedPolicy;
  readonly #capturer: Capturer;
  readonly #queue: CommitQueue;
  readonly #trigger: StepTrigger<S, CheckpointOptions>;
  readonly #effects: EffectRunner<S>;
  /** The hint and retention, in the background after each base. */
  readonly #afterBase: AfterBase;
  /** Closing is a state, not a flag: from the call to close() on, every call rejects CLOSED. */
  #lifecycle: 'open' | 'closing' | 'closed' = 'open';
  /** Meta of the last capture, repeated by the checkpoints that only record effects. */
  #lastMeta: Uint8Array | undefined;

  private constructor(options: ResolvedEngineOptions, userStore: Store, claim: Claim, opened: Opened) {
    const { store, keys, policy, limits } = options;
    this.store = userStore;
    this.stream = keys.stream;
    this.epoch = claim.epoch;
    this.repaired = opened.repaired;
    this.updates = options.updates;
    this.policy = policy;
    this.#capturer = opened.capturer;
    this.#lastMeta = opened.head.meta;
    this.#afterBase = new AfterBase(store, keys, options.retention, limits, policy.spanEvery, options.index);
    const identity = { epoch: claim.epoch, writer: claim.writer };
    const committer = new Committer(store, keys, identity, limits);
    const onBase = (seq: number, prev: number, meta: Uint8Array | undefined): void =>
      this.#afterBase.committed(seq, prev, meta);
    this.#queue = new CommitQueue({
      keys,
      identity,
      policy,
      capturer: opened.capturer,
      committer,
      onBase,
      schemaFields: schemaFields(options.schema),
      head: opened.head,
      nextKey: claim.nextKey,
      sealing: opened.sealing,
      needBase: opened.needBase,
    });
    this.#trigger = new StepTrigger(policy);
    const host = {
      stream: this.stream,
      // Effects record their intent and outcome even while the engine closes (close waits for them).
      checkpoint: (state: S, o: CheckpointOptions | undefined) => this.#checkpoint(state, o),
      checkpointUnchanged: (o?: CheckpointOptions) => this.#checkpointUnchanged(o),
    };
    this.#effects = new EffectRunner<S>(host, opened.ledger, options.onPendingEffect, options.effectRetention);
  }

  /**
   * Opens a stream for writing: claims it with a new writer epoch (fencing any engine that had it
   * open) and restores its last committed checkpoint into `engine.state` and `engine.seq`.
   */
  static async open<S = unknown>(options: EngineOptions): Promise<SnapshotEngine<S>> {
    const resolved = resolveEngineOptions(options);
    const { limits } = resolved;
    // The key new checkpoints are sealed with, fetched before the claim: a missing key fences no one.
    const sealing = await limits.keyring?.sealing(resolved.keys.stream);
    const { claim, opened } = await claimAndResume(resolved, sealing);
    const engine = new SnapshotEngine<S>(resolved, options.store, claim, opened);
    if (claim.piled > MAX_PILED_FENCES) await settlePile(engine.#pileHost());
    return engine;
  }

  #pileHost(): PileHost {
    return {
      unchanged: () => this.#checkpointUnchanged(),
      requireBase: () => this.#queue.requireBase(),
      hinted: () => this.#afterBase.hinted(),
    };
  }

  /**
   * The state of the last committed checkpoint (undefined for a new stream). With `updates: 'copy'`
   * each read returns a fresh mutable copy; with `'immutable'` the captured (frozen) state itself.
   */
  get state(): S | undefined {
    const state = this.#queue.head.state;
    if (state === undefined) return undefined;
    return (this.updates === 'copy' ? thaw(state) : state) as S;
  }

  /** The seq of the last committed checkpoint, 0 for a new stream. */
  get seq(): number {
    return this.#queue.head.seq;
  }

  /** The meta of the last committed checkpoint. */
  get meta(): unknown {
    const meta = this.#queue.head.meta;
    return meta === undefined ? undefined : decodeValue(meta);
  }

  /** Checkpoints captured but not yet committed. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Whether a newer engine has taken the stream over (every further checkpoint fails FENCED). */
  get fenced(): boolean {
    return this.#queue.fenced !== undefined;
  }

  /**
   * Checkpoints `state`. The capture is synchronous: once this returns, the caller may change
   * `state` (in place, with `updates: 'copy'`) without affecting this checkpoint. The promise
   * resolves when the checkpoint is durable and visible to `restore`; checkpoints commit in call order.
   */
  checkpoint(state: S, options?: CheckpointOptions): Promise<CheckpointInfo> {
    try {
      this.#assertOpen('checkpoint');
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#checkpoint(state, options);
  }

  #checkpoint(state: S, options: CheckpointOptions | undefined): Promise<CheckpointInfo> {
    try {
      const fenced = this.#queue.fenced;
      if (fenced) throw fenced;
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
   * comes first. Returns the checkpoint's promise when it took one, undefined otherwise; a state
   * or meta that cannot be checkpointed is rejected (INVALID_STATE) at this step either way.
   */
  step(state: S, options?: CheckpointOptions): Promise<CheckpointInfo> | undefined {
    if (this.#lifecycle !== 'open' || this.fenced) return this.checkpoint(state, options);
    let due: boolean;
    try {
      due = this.#trigger.step(this.#capturer, state);
      if (!due) this.#encodeMeta(options);
    } catch (err) {
      return Promise.reject(this.#wrapCaptureError(err));
    }
    if (due) return this.checkpoint(state, options);
    this.#trigger.defer(state, options);
    return undefined;
  }

  /**
   * Checkpoints the state of the last `step()` that did not checkpoint (if any), then waits
   * until every checkpoint in flight has committed. Resolves the forced checkpoint's info.
   */
  async flush(): Promise<CheckpointInfo | undefined> {
    this.#assertOpen('flush');
    return this.#flush();
  }

  async #flush(): Promise<CheckpointInfo | undefined> {
    const deferred = this.#trigger.deferred;
    const forced = deferred ? this.#checkpoint(deferred.state, deferred.options) : undefined;
    await this.#queue.idle();
    return forced;
  }

  /**
   * Closes the engine: from this call on, every other call (another close() included) rejects
   * CLOSED. It waits for effects in flight to record their outcome, checkpoints the last step that
   * did not checkpoint, and waits until every checkpoint in flight and the work after a base (hint,
   * retention) have settled; when one of these fails, it waits for the rest, then rejects with that error.
   */
  async close(): Promise<void> {
    if (this.#lifecycle !== 'open') {
      throw failure('CLOSED', { op: 'close', stream: this.stream }, `the engine is ${this.#lifecycle}`);
    }
    this.#lifecycle = 'closing';
    const errors: unknown[] = [];
    const wait = (work: () => Promise<unknown>): Promise<unknown> => work().catch((err: unknown) => errors.push(err));
    await wait(() => this.#effects.idle());
    // A fenced engine closes too: it only waits for what is in flight (which will fail FENCED).
    if (this.#trigger.deferred && !this.fenced) await wait(() => this.#flush());
    await wait(() => this.#queue.idle());
    await wait(() => this.#afterBase.idle());
    this.#lifecycle = 'closed';
    if (errors.length > 0) throw errors[0];
  }

  /**
   * Deletes the checkpoints that `retention` (default: the engine's) does not keep, only behind
   * the base of the oldest kept one, so every kept seq still restores. Safe while writing.
   */
  async gc(retention?: Retention): Promise<GcReport> {
    this.#assertOpen('gc');
    return this.#afterBase.run(retention);
  }

  /** The error of the last background gc, if it failed (it is retried after the next base). */
  get gcError(): unknown {
    return this.#afterBase.error;
  }

  /** Effect tokens found pending: their intent was recorded but not their outcome (a crash came between). */
  pendingEffects(): EffectRecord[] {
    return this.#effects.pending();
  }

  /** The effect ledger: every token kept, with its status. */
  get effects(): EffectRecord[] {
    return this.#effects.records();
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
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#effects.run(token, fn, options);
  }

  #assertOpen(op: string): void {
    if (this.#lifecycle !== 'open') {
      throw failure('CLOSED', { op: op, stream: this.stream }, `the engine is ${this.#lifecycle}`);
    }
    const fenced = this.#queue.fenced;
    if (fenced) throw fenced;
  }

  #wrapCaptureError(err: unknown): unknown {
    if (isStatefoldError(err, 'INVALID_STATE')) {
      return new StatefoldError('INVALID_STATE', `checkpoint stream ${JSON.stringify(this.stream)}: ${err.message}`, {
        stream: this.stream,
        path: err.path,
        cause: err,
      });
    }
    return err;
  }

  #encodeMeta(options: CheckpointOptions | undefined): Uint8Array | undefined {
    if (options === undefined || options === null) return undefined;
    if (typeof options !== 'object' || Array.isArray(options))
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `checkpoint stream ${JSON.stringify(this.stream)}: options must be an object, not ${describeValue(options)}`,
        { stream: this.stream },
      );
    if (options.meta === undefined) return undefined;
    return encodeValue(captureValue(options.meta, 'meta'));
  }

  /** Checkpoints the last captured state again (an effect's intent or outcome), with the given meta or else the last one. */
  #checkpointUnchanged(options?: CheckpointOptions): Promise<CheckpointInfo> {
    if (this.#capturer.state === undefined && this.#queue.head.seq === 0 && this.#queue.length === 0) {
      return Promise.reject(
        new StatefoldError(
          'INVALID_STATE',
          `effect on stream ${JSON.stringify(this.stream)}: no state has been checkpointed yet; checkpoint one first or pass options.state`,
          { stream: this.stream, path: '$' },
        ),
      );
    }
    let meta: Uint8Array | undefined;
    try {
      meta = options === undefined ? this.#lastMeta : this.#encodeMeta(options);
    } catch (err) {
      return Promise.reject(err);
    }
    let capture: Capture;
    try {
      capture = this.#capturer.unchanged();
    } catch (err) {
      return Promise.reject(this.#wrapCaptureError(err));
    }
    // It carries no newer state: a step deferred before it must still be checkpointed by flush/close.
    return this.#enqueue(capture, meta, false);
  }

  #enqueue(capture: Capture, meta: Uint8Array | undefined, capturesState = true): Promise<CheckpointInfo> {
    this.#lastMeta = meta;
    const { ledger, changes } = this.#effects.take();
    const promise = new Promise<CheckpointInfo>((resolve, reject) => {
      this.#queue.push({ capture, meta, createdAt: Date.now(), ledger, ledgerChanges: changes, resolve, reject });
    });
    if (capturesState) this.#trigger.reset();
    return promise;
  }
}
