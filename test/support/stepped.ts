import { vi } from 'vitest';
import { MemoryStore, StatefoldError, type ListOptions, type Store, type StoreOptions } from 'statefold';

/**
 * Stateless model checking of store protocols: actors (async functions, each a process) make
 * their store calls through a stepped store, where every call waits until a scheduler grants it;
 * the scheduler then runs that one call against a MemoryStore, or injects a fault there:
 * - `crash`: the process of the call's actor dies at that call (the call does not run; neither
 *   that actor nor its background work ever makes another);
 * - `lost`: the call runs, and its caller gets a STORAGE error instead of the answer (a dropped
 *   response: the write landed, the writer does not know);
 * - `failed`: the call does not run, and its caller gets a STORAGE error (a request that never
 *   reached the store).
 * `lost` and `failed` are injected at writes only.
 * Timers are steps too: `setTimeout` is faked during a run, and firing the next one (`timer`) is a
 * choice beside the calls waiting, so an actor's backoff can end before or after any other call;
 * `Math.random` is seeded, so backoffs (and anything else random) replay. Engines should be opened
 * with `storeTimeoutMs: Infinity` (no timeout timers, which would be steps at every call).
 * A schedule is the list of choices made, so a run replays exactly from its schedule; `explore`
 * enumerates every schedule within a bound of preemptions and faults (CHESS-style), one run per
 * schedule on a fresh store, and gives each finished run to `check`.
 */

/** The choice that fires the next timer instead of granting a call. */
export const TIMER = 'timer';

/** One choice: the call granted (its id, or TIMER), and the fault injected there, if any. */
export interface Choice {
  id: string;
  fault?: 'crash' | 'lost' | 'failed';
}

interface Pending {
  id: string;
  actor: string;
  op: string;
  write: boolean;
  run: () => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** What one run did: its schedule, the calls enabled at each step, and the actors that died. */
export interface Run {
  schedule: Choice[];
  /** For each step: the ids enabled then, in the order choices are made (the default first). */
  enabled: { ids: string[]; writes: Set<string>; last: string | undefined }[];
  crashed: Set<string>;
  store: MemoryStore;
}

/** The world of one run: the store behind the steps, and a store view for each actor. */
export class Stepped {
  readonly store = new MemoryStore();
  readonly crashed = new Set<string>();
  #pending: Pending[] = [];
  #calls = new Map<string, number>();
  /** Bumped on every new call, so that the scheduler can tell when the actors have gone quiet. */
  #arrivals = 0;

  /** A Store whose every call is a step of `actor`; with `scan`, it offers the memory store's scan too. */
  view(actor: string, options: { scan?: boolean } = {}): Store {
    const step = <T>(op: string, key: string, write: boolean, run: () => Promise<T>): Promise<T> => {
      const n = (this.#calls.get(actor) ?? 0) + 1;
      this.#calls.set(actor, n);
      this.#arrivals++;
      if (this.crashed.has(actor)) return new Promise<T>(() => undefined); // a dead process calls nothing
      return new Promise<T>((resolve, reject) =>
        this.#pending.push({
          id: `${actor}#${n} ${op} ${key}`,
          actor,
          op,
          write,
          run,
          resolve: resolve as (v: unknown) => void,
          reject,
        }),
      );
    };
    const s = this.store;
    return {
      get: (key: string, o?: StoreOptions) => step('get', key, false, () => s.get(key, o)),
      putIfAbsent: (key: string, body: Uint8Array, o?: StoreOptions) =>
        step('putIfAbsent', key, true, () => s.putIfAbsent(key, body, o)),
      list: (prefix: string, o?: ListOptions) => step('list', prefix, false, () => s.list(prefix, o)),
      delete: (key: string, o?: StoreOptions) => step('delete', key, true, () => s.delete(key, o)),
      removeLeftovers: (prefix: string, o?: StoreOptions) =>
        step('removeLeftovers', prefix, true, () => s.removeLeftovers(prefix, o)),
      ...(options.scan && {
        scan: (prefix: string, o?: ListOptions) => step('scan', prefix, false, () => s.scan(prefix, o)),
      }),
    };
  }

