/** Retention as an engine runs it: in the background after each base it commits, one gc at a time. */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import type { FrameLimits } from '../format/frame.js';
import { gc, type GcReport, type Retention } from '../retention.js';

/** Runs gc for one engine: after each base (when a retention was set at open), or when asked. */
export class RetentionRunner {
  #running: Promise<GcReport> | undefined;
  #error: unknown;

  constructor(
    private readonly store: Store,
    private readonly stream: string,
    private readonly retention: Retention | undefined,
    private readonly limits: FrameLimits,
  ) {}

  /** The error of the last background gc, if it failed (it is retried after the next base). */
  get error(): unknown {
    return this.#error;
  }

  /** Starts a background gc after a base commits, unless one is running or no retention was set. */
  afterBase(): void {
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
        new StatefoldError(
          'INVALID_ARGUMENT',
          `gc stream ${JSON.stringify(this.stream)}: no retention given and none set at open`,
          { stream: this.stream },
        ),
      );
    }
    // The store is already behind the engine's error boundary: no second timeout.
    return gc(this.store, this.stream, retention, { limits: this.limits, storeTimeoutMs: Infinity });
  }

  /** Resolves when no background gc is running (whatever its outcome). */
  async idle(): Promise<void> {
    await this.#running?.catch(() => undefined);
  }
}
