/**
 * The step trigger: when `engine.step()` takes a checkpoint. After `everySteps` steps or `everyMs`
 * milliseconds since the last checkpoint, or once the change is estimated past `maxPendingBytes`.
 */
import type { Capturer } from '../capture/index.js';
import type { ResolvedPolicy } from '../policy.js';

/** A step that did not checkpoint: `flush` checkpoints it. */
export interface DeferredStep<S, O> {
  state: S;
  options: O | undefined;
}

/** Counts steps and time since the last checkpoint, and keeps the last step that did not checkpoint. */
export class StepTrigger<S, O> {
  #steps = 0;
  #lastCheckpointAt = Date.now();
  #deferred: DeferredStep<S, O> | undefined;

  constructor(private readonly policy: ResolvedPolicy) {}

  /**
   * Counts one step of `state`; true when the policy says to checkpoint now. The change's size is
   * estimated only when `maxPendingBytes` needs it. A step that does not checkpoint has its state
   * checked all the same (the estimate checks it too), so that a state that cannot be checkpointed
   * is rejected (INVALID_STATE) at the step that passed it, not at a later flush or close.
   */
  step(capturer: Pick<Capturer, 'estimate' | 'check'>, state: S): boolean {
    this.#steps++;
    const p = this.policy;
    if (this.#steps >= p.everySteps || Date.now() - this.#lastCheckpointAt >= p.everyMs) return true;
    if (p.maxPendingBytes !== Infinity) return capturer.estimate(state) >= p.maxPendingBytes;
    capturer.check(state);
    return false;
  }

  /** Keeps a step that did not checkpoint, for `flush`. */
  defer(state: S, options: O | undefined): void {
    this.#deferred = { state, options };
  }

  /** The last step that did not checkpoint, if no checkpoint came after it. */
  get deferred(): DeferredStep<S, O> | undefined {
    return this.#deferred;
  }

  /** A checkpoint was queued: start counting again. */
  reset(): void {
    this.#steps = 0;
    this.#lastCheckpointAt = Date.now();
    this.#deferred = undefined;
  }
}
