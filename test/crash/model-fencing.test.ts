import { describe, expect, it } from 'vitest';
import {
  SnapshotEngine,
  isStatefoldError,
  listCheckpoints,
  restore,
  type EngineOptions,
  type MemoryStore,
  type Store,
} from 'statefold';
import { explore, runOnce, type Bounds, type Run, type Scenario, type Stepped } from '../support/stepped.js';

/**
 * Model check of today's per-stream claim and fencing: two processes open one stream and
 * checkpoint it, every interleaving of their store calls (and of their backoff timers) within a
 * bound of preemptions, with a crash, a lost answer or a failed write at any call (test/support/stepped.ts). After
 * each run: every acknowledged checkpoint that retention keeps restores to the state acknowledged
 * (no fork, none lost), every open returned a state that restores at its seq (no stale open), and
 * a new engine opens the newest state and commits after it (convergence). This is also the harness
 * the group protocol's check (docs/design/group-commit.md, section 9.6) is to be built on.
 */

const STREAM = 'model/x';

interface Did {
  opened?: { seq: number; state: unknown };
  acks: { seq: number; state: unknown }[];
  /** The code a call rejected with, which ended the actor (FENCED, STORAGE). */
  error?: string;
  /** An error that is not a StatefoldError (a bug): fails the run. */
  unexpected?: string;
}

type Options = Omit<EngineOptions, 'store' | 'stream'>;

/** Actor `name` opens the stream and commits `states`, one after the other, until one is rejected. */
function actor(store: Store, states: unknown[], options: Options, did: Did): Promise<void> {
  return (async () => {
    // No TIMEOUT timers: they would be steps at every call (stepped.ts).
    const engine = await SnapshotEngine.open({ ...options, store, stream: STREAM, storeTimeoutMs: Infinity });
    did.opened = { seq: engine.seq, state: engine.state };
    for (const state of states) {
      const { seq } = await engine.checkpoint(state);
      did.acks.push({ seq, state });
    }
  })().catch((err: unknown) => {
    if (isStatefoldError(err)) did.error = err.code;
    else did.unexpected = err instanceof Error ? (err.stack ?? err.message) : String(err);
  });
}

/**
 * A commits `aStates` while B opens and commits once (a takeover, or B first), both with
 * `options`; `views` makes each actor's store from its stepped view.
 */
function twoWriters(
  options: Options,
  aStates: unknown[],
  views: (world: Stepped, name: string) => Store = (world, name) => world.view(name),
): Scenario<Record<string, Did>> {
  return (world) => {
    const did: Record<string, Did> = { a: { acks: [] }, b: { acks: [] } };
    return {
      actors: {
        a: actor(views(world, 'a'), aStates, options, did.a!),
        b: actor(views(world, 'b'), [{ b: 1 }], options, did.b!),
      },
      result: () => did,
    };
  };
}

/**
 * A store that does not honour create-if-absent (as RGW does not on a multipart upload): a create
 * that finds the key taken replaces it and says it created it. The check must catch the fork this
 * allows, or it could not catch one at all.
 */
function overwriting(world: Stepped, name: string): Store {
  const view = world.view(name);
  return {
    ...view,
    putIfAbsent: async (key, body, options) => {
      if (!(await view.putIfAbsent(key, body, options))) {
        await world.store.delete(key);
        await world.store.putIfAbsent(key, body);
      }
      return true;
    },
  };
}

