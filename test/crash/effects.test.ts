import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, StatefoldError, restore, type Store } from 'statefold';
import { FaultStore } from 'statefold/testing';
import { Rng } from '../support/random-states.js';
import { firstDifference } from '../support/same.js';

/**
 * Effects across crashes: engine.effect(token, fn) runs fn at most once per token. An agent
 * checkpoints its steps and pays for every other one through effect(); each life first replays
 * every token attempted so far (as a resumed agent does). The store crashes at every operation
 * of life 1, then at a random one of life 2, and life 3 runs clean. After each life: fn was
 * called at most once per token, an effect() that resolved is `done` with its result in the
 * newest checkpoint, a token whose fn ran is `pending` or `done`, and one whose fn never ran is
 * not `done`.
 */

const STREAM = 'agent/effects';

interface World {
  /** fn calls per token (the external service's view). */
  calls: Map<string, number>;
  /** Results of effect() calls that resolved. */
  acked: Map<string, unknown>;
  /** Tokens ever attempted, in order. */
  attempted: string[];
  pendingSeen: number;
}

class Mismatch extends Error {}

async function effectLife(store: Store, world: World, label: string, steps: number): Promise<void> {
  let engine: SnapshotEngine<{ n: number }>;
  try {
    engine = await SnapshotEngine.open<{ n: number }>({ store, stream: STREAM, policy: { baseEvery: 3 } });
  } catch (err) {
    return expectCrash(err, `${label} open`);
  }
  const pay = async (token: string): Promise<boolean> => {
    if (!world.attempted.includes(token)) world.attempted.push(token);
    try {
      const result = await engine.effect(token, (t) => {
        world.calls.set(t, (world.calls.get(t) ?? 0) + 1);
        return { paid: t, by: label };
      });
      const earlier = world.acked.get(token);
      if (earlier !== undefined && firstDifference(result, earlier) !== undefined)
        throw new Mismatch(`${label}: ${token} resolved ${JSON.stringify(result)}, earlier ${JSON.stringify(earlier)}`);
      world.acked.set(token, result);
      return true;
    } catch (err) {
      if (err instanceof StatefoldError && err.code === 'EFFECT_PENDING') {
        world.pendingSeen++;
        return true;
      }
      if (err instanceof Mismatch) throw err;
      expectCrash(err, `${label} effect ${token}`);
      return false;
    }
  };
  // A resumed agent replays the effects it attempted before.
  for (const token of [...world.attempted]) if (!(await pay(token))) return;
  let state = engine.state ?? { n: 0 };
  for (let k = 0; k < steps; k++) {
    state = { n: state.n + 1 };
    try {
      await engine.checkpoint(state);
    } catch (err) {
      return expectCrash(err, `${label} checkpoint`);
    }
    if (state.n % 2 === 0 && !(await pay(`pay-${state.n}`))) return;
  }
  await engine.close();
}

function expectCrash(err: unknown, what: string): void {
  if (!(err instanceof StatefoldError && err.code === 'STORAGE'))
    throw new Mismatch(`${what}: expected the crash (STORAGE), got ${String(err)}`);
}

async function expectLedger(inner: Store, world: World, what: string): Promise<void> {
  for (const [token, n] of world.calls) if (n > 1) throw new Mismatch(`${what}: fn of ${token} ran ${n} times`);
  let effects: { token: string; status: string; result?: unknown }[] = [];
  try {
    effects = (await restore(inner, STREAM)).effects;
  } catch (err) {
    if (!(err instanceof StatefoldError && err.code === 'NOT_FOUND' && world.calls.size === 0)) throw err;
  }
  const byToken = new Map(effects.map((e) => [e.token, e]));
  for (const [token, result] of world.acked) {
    const r = byToken.get(token);
    if (r?.status !== 'done' || firstDifference(r.result, result) !== undefined)
      throw new Mismatch(
        `${what}: ${token} resolved ${JSON.stringify(result)} but the ledger has ${JSON.stringify(r)}`,
      );
  }
  for (const token of world.attempted) {
    const ran = (world.calls.get(token) ?? 0) > 0;
    const status = byToken.get(token)?.status;
    if (ran && status !== 'pending' && status !== 'done')
      throw new Mismatch(`${what}: fn of ${token} ran but the ledger has ${status ?? 'nothing'}`);
    if (!ran && status === 'done') throw new Mismatch(`${what}: ${token} is done but its fn never ran`);
  }
}

async function effectCase(seed: number, crash: number, landed: boolean, world: World): Promise<void> {
  const inner = new MemoryStore();
  await effectLife(new FaultStore(inner).crashAt(crash, { landed }), world, 'life 1', 8);
  await expectLedger(inner, world, 'after life 1');
  const r = new Rng(seed * 7 + crash * 2 + (landed ? 1 : 0));
  await effectLife(new FaultStore(inner).crashAt(r.int(30), { landed: r.chance(0.5) }), world, 'life 2', 6);
  await expectLedger(inner, world, 'after life 2');
  await effectLife(inner, world, 'life 3', 4);
  await expectLedger(inner, world, 'after life 3');
}

describe('effects: at most once across crashes', () => {
  it('runs each fn at most once and keeps every acknowledged outcome, whatever store operation the crash comes at', async () => {
    const counter = new FaultStore(new MemoryStore());
    await effectLife(counter, { calls: new Map(), acked: new Map(), attempted: [], pendingSeen: 0 }, 'count', 8);
    const n = counter.count;
    expect(n).toBeGreaterThan(15);
    const failures: string[] = [];
    let pendingSeen = 0;
    for (let seed = 1; seed <= 4; seed++) {
      for (let crash = 0; crash <= n; crash++) {
        for (const landed of [false, true]) {
          const world: World = { calls: new Map(), acked: new Map(), attempted: [], pendingSeen: 0 };
          try {
            await effectCase(seed, crash, landed, world);
          } catch (err) {
            failures.push(
              `seed ${seed} crash at operation ${crash}${landed ? ' after it landed' : ''}: ${err instanceof Mismatch ? err.message : String((err as Error).stack)}`,
            );
          }
          pendingSeen += world.pendingSeen;
        }
      }
    }
    expect(failures.slice(0, 6), `${failures.length} failing cases (first 6 shown)`).toEqual([]);
    // The sweep did reach the interesting case: intents found pending after a crash.
    expect(pendingSeen).toBeGreaterThan(0);
  });
});
