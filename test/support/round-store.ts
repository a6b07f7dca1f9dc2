import { MemoryStore, type Store } from 'statefold';
import { HookStore } from './hook-store.js';

/**
 * A store that answers in rounds, to count how many store round trips a read makes one after
 * the other: every call waits until the caller has gone quiet (no new call for several turns of
 * the event loop), then all the calls waiting are let through together, as one round. Calls made
 * together land in one round; a call made once another answered lands in a later one.
 */
export function roundStore(
  inner: Store = new MemoryStore(),
  /** Also offer `scan` (as the memory and SQLite stores do), counted as any other call. */
  scans = false,
): {
  store: Store;
  /** Rounds and calls since the last reset (or since counting started). */
  readonly rounds: number;
  readonly calls: number;
  /** Starts counting (until then calls pass through at once) and zeroes the counts. */
  reset(): void;
} {
  let counting = false;
  let rounds = 0;
  let calls = 0;
  let waiting: (() => void)[] = [];
  let pumping = false;
  const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
  const pump = async () => {
    pumping = true;
    for (let seen = -1; waiting.length !== seen;) {
      seen = waiting.length;
      for (let i = 0; i < 5; i++) await tick();
    }
    const round = waiting;
    waiting = [];
    rounds++;
    pumping = false;
    for (const go of round) go();
  };
  const hook = async (op: string, key: string): Promise<void> => {
    if (!counting) return;
    calls++;
    if (process.env.ROUNDS_LOG) console.error(rounds + 1, op, key.slice(-24));
    await new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (!pumping) void pump();
    });
  };
  const store: Store = new HookStore(inner, hook);
  if (scans) {
    const scan = inner.scan!.bind(inner);
    store.scan = async (prefix, options) => {
      await hook('scan', prefix);
      return scan(prefix, options);
    };
  }
  return {
    store,
    get rounds() {
      return rounds;
    },
    get calls() {
      return calls;
    },
    reset() {
      counting = true;
      rounds = 0;
      calls = 0;
    },
  };
}