/** The guarantees, after a run. */
async function check(did: Record<string, Did>, run: Run): Promise<void> {
  const store: MemoryStore = run.store;
  // Below the oldest checkpoint kept, retention deleted what was acknowledged: not a loss.
  const oldest = (await listCheckpoints(store, STREAM))[0]?.seq ?? 1;
  let newestAck = 0;
  for (const [name, d] of Object.entries(did)) {
    for (const ack of d.acks) {
      newestAck = Math.max(newestAck, ack.seq);
      if (ack.seq < oldest) continue;
      const got = await restore(store, STREAM, { seq: ack.seq });
      expect(got.state, `${name}'s acknowledged seq ${ack.seq}`).toEqual(ack.state);
    }
    if (d.opened !== undefined && d.opened.seq >= oldest) {
      const got = await restore(store, STREAM, { seq: d.opened.seq });
      expect(got.state, `${name} opened at seq ${d.opened.seq}`).toEqual(d.opened.state);
    }
    expect(d.unexpected, `${name} threw`).toBeUndefined();
    // A process that lived either finished or was told why not.
    if (!run.crashed.has(name) && d.error !== undefined) expect(['FENCED', 'STORAGE'], name).toContain(d.error);
  }
  // Retention never deletes the newest acknowledged checkpoint.
  expect(newestAck === 0 || newestAck >= oldest, `newest acknowledged seq ${newestAck} kept`).toBe(true);
  // A new process opens the newest committed state, at or after every acknowledged seq, and commits after it.
  const engine = await SnapshotEngine.open({ store, stream: STREAM });
  expect(engine.seq).toBeGreaterThanOrEqual(newestAck);
  if (engine.seq > 0) expect(engine.state).toEqual((await restore(store, STREAM)).state);
  const { seq } = await engine.checkpoint({ after: true });
  expect(seq).toBe(engine.seq);
  expect((await restore(store, STREAM)).state).toEqual({ after: true });
  await engine.close();
}

/** Explores `scenario` within `bounds`, checks every run, prints how many schedules it ran. */
async function modelCheck(name: string, scenario: Scenario<Record<string, Did>>, bounds: Bounds): Promise<void> {
  const runs = await explore(scenario, check, bounds);
  console.log(`model check, ${name}: ${runs} schedules`);
  expect(runs).toBeGreaterThan(10);
}

const PLAIN = twoWriters({ policy: { baseEvery: 2 } }, [{ a: 1 }, { a: 2 }]);
/** With retention: A's background gc deletes behind it (keepLast 1, no grace) while B opens. */
const RETAINED = twoWriters({ policy: { baseEvery: 2 }, retention: { keepLast: 1, minAgeMs: 0 } }, [
  { a: 1 },
  { a: 2 },
  { a: 3 },
]);
/** Reads through `scan` (the memory and SQLite stores' path): listings bring the frames' bytes. */
const SCANNED = twoWriters({ policy: { baseEvery: 2 } }, [{ a: 1 }, { a: 2 }], (world, name) =>
  world.view(name, { scan: true }),
);

describe('model check: two processes on one stream, every interleaving within bounds', () => {
  it('one run replays exactly from its schedule', async () => {
    const first = await runOnce(PLAIN, [], 500);
    const again = await runOnce(PLAIN, first.run.schedule, 500);
    expect(again.run.schedule).toEqual(first.run.schedule);
    expect(again.result).toEqual(first.result);
    await check(first.result, first.run);
  });

  it('catches the fork of a store that does not honour create-if-absent (the check can fail)', async () => {
    const broken = twoWriters({ policy: { baseEvery: 2 } }, [{ a: 1 }, { a: 2 }], overwriting);
    await expect(explore(broken, check, { preemptions: 2, faults: 0, maxSteps: 500 })).rejects.toThrow(
      /acknowledged seq \d+|opened at seq \d+/,
    );
  });

  it('no fork, no lost acknowledgement, no stale open: 2 preemptions, no fault', async () => {
    await modelCheck('2 preemptions', PLAIN, { preemptions: 2, faults: 0, maxSteps: 500 });
  }, 120_000);

  it('the same with a crash, a lost answer or a failed write at any call: 2 preemptions, 1 fault', async () => {
    await modelCheck('2 preemptions and 1 fault', PLAIN, { preemptions: 2, faults: 1, maxSteps: 500 });
  }, 180_000);

  it('the same through scan: 2 preemptions, 1 fault', async () => {
    await modelCheck('scan, 2 preemptions and 1 fault', SCANNED, { preemptions: 2, faults: 1, maxSteps: 500 });
  }, 180_000);

  it('with retention deleting behind the writer: 2 preemptions, or 1 and a fault', async () => {
    await modelCheck('retention, 2 preemptions', RETAINED, { preemptions: 2, faults: 0, maxSteps: 800 });
    await modelCheck('retention, 1 preemption and 1 fault', RETAINED, { preemptions: 1, faults: 1, maxSteps: 800 });
  }, 180_000);
});