  /** Waits until no call has arrived for a while: every live actor waits on a step, or is done. */
  async quiet(): Promise<void> {
    for (let still = 0, seen = this.#arrivals; still < 8;) {
      await new Promise<void>((r) => setImmediate(r));
      if (this.#arrivals === seen) still++;
      else [still, seen] = [0, this.#arrivals];
    }
  }

  /** The calls waiting for the scheduler, by id. */
  pending(): Pending[] {
    return [...this.#pending].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Grants one call, with a fault or not. */
  async grant(choice: Choice): Promise<void> {
    const at = this.#pending.findIndex((p) => p.id === choice.id);
    if (at < 0)
      throw new Error(
        `stepped: no call ${choice.id} is waiting (a schedule that does not replay); waiting: ${this.#pending.map((p) => p.id).join(', ')}`,
      );
    const [call] = this.#pending.splice(at, 1);
    if (choice.fault === 'crash') {
      this.crashed.add(call!.actor);
      this.#pending = this.#pending.filter((p) => p.actor !== call!.actor);
      return;
    }
    if (choice.fault === 'failed') {
      call!.reject(new StatefoldError('STORAGE', `${call!.id}: failed before it reached the store (stepped store)`));
      return;
    }
    let result: unknown;
    try {
      result = await call!.run();
    } catch (err) {
      call!.reject(err);
      return;
    }
    if (choice.fault === 'lost')
      call!.reject(new StatefoldError('STORAGE', `${call!.id}: answer lost (stepped store)`));
    else call!.resolve(result);
  }
}

/** The bounds of an exploration. */
export interface Bounds {
  /** Preemptions: choosing another actor's call while the last actor has one waiting. */
  preemptions: number;
  /** Faults injected per run. */
  faults: number;
  /** Longest run, in steps (a run longer than this fails: a livelock). */
  maxSteps: number;
}

/** A scenario: on a fresh world, its actors (by name, each the promise of its process) and what they did. */
export type Scenario<T> = (world: Stepped) => { actors: Record<string, Promise<unknown>>; result: () => T };

/**
 * Runs `scenario` once along `prefix` (then the default choice: the last actor's call when it has
 * one waiting, else the first by id), on a fresh world. Resolves the run and the scenario's result,
 * once every actor has finished or died and no call waits.
 */
export async function runOnce<T>(
  scenario: Scenario<T>,
  prefix: Choice[],
  maxSteps: number,
): Promise<{ run: Run; result: T }> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  const random = vi.spyOn(Math, 'random').mockImplementation(seeded(1));
  try {
    return await steps(scenario, prefix, maxSteps);
  } finally {
    random.mockRestore();
    vi.useRealTimers();
  }
}

/** A deterministic stand-in for Math.random (mulberry32). */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function steps<T>(scenario: Scenario<T>, prefix: Choice[], maxSteps: number): Promise<{ run: Run; result: T }> {
  const world = new Stepped();
  const { actors, result } = scenario(world);
  const ended = new Set<string>();
  for (const [name, p] of Object.entries(actors))
    void p.then(
      () => ended.add(name),
      () => ended.add(name),
    );
  const names = Object.keys(actors);
  const done = (): boolean => names.every((n) => ended.has(n) || world.crashed.has(n));
  const run: Run = { schedule: [], enabled: [], crashed: world.crashed, store: world.store };
  let last: string | undefined;
  for (let step = 0; ; step++) {
    await world.quiet();
    const waiting = world.pending();
    const timers = vi.getTimerCount() > 0;
    if (waiting.length === 0 && !timers) {
      if (done()) break;
      throw new Error(`stepped: the actors wait on nothing after ${step} steps (a deadlock)`);
    }
    if (step >= maxSteps) throw new Error(`stepped: more than ${maxSteps} steps (a livelock?)`);
    const ids = [...waiting.map((p) => p.id), ...(timers ? [TIMER] : [])];
    const own = waiting.find((p) => p.actor === last);
    const ordered = own === undefined ? ids : [own.id, ...ids.filter((id) => id !== own.id)];
    run.enabled.push({ ids: ordered, writes: new Set(waiting.filter((p) => p.write).map((p) => p.id)), last });
    const choice = prefix[step] ?? { id: ordered[0]! };
    run.schedule.push(choice);
    if (choice.id === TIMER) {
      last = undefined;
      vi.advanceTimersToNextTimer();
      continue;
    }
    last = waiting.find((p) => p.id === choice.id)?.actor;
    await world.grant(choice);
  }
  return { run, result: result() };
}

/** Preemptions and faults a schedule spends up to (not including) step `upTo`. */
function spent(run: Run, upTo: number): { preemptions: number; faults: number } {
  let preemptions = 0;
  let faults = 0;
  for (let i = 0; i < upTo; i++) {
    const choice = run.schedule[i]!;
    if (choice.fault !== undefined) faults++;
    const { ids, last } = run.enabled[i]!;
    if (last !== undefined && ids[0]!.startsWith(`${last}#`) && choice.id !== ids[0]) preemptions++;
  }
  return { preemptions, faults };
}

/**
 * Every schedule of `scenario` within `bounds`, depth first: each run is replayed from the
 * schedule of an earlier one up to a step, and then takes another choice there. `check` gets each
 * finished run (and throws to fail it; the error names the schedule). Resolves the runs made.
 */
export async function explore<T>(
  scenario: Scenario<T>,
  check: (result: T, run: Run) => Promise<void>,
  bounds: Bounds,
): Promise<number> {
  let runs = 0;
  const visit = async (prefix: Choice[]): Promise<void> => {
    const { run, result } = await runOnce(scenario, prefix, bounds.maxSteps);
    runs++;
    try {
      await check(result, run);
    } catch (err) {
      const schedule = run.schedule.map((c) => (c.fault ? `${c.id} [${c.fault}]` : c.id)).join('\n  ');
      throw new Error(`${(err as Error).message}\nschedule:\n  ${schedule}`, { cause: err });
    }
    // Alternatives at every step past the prefix (those before it are the parent's to take).
    for (let i = prefix.length; i < run.schedule.length; i++) {
      const { preemptions, faults } = spent(run, i);
      const { ids, writes, last } = run.enabled[i]!;
      const taken = run.schedule[i]!;
      const base = run.schedule.slice(0, i);
      for (const id of ids) {
        const preempts = last !== undefined && ids[0]!.startsWith(`${last}#`) && id !== ids[0];
        if (preempts && preemptions >= bounds.preemptions) continue;
        const options: Choice[] = [{ id }];
        if (faults < bounds.faults && id !== TIMER) {
          options.push({ id, fault: 'crash' });
          if (writes.has(id)) options.push({ id, fault: 'lost' }, { id, fault: 'failed' });
        }
        for (const option of options) {
          if (option.id === taken.id && option.fault === taken.fault) continue;
          await visit([...base, option]);
        }
      }
    }
  };
  await visit([]);
  return runs;
}
