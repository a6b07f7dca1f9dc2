/**
 * The effect protocol: intent -> fn -> outcome. A token's intent is committed (as a checkpoint)
 * before `fn` runs and its outcome after `fn` settles, so that a resumed agent skips the effects it
 * already made. The runner owns the ledger as the next checkpoint will record it; the engine
 * takes its changes into each checkpoint it queues (`take`).
 */
import { captureValue, thaw } from '../capture/index.js';
import { StatefoldError, describeCause, describeValue } from '../errors.js';
import {
  assertToken,
  expired,
  storeRecord,
  type EffectRecord,
  type EffectRetention,
  type Ledger,
  type LedgerEntry,
  type PendingPolicy,
} from './ledger.js';

/** Options of `effect`. */
export interface EffectOptions<S = unknown, T = unknown> {
  /** What to do if the token is found pending (overrides the engine's `onPendingEffect`). */
  onPending?: PendingPolicy<T>;
  /** A state to checkpoint together with the intent (default: the last checkpointed state, unchanged). */
  state?: S;
  /** Meta for the intent's checkpoint. */
  meta?: unknown;
}

/** How the runner commits intents and outcomes: through the engine's checkpoints. */
export interface EffectHost<S> {
  readonly stream: string;
  /** Checkpoints `state` (the intent's checkpoint when `options.state` is given). */
  checkpoint(state: S, options: { meta: unknown } | undefined): Promise<unknown>;
  /** Checkpoints the last captured state again, with `options.meta`, or with the last meta when no options are given. */
  checkpointUnchanged(options?: { meta: unknown }): Promise<unknown>;
}

type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Runs effects at most once per token, recording them in the ledger carried by checkpoints. */
export class EffectRunner<S> {
  /** The ledger as of the last checkpoint queued. */
  #ledger: Ledger;
  /** Changes since, for the next checkpoint (null: the token is dropped). */
  readonly #changes = new Map<string, EffectRecord | null>();
  readonly #inFlight = new Map<string, Promise<unknown>>();
  #lastExpiry = 0;

  constructor(
    private readonly host: EffectHost<S>,
    ledger: Ledger,
    private readonly onPending: PendingPolicy,
    private readonly retention: Required<EffectRetention>,
  ) {
    this.#ledger = ledger;
  }

