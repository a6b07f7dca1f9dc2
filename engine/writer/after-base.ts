/**
 * What an engine runs in the background after each base it commits: the hint (hints.ts), then
 * retention, one gc at a time.
 */
import type { Store } from '../../storage-adapters/store.js';
import { failure } from '../errors.js';
import type { FrameReading } from '../format/frame.js';
import type { StreamKeys } from '../log/keys.js';
import { gc, type GcReport, type Retention } from '../retention.js';
import { HintWriter } from './hints.js';
import { IndexWriter, type IndexOf } from './index-objects.js';

/** Runs one engine's follow-ups of a base: the hint, and gc when a retention was set at open; gc also when asked. */
export class AfterBase {
  readonly #hints: HintWriter;
  readonly #index: IndexWriter | undefined;
  #running: Promise<GcReport> | undefined;
  #error: unknown;

  private readonly stream: string;

  constructor(
    private readonly store: Store,
    keys: StreamKeys,
    private readonly retention: Retention | undefined,
    private readonly limits: FrameReading,
    /** The span length of the chains the engine writes (policy.spanEvery), named in its hints. */
    span: number,
    /** The index the stream is written with (EngineOptions.index), if any. */
    index?: IndexOf,
  ) {
    this.stream = keys.stream;
    this.#hints = new HintWriter(store, keys, span);
    this.#index = index === undefined ? undefined : new IndexWriter(store, keys, index);
  }

  /** The error of the last background gc, if it failed (it is retried after the next base). */
  get error(): unknown {
    return this.#error;
  }

  /**
   * A base committed at `seq` (after the chain of base `prev`, with `meta` as stored): hint it,
   * index it, and start a background gc unless one is running or no retention was set.
   */
  committed(seq: number, prev: number, meta: Uint8Array | undefined): void {
    this.#hints.afterBase(seq);
    this.#index?.afterBase(seq, prev, meta);
    if (this.retention === undefined || this.#running) return;
    const run = this.run(this.retention);
    this.#running = run;
    run
      .then(
        () => (this.#error = undefined),
        (err: unknown) => (this.#error = err),
      )
      .finally(() => (this.#running = undefined));
  }

  /** Runs gc now with `retention`, or the one set at open. */
  run(retention: Retention | undefined = this.retention): Promise<GcReport> {
    if (retention === undefined) {
      return Promise.reject(
        failure('INVALID_ARGUMENT', { op: 'gc', stream: this.stream }, `no retention given and none set at open`),
      );
    }
    // The store is already behind the engine's error boundary: no second timeout. gc reads only
    // what frames keep readable without keys: it is given none.
    const limits = { maxPayloadBytes: this.limits.maxPayloadBytes };
    return gc(this.store, this.stream, retention, { limits, storeTimeoutMs: Infinity });
  }

  /** Resolves when no hint is being written (whatever its outcome); a background gc may still run. */
  hinted(): Promise<void> {
    return this.#hints.idle();
  }

  /** Resolves when no hint or index object is being written and no background gc is running (whatever their outcome). */
  async idle(): Promise<void> {
    await this.#hints.idle();
    await this.#index?.idle();
    await this.#running?.catch(() => undefined);
  }
}
