/**
 * Policies: when a checkpoint is written as a full base instead of a delta, and when the
 * step-driven entry point `engine.step()` takes a checkpoint.
 */
import { StatefoldError, describeValue } from './errors.js';

/** When to write bases, and when `step()` checkpoints. Every field is optional. */
export interface Policy {
  /** A base at least every this many checkpoints: a restore folds at most `baseEvery - 1` deltas. Default 32. */
  baseEvery?: number;
  /**
   * A base also when the deltas since the last base add up to more than this fraction of that
   * base's stored size (Redis rewrites its AOF at +100%). Default 1.
   */
  maxDeltaRatio?: number;
  /**
   * Every this many deltas after a base, a span delta: a delta that also carries the operations
   * of the deltas since the previous span delta, so that a restore reads the base, the span
   * deltas and at most `spanEvery - 1` plain deltas instead of the whole chain, at the cost of
   * storing each delta's operations about twice. Default 1 (off): span deltas are frame format
   * version 4, which earlier statefold cannot read (CORRUPT, "version 4 is not supported"), so turn
   * them on (8 suits S3) once every reader of the store runs a statefold that reads them.
   */
  spanEvery?: number;
  /** `step()` checkpoints when this many milliseconds have passed since the last checkpoint. Default 1,000. */
  everyMs?: number;
  /** `step()` checkpoints every this many steps. Default 100. */
  everySteps?: number;
  /**
   * `step()` checkpoints when the change since the last checkpoint is estimated to exceed this many
   * bytes. Off by default (Infinity): it diffs the state at every step to estimate the change,
   * which is cheap with `updates: 'immutable'` and a full walk of the state otherwise.
   */
  maxPendingBytes?: number;
}

/** A policy with every default filled in. */
export type ResolvedPolicy = Required<Policy>;

/** The defaults, as documented in the README. */
export const DEFAULT_POLICY: ResolvedPolicy = Object.freeze({
  baseEvery: 32,
  maxDeltaRatio: 1,
  spanEvery: 1,
  everyMs: 1000,
  everySteps: 100,
  maxPendingBytes: Infinity,
});

/** Fills defaults and rejects malformed values with INVALID_ARGUMENT. */
export function resolvePolicy(policy: Policy | undefined): ResolvedPolicy {
  if (policy === undefined) return DEFAULT_POLICY;
  if (policy === null || typeof policy !== 'object' || Array.isArray(policy))
    throw new StatefoldError('INVALID_ARGUMENT', `policy: must be an object, not ${describeValue(policy)}`);
  const out = { ...DEFAULT_POLICY };
  const positive = (name: keyof Policy, integer: boolean, allowInfinity: boolean): void => {
    const v = policy[name];
    if (v === undefined) return;
    const ok =
      typeof v === 'number' &&
      v > 0 &&
      (allowInfinity && v === Infinity ? true : Number.isFinite(v) && (!integer || Number.isInteger(v)));
    if (!ok) {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `policy.${name}: ${describeValue(v)} is not a positive ${integer ? 'integer' : 'number'}${allowInfinity ? ' (or Infinity)' : ''}`,
      );
    }
    out[name] = v;
  };
  positive('baseEvery', true, false);
  positive('maxDeltaRatio', false, true);
  positive('spanEvery', true, false);
  positive('everyMs', false, true);
  positive('everySteps', true, true);
  positive('maxPendingBytes', false, true);
  for (const key of Object.keys(policy)) {
    if (!(key in DEFAULT_POLICY))
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `policy.${key}: unknown option (known: ${Object.keys(DEFAULT_POLICY).join(', ')})`,
      );
  }
  return out;
}
