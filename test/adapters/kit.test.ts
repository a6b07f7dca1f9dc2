import { afterEach, describe, expect, it, vi } from 'vitest';
import { StatefoldError } from 'statefold';
import { retry, TransientError, type RetryPolicy } from 'statefold/kit';
import { mulberry32 } from '../support/prng.mjs';

// The kit's retry loop, on its own: the S3 store's behaviour over real HTTP is in s3.test.ts.

const retryable = Object.assign(new Error('busy'), { name: 'Busy' });
const fatal = Object.assign(new Error('denied'), { name: 'Denied' });

function policy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  return {
    maxAttempts: 5,
    baseDelayMs: 0,
    maxDelayMs: 0,
    tryTimeoutMs: 60_000,
    isRetryable: (err) => err === retryable,
    ...overrides,
  };
}

/** An attempt that fails with `failures` in turn, then resolves `value`; counts its tries. */
function script<T>(failures: unknown[], value: T): { attempt: () => Promise<T>; tries: () => number } {
  let tries = 0;
  return {
    attempt: async () => {
      const failure = failures[tries++];
      if (failure !== undefined) throw failure;
      return value;
    },
    tries: () => tries,
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('kit: retry', () => {
  it('retries a retryable failure and resolves what the try that succeeded returned', async () => {
    const s = script([retryable, retryable], 'ok');
    expect(await retry(policy(), 'get', 'k/1', undefined, s.attempt)).toBe('ok');
    expect(s.tries()).toBe(3);
  });

  it('rejects with STORAGE naming the operation, key and number of tries after the last try', async () => {
    const s = script([retryable, retryable, retryable, retryable], 'never');
    const err = (await retry(policy({ maxAttempts: 3 }), 'get', 'k/1', undefined, s.attempt).catch(
      (e: unknown) => e,
    )) as StatefoldError;
    expect(err).toBeInstanceOf(StatefoldError);
    expect(err).toMatchObject({ code: 'STORAGE', key: 'k/1', message: 'get k/1: busy (after 3 tries)' });
    expect(err.cause).toBe(retryable);
    expect(s.tries()).toBe(3);
  });

  it('does not retry what the classifier rejects, and describes the cause with the given describe', async () => {
    const s = script([fatal], 'never');
    const err = await retry(
      policy({ describe: (e) => `${(e as Error).name}!` }),
      'delete',
      'k/2',
      undefined,
      s.attempt,
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STORAGE', message: 'delete k/2: Denied!', cause: fatal });
    expect(s.tries()).toBe(1);
  });

  it('always retries a TransientError, and passes a StatefoldError through untouched', async () => {
    const own = new StatefoldError('CORRUPT', 'get k/3: bad checksum');
    const s = script([new TransientError('truncated body'), own], 'never');
    expect(
      await retry(policy({ isRetryable: () => false }), 'get', 'k/3', undefined, s.attempt).catch((e: unknown) => e),
    ).toBe(own);
    expect(s.tries()).toBe(2);
  });

  it('rejects at once with an already aborted signal, the reason as cause, without trying', async () => {
    const reason = new Error('shutting down');
    const s = script([], 'never');
    const err = await retry(policy(), 'list', 'p/', AbortSignal.abort(reason), s.attempt).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'ABORTED',
      key: 'p/',
      message: "list p/: aborted by the caller's signal (shutting down)",
      cause: reason,
    });
    expect(s.tries()).toBe(0);
  });

  it('gives up on a try after tryTimeoutMs (its signal fires) and retries it; the last one names the timeout', async () => {
    const signals: AbortSignal[] = [];
    const hang = (signal: AbortSignal): Promise<never> => {
      signals.push(signal);
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
    };
    const err = (await retry(
      policy({ maxAttempts: 2, tryTimeoutMs: 20, isRetryable: () => false }),
      'get',
      'k/4',
      undefined,
      hang,
    ).catch((e: unknown) => e)) as StatefoldError;
    expect(signals).toHaveLength(2);
    expect(signals.every((s) => s.aborted)).toBe(true);
    expect(err).toMatchObject({ code: 'STORAGE', message: 'get k/4: no answer within 20 ms (after 2 tries)' });
    expect(err.cause).toBeInstanceOf(TransientError);
  });

  it('stops waiting between tries when the caller aborts, with the reason as cause', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    let tries = 0;
    const attempt = async (): Promise<never> => {
      tries++;
      // The next wait would be a minute, longer than the test may take: only the abort ends it.
      setImmediate(() => controller.abort(reason));
      throw retryable;
    };
    const err = await retry(
      policy({ baseDelayMs: 60_000, maxDelayMs: 60_000, random: () => 1 }),
      'get',
      'k/5',
      controller.signal,
      attempt,
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'ABORTED',
      message: "get k/5: aborted by the caller's signal (stop)",
      cause: reason,
    });
    expect(tries).toBe(1);
  });

  it('waits a jittered time up to min(maxDelayMs, baseDelayMs × 2^(try-1)) between tries', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const seeded = mulberry32(7);
    const drawn: number[] = [];
    const random = (): number => {
      const r = seeded();
      drawn.push(r);
      return r;
    };
    const at: number[] = [];
    const attempt = async (): Promise<string> => {
      at.push(Date.now());
      if (at.length < 6) throw retryable;
      return 'done';
    };
    const done = retry(
      policy({ maxAttempts: 6, baseDelayMs: 100, maxDelayMs: 700, random }),
      'get',
      'k/6',
      undefined,
      attempt,
    );
    await vi.runAllTimersAsync();
    expect(await done).toBe('done');
    const waits = at.slice(1).map((t, i) => t - at[i]!);
    const caps = [100, 200, 400, 700, 700];
    expect(drawn).toHaveLength(5);
    // Fake timers count whole milliseconds.
    waits.forEach((wait, i) => expect(Math.abs(wait - drawn[i]! * caps[i]!), `wait ${i + 1}`).toBeLessThanOrEqual(1));
  });
});
