import { StatefoldError, describeCause } from '../errors.js';
import { abortedError } from './errors.js';
import { setLongTimeout, timeoutSignal } from './timers.js';

/** How a remote store retries one request: how many tries, the backoff between them, and which failures earn another. */
export interface RetryPolicy {
  /** Tries per request, the first included; at least 1. */
  maxAttempts: number;
  /** Try n (from 1) that failed waits a random time up to min(maxDelayMs, baseDelayMs × 2^(n-1)) (full jitter). */
  baseDelayMs: number;
  /** The longest wait between two tries. */
  maxDelayMs: number;
  /** One try gives up after this long (any number of ms: longer than Node's timers is kept too): its signal fires and the try counts as a transient failure. */
  tryTimeoutMs: number;
  /** Whether a failure is worth another try (throttling, 5xx, resets). A TransientError always is. */
  isRetryable(err: unknown): boolean;
  /** Text of a failure in the final error's message. Default: the error's message. */
  describe?(err: unknown): string;
  /** Random numbers in [0, 1) for the jitter. Default: Math.random. */
  random?(): number;
}

/** A failure worth another try that the client does not report as one itself (a truncated body, a try that timed out). */
export class TransientError extends Error {
  override name = 'TransientError';
}

/**
 * Runs `attempt` until it succeeds or fails for good, and rejects with a STORAGE error naming `op`
 * and `key` (and the number of tries when more than one) after the last try. Each try gets a
 * signal that fires when the caller's `signal` does or when `tryTimeoutMs` is up; a StatefoldError
 * from `attempt` passes through untouched, and an abort by the caller stops at once with ABORTED
 * (the signal's reason as cause), never STORAGE, so that callers never retry their own cancellation.
 */
export async function retry<T>(
  policy: RetryPolicy,
  op: string,
  key: string,
  signal: AbortSignal | undefined,
  attempt: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const describe = policy.describe ?? describeCause;
  const random = policy.random ?? Math.random;
  for (let tries = 1; ; tries++) {
    if (signal?.aborted) throw abortedError(op, key, signal.reason);
    // Not AbortSignal.timeout: Node fires one of more than 2^31-1 ms at once (timers.ts).
    const { signal: timeout, clear } = timeoutSignal(policy.tryTimeoutMs);
    const trySignal = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
    try {
      return await attempt(trySignal);
    } catch (err) {
      if (err instanceof StatefoldError) throw err;
      if (signal?.aborted) throw abortedError(op, key, signal.reason ?? err);
      const cause = timeout.aborted
        ? new TransientError(`no answer within ${policy.tryTimeoutMs} ms`, { cause: err })
        : err;
      const retryable = cause instanceof TransientError || policy.isRetryable(cause);
      if (!retryable || tries >= policy.maxAttempts) throw retryError(op, key, cause, tries, describe);
      await sleep(random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (tries - 1)), signal);
    } finally {
      clear();
    }
  }
}

/** The STORAGE error a request ends with: `op key: cause`, plus `(after N tries)` when it took more than one. */
export function retryError(
  op: string,
  key: string,
  cause: unknown,
  tries: number,
  describe: (err: unknown) => string = describeCause,
): StatefoldError {
  const after = tries > 1 ? ` (after ${tries} tries)` : '';
  return new StatefoldError('STORAGE', `${op} ${key}: ${describe(cause)}${after}`, { key, cause });
}

/** Waits `ms` milliseconds (any number); an abort of `signal` ends the wait early (it resolves: the caller checks the signal). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const cancel = setLongTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