  /** Every token kept, with its status, as the next checkpoint will record it. */
  records(): EffectRecord[] {
    return this.#tokens()
      .map((t) => this.#current(t))
      .filter((r): r is EffectRecord => r !== undefined);
  }

  /** Resolves when no effect is running (their outcomes recorded, or failed to record). */
  async idle(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight.values()]);
  }

  /** Tokens whose intent was recorded but not their outcome. */
  pending(): EffectRecord[] {
    return this.records().filter((r) => r.status === 'pending');
  }

  /**
   * Takes the changes for the checkpoint being queued: expires old tokens, applies the changes,
   * and returns the ledger as of that checkpoint plus the changes in stored form.
   */
  take(): { ledger: Ledger; changes: LedgerEntry[] } {
    this.#expire();
    const changes: LedgerEntry[] = [];
    if (this.#changes.size > 0) {
      const next = new Map(this.#ledger);
      for (const [token, record] of this.#changes) {
        if (record === null) next.delete(token);
        else next.set(token, record);
        changes.push([token, record === null ? null : storeRecord(record)]);
      }
      this.#ledger = next;
      this.#changes.clear();
    }
    return { ledger: this.#ledger, changes };
  }

  /** Runs `fn(token)` at most once per token (see SnapshotEngine.effect); concurrent calls with one token share one run. */
  run<T>(token: string, fn: (token: string) => T | Promise<T>, options: EffectOptions<S, T> | undefined): Promise<T> {
    let checked: EffectOptions<S, T>;
    try {
      checked = checkArguments(token, fn, options, this.host.stream);
    } catch (err) {
      return Promise.reject(err);
    }
    const running = this.#inFlight.get(token);
    if (running) return running as Promise<T>;
    const run = this.#run(token, fn, checked).finally(() => this.#inFlight.delete(token));
    this.#inFlight.set(token, run);
    return run;
  }

  async #run<T>(token: string, fn: (token: string) => T | Promise<T>, options: EffectOptions<S, T>): Promise<T> {
    const stream = this.host.stream;
    const where = `effect ${JSON.stringify(token)} on stream ${JSON.stringify(stream)}`;
    const record = this.#current(token);
    if (record?.status === 'done') {
      if (record.error)
        throw new StatefoldError(
          'INVALID_STATE',
          `${where}: done, but its result was not recorded: ${record.error.message}`,
          { stream },
        );
      return thaw(record.result) as T;
    }
    if (record?.status === 'failed') {
      throw new StatefoldError(
        'EFFECT_FAILED',
        `${where}: failed earlier (${record.error?.name ?? 'Error'}: ${record.error?.message ?? 'unknown'}); an effect runs at most once per token`,
        { stream },
      );
    }
    if (record?.status === 'pending') {
      const policy = (options.onPending ?? this.onPending) as PendingPolicy<T>;
      if (policy === 'throw') {
        throw new StatefoldError(
          'EFFECT_PENDING',
          `${where}: pending since ${new Date(record.startedAt).toISOString()}: its intent was recorded but not its outcome (did the process crash while it ran?); choose onPending 'retry' or a reconcile function`,
          { stream },
        );
      }
      if (typeof policy === 'function') {
        const result = await policy(token, record);
        return this.#settle(token, record.startedAt, { ok: true, value: result }, where);
      }
      // 'retry': the intent is already durable; call fn again with the same token.
    } else {
      // A new token: make its intent durable before anything happens.
      this.#changes.set(token, { token, status: 'pending', startedAt: Date.now() });
      try {
        const meta = options.meta === undefined ? undefined : { meta: options.meta };
        if (options.state !== undefined) await this.host.checkpoint(options.state, meta);
        else await this.host.checkpointUnchanged(meta);
      } catch (err) {
        // Not durable, fn not called: forget the intent so nothing claims it is pending.
        if (this.#current(token)?.status === 'pending') this.#changes.set(token, null);
        throw err;
      }
    }
    const startedAt = this.#current(token)?.startedAt ?? Date.now();
    let outcome: Outcome<T>;
    try {
      outcome = { ok: true, value: await fn(token) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    return this.#settle(token, startedAt, outcome, where);
  }

  /** Records an effect's outcome and commits it; resolves its value or rethrows its error. */
  async #settle<T>(token: string, startedAt: number, outcome: Outcome<T>, where: string): Promise<T> {
    const stream = this.host.stream;
    const settledAt = Date.now();
    let record: EffectRecord;
    let encodeError: StatefoldError | undefined;
    if (outcome.ok) {
      try {
        const stored = outcome.value === undefined ? undefined : captureValue(outcome.value, 'result');
        record = { token, status: 'done', startedAt, settledAt };
        if (stored !== undefined) record.result = stored;
      } catch (err) {
        encodeError = new StatefoldError(
          'INVALID_STATE',
          `${where}: ran, but its result cannot be recorded: ${(err as Error).message}`,
          { stream, path: (err as StatefoldError).path, cause: err },
        );
        record = {
          token,
          status: 'done',
          startedAt,
          settledAt,
          error: { name: 'StatefoldError', code: 'INVALID_STATE', message: encodeError.message },
        };
      }
    } else {
      const e = outcome.error as { name?: unknown; message?: unknown; code?: unknown } | undefined;
      record = {
        token,
        status: 'failed',
        startedAt,
        settledAt,
        error: {
          name: typeof e?.name === 'string' ? e.name : 'Error',
          message: typeof e?.message === 'string' ? e.message : describeCause(outcome.error),
        },
      };
      if (typeof e?.code === 'string') record.error!.code = e.code;
    }
    this.#changes.set(token, record);
    await this.host.checkpointUnchanged();
    if (encodeError) throw encodeError;
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  /** A token's record as the next checkpoint will record it. */
  #current(token: string): EffectRecord | undefined {
    const changed = this.#changes.get(token);
    if (changed !== undefined) return changed ?? undefined;
    return this.#ledger.get(token);
  }

  #tokens(): string[] {
    return [...new Set([...this.#ledger.keys(), ...this.#changes.keys()])];
  }

  #expire(): void {
    const now = Date.now();
    if (this.#ledger.size === 0 || now - this.#lastExpiry < 1000) return;
    this.#lastExpiry = now;
    for (const token of expired(this.#ledger, this.retention, now)) {
      if (!this.#changes.has(token)) this.#changes.set(token, null);
    }
  }
}

/** Checks the arguments of `effect` before anything runs; returns its options ({} when absent). */
function checkArguments<S, T>(token: unknown, fn: unknown, options: unknown, stream: string): EffectOptions<S, T> {
  assertToken(token, stream);
  const bad = (what: string): never => {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `effect ${JSON.stringify(token)} on stream ${JSON.stringify(stream)}: ${what}`,
      { stream },
    );
  };
  if (typeof fn !== 'function') bad(`fn must be a function, not ${describeValue(fn)}`);
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options))
    bad(`options must be an object, not ${describeValue(options)}`);
  const onPending = (options as EffectOptions).onPending;
  if (onPending !== undefined && onPending !== 'retry' && onPending !== 'throw' && typeof onPending !== 'function')
    bad(`onPending ${describeValue(onPending)} must be 'retry', 'throw' or a function`);
  return options as EffectOptions<S, T>;
}
