/** Writes the hint after each base (log/hint.ts): in the background, one at a time, never failing a checkpoint. */
import type { Store } from '../../storage-adapters/store.js';
import type { StreamKeys } from '../log/keys.js';

/** Records the newest base of one engine's stream as a hint, and drops older hints. */
export class HintWriter {
  #running: Promise<void> | undefined;
  #next: number | undefined;

  constructor(
    private readonly store: Store,
    private readonly keys: StreamKeys,
    /** The span length of the chains this engine writes (1: no span deltas). */
    private readonly span: number,
  ) {}

  /** A base committed at `seq`: hint it (after any hint being written). */
  afterBase(seq: number): void {
    this.#next = seq;
    this.#running ??= this.#write().finally(() => (this.#running = undefined));
  }

  /** Resolves when no hint is being written. */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async #write(): Promise<void> {
    while (this.#next !== undefined) {
      const seq = this.#next;
      this.#next = undefined;
      try {
        await this.store.putIfAbsent(this.keys.hint(seq, this.span), new Uint8Array(0));
        for (const key of await this.store.list(this.keys.hints)) {
          const hinted = this.keys.parseHint(key);
          if (hinted !== undefined && hinted < seq) await this.store.delete(key);
        }
      } catch {
        // Only a hint: a reader without it lists the whole log, and the next base tries again.
      }
    }
  }
}
