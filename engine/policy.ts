/**
 * Policies: when a checkpoint is written as a full base instead of a delta, and when the
 * step-driven entry point `engine.step()` takes a checkpoint.
 */
import { StatefoldError, describeValue } from './errors.js';
import type { PathSize } from './format/sizes.js';

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
  /** Ceilings on the state's size and on one checkpoint's stored bytes (see Budget). Off by default. */
  budget?: Budget;
}

/**
 * Ceilings checked as each checkpoint is encoded, before anything is written. Stores have their
 * own: MongoDB 16 MB per document, DynamoDB 400 KB per item, Cloudflare Durable Objects 2 MB per
 * row, PostgreSQL 1 GB per value, SQLite 1 GB per blob, S3 5 GB per PutObject.
 */
export interface Budget {
  /** The state's size as msgpack stores it before compression (what `sizeReport` calls `stateBytes`). */
  maxStateBytes?: number;
  /** One checkpoint's stored object (`CheckpointInfo.bytes`): a delta, or a base. */
  maxCheckpointBytes?: number;
  /**
   * `'reject'`: the checkpoint over a ceiling fails BUDGET_EXCEEDED, naming the paths that grew
   * most and the largest ones; nothing is written, and the next checkpoint is a base. `'warn'`:
   * it is written, and `onWarning` is told, once, until the size is back under the ceiling.
   */
  onExceed: 'warn' | 'reject';
  /** Where `'warn'` goes. Default: `process.emitWarning(message, { code: 'STATEFOLD_BUDGET' })`. */
  onWarning?: (exceeded: BudgetExceeded) => void;
}

/** What went over a budget: given to `onWarning`, and said by BUDGET_EXCEEDED's message. */
export interface BudgetExceeded {
  stream: string;
  seq: number;
  /** Which ceiling: the state's size (`maxStateBytes`) or the checkpoint's stored object (`maxCheckpointBytes`). */
  limit: 'maxStateBytes' | 'maxCheckpointBytes';
  /** The size found: the state as msgpack stores it before compression, or the object's bytes. */
  bytes: number;
  /** The ceiling. */
  max: number;
  /** The paths added or replaced since the previous checkpoint with the most bytes (at most 3). */
  grew: PathSize[];
  /** With `maxStateBytes`: the state's largest subtrees (at most 3, ancestors included). */
  largest: PathSize[];
  /** The same, in a sentence. */
  message: string;
}

/** A budget with its defaults filled in (Infinity: no ceiling). */
export interface ResolvedBudget {
  maxStateBytes: number;
  maxCheckpointBytes: number;
  onExceed: 'warn' | 'reject';
  onWarning: (exceeded: BudgetExceeded) => void;
}

/** A policy with every default filled in. */
export type ResolvedPolicy = Required<Omit<Policy, 'budget'>> & { budget: ResolvedBudget | undefined };

/** The defaults, as documented in the README. */
export const DEFAULT_POLICY: ResolvedPolicy = Object.freeze({
  baseEvery: 32,
  maxDeltaRatio: 1,
  spanEvery: 1,
  everyMs: 1000,
  everySteps: 100,
  maxPendingBytes: Infinity,
  budget: undefined,
});

/** Fills defaults and rejects malformed values with INVALID_ARGUMENT. */
export function resolvePolicy(policy: Policy | undefined): ResolvedPolicy {
  if (policy === undefined) return DEFAULT_POLICY;
  if (policy === null || typeof policy !== 'object' || Array.isArray(policy))
    throw new StatefoldError('INVALID_ARGUMENT', `policy: must be an object, not ${describeValue(policy)}`);
  const out = { ...DEFAULT_POLICY };
  const positive = (name: Exclude<keyof Policy, 'budget'>, integer: boolean, allowInfinity: boolean): void => {
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
  if (policy.budget !== undefined) out.budget = resolveBudget(policy.budget);
  for (const key of Object.keys(policy)) {
    if (!(key in DEFAULT_POLICY))
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `policy.${key}: unknown option (known: ${Object.keys(DEFAULT_POLICY).join(', ')})`,
      );
  }
  return out;
}

function resolveBudget(budget: Budget): ResolvedBudget {
  const bad = (why: string): never => {
    throw new StatefoldError('INVALID_ARGUMENT', `policy.budget${why}`);
  };
  if (budget === null || typeof budget !== 'object' || Array.isArray(budget))
    bad(`: must be an object, not ${describeValue(budget)}`);
  const known = ['maxStateBytes', 'maxCheckpointBytes', 'onExceed', 'onWarning'];
  for (const key of Object.keys(budget))
    if (!known.includes(key)) bad(`.${key}: unknown option (known: ${known.join(', ')})`);
  const size = (name: 'maxStateBytes' | 'maxCheckpointBytes'): number => {
    const v = budget[name];
    if (v === undefined) return Infinity;
    if (typeof v !== 'number' || !(v > 0) || !(Number.isSafeInteger(v) || v === Infinity))
      bad(`.${name}: ${describeValue(v)} is not a positive whole number of bytes`);
    return v as number;
  };
  if (budget.onExceed !== 'warn' && budget.onExceed !== 'reject')
    bad(`.onExceed: ${describeValue(budget.onExceed)} is not 'warn' or 'reject'`);
  if (budget.onWarning !== undefined && typeof budget.onWarning !== 'function')
    bad(`.onWarning: ${describeValue(budget.onWarning)} is not a function`);
  const maxStateBytes = size('maxStateBytes');
  const maxCheckpointBytes = size('maxCheckpointBytes');
  if (maxStateBytes === Infinity && maxCheckpointBytes === Infinity)
    bad(': sets no ceiling (give maxStateBytes, maxCheckpointBytes or both)');
  return {
    maxStateBytes,
    maxCheckpointBytes,
    onExceed: budget.onExceed,
    onWarning: budget.onWarning ?? ((e) => process.emitWarning(e.message, { code: 'STATEFOLD_BUDGET' })),
  };
}
