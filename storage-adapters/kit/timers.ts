/**
 * Timers of any length. Node runs a `setTimeout` (and an `AbortSignal.timeout`) of more than
 * 2^31-1 ms (24.8 days) after 1 ms instead, with a TimeoutOverflowWarning; a timeout option of 30
 * days would then fire at once. These chain timers of at most that long instead.
 */

/** The longest delay Node's timers keep: 2^31-1 ms, about 24.8 days. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Calls `fn` after `ms` milliseconds, however many (Infinity: never); returns a function that cancels it. */
export function setLongTimeout(fn: () => void, ms: number, options: { unref?: boolean } = {}): () => void {
  if (ms === Infinity) return () => undefined;
  let timer: NodeJS.Timeout | undefined;
  let left = ms;
  const arm = (): void => {
    const wait = Math.min(left, MAX_TIMER_MS);
    left -= wait;
    timer = setTimeout(left > 0 ? arm : fn, wait);
    if (options.unref) timer.unref();
  };
  arm();
  return () => clearTimeout(timer);
}

/**
 * A signal that aborts after `ms` milliseconds with a TimeoutError, as `AbortSignal.timeout` does,
 * but for any `ms`; `clear()` stops its timer once it is no longer needed (the timer does not keep
 * the process alive meanwhile).
 */
export function timeoutSignal(ms: number): { signal: AbortSignal; clear: () => void } {
  if (ms <= MAX_TIMER_MS) return { signal: AbortSignal.timeout(ms), clear: () => undefined };
  const controller = new AbortController();
  const clear = setLongTimeout(
    () => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
    ms,
    { unref: true },
  );
  return { signal: controller.signal, clear };
}
