/**
 * The engine's crash-point sweep (test/crash/crash-sweep.test.ts) on a store of a kind (SQLite,
 * PostgreSQL): per seed, a life's store operations are counted, then each crashes in turn, before
 * and after it lands, and the stream must then hold exactly what was acknowledged or in flight,
 * fence the crashed engine (back as a zombie) and resume. Half the seeds run retention
 * (keepLast 2-5, minAgeMs 0), whose background deletes are crash points too.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Store } from 'statefold';
import { FaultStore } from 'statefold/testing';
import { Rng, type Mode } from './random-states.js';
import { Mismatch, expectCode, expectHistory, expectLatestOneOf, expectSame, live, type Captured } from './lives.js';

interface Tally {
  cases: number;
  inflightLanded: number;
  zombies: number;
}

interface Plan {
  seed: number;
  mode: Mode;
  baseEvery: number;
  prefix: number;
  life1: number;
  /** Retention's keepLast (2-5, minAgeMs 0; the engine's gc deletes behind each base), or none. */
  keepLast: number | undefined;
}

function planOf(seed: number): Plan {
  const r = new Rng(seed * 7919 + 1);
  return {
    seed,
    mode: seed % 2 === 0 ? 'copy' : 'immutable',
    baseEvery: r.pick([4, 4, 4, 1, 2, 3]),
    prefix: r.pick([0, 0, 1, 2, 3, 5]),
    life1: 5 + r.int(6),
    // Half the seeds with retention running: its deletes are crash points too.
    keepLast: seed % 4 >= 2 ? 2 + r.int(4) : undefined,
  };
}

function lifeOf(p: Plan, stream: string, life: number, checkpoints: number, salt = 0) {
  return {
    stream,
    mode: p.mode,
    baseEvery: p.baseEvery,
    checkpoints,
    rng: new Rng(p.seed * 1_000_003 + life * 7_777 + salt),
    label: `life ${life}`,
    ...(p.keepLast !== undefined && { retention: { keepLast: p.keepLast, minAgeMs: 0 } }),
  };
}

/** One life on `faulty` (over `inner`): checks its open and that the stream then holds what was acknowledged or in flight. */
async function checkedLife(
  faulty: Store,
  inner: Store,
  latest: number,
  bySeq: Map<number, Captured>,
  o: ReturnType<typeof lifeOf>,
  clean: boolean,
) {
  const life = await live(faulty, o);
  if (life.opened) {
    if (life.openSeq !== latest) throw new Mismatch(`${o.label}: opened at seq ${life.openSeq}, newest is ${latest}`);
    expectSame(life.openState, latest === 0 ? undefined : bySeq.get(latest)!.state, `${o.label}: state after open`);
  }
  if (life.error !== undefined) {
    if (clean) throw new Mismatch(`${o.label}: failed without a fault: ${String(life.error)}`);
    expectCode(life.error, ['STORAGE'], `${o.label}: the crash`);
  }
  let seq = latest;
  for (const a of life.acked) {
    if (a.seq !== seq + 1) throw new Mismatch(`${o.label}: acknowledged seq ${a.seq} after ${seq}`);
    bySeq.set((seq = a.seq), a);
  }
  const allowed = new Map<number, Captured>();
  if (seq > 0) allowed.set(seq, bySeq.get(seq)!);
  if (life.inflight) allowed.set(seq + 1, life.inflight);
  const got = await expectLatestOneOf(inner, o.stream, allowed, seq === 0, `${o.label}: after it ended`);
  if (life.inflight !== undefined && got === seq + 1) bySeq.set(got, life.inflight);
  return { latest: got, engine: life.engine, inflightLanded: life.inflight !== undefined && got === seq + 1 };
}

async function runCase(
  inner: Store,
  p: Plan,
  crash: number,
  landed: boolean,
  stream: string,
  tally: Tally,
): Promise<void> {
  const bySeq = new Map<number, Captured>();
  let latest = 0;
  if (p.prefix > 0) latest = (await checkedLife(inner, inner, 0, bySeq, lifeOf(p, stream, 0, p.prefix), true)).latest;
  const f1 = new FaultStore(inner, { log: false }).crashAt(crash, { landed });
  const l1 = await checkedLife(f1, inner, latest, bySeq, lifeOf(p, stream, 1, p.life1), false);
  latest = l1.latest;
  if (l1.inflightLanded) tally.inflightLanded++;
  const r = new Rng(p.seed * 31 + crash * 2 + (landed ? 1 : 0));
  const f2 = new FaultStore(inner, { log: false }).crashAt(r.int(24), { landed: r.chance(0.5) });
  latest = (await checkedLife(f2, inner, latest, bySeq, lifeOf(p, stream, 2, 4, crash), false)).latest;
  latest = (await checkedLife(inner, inner, latest, bySeq, lifeOf(p, stream, 3, 3, crash), true)).latest;
  await expectHistory(inner, stream, bySeq, latest, 'after life 3', p.keepLast);
  if (l1.engine !== undefined && f1.crashed) {
    f1.heal();
    tally.zombies++;
    const zombie = await l1.engine.checkpoint({ zombie: true }).then(
      (info) => `resolved seq ${info.seq}`,
      (err: unknown) => err,
    );
    expectCode(zombie, ['FENCED', 'CLOSED'], 'life 1 back as a zombie');
    await expectHistory(inner, stream, bySeq, latest, 'after the zombie', p.keepLast);
  }
}

/** Describes the sweep over `seeds` on a fresh store of the kind `name` per seed (`run`: describe, or describe.skip). */
export function describeStoreSweep(o: {
  name: string;
  seeds: number[];
  create: () => Promise<Store> | Store;
  run?: typeof describe | typeof describe.skip;
}): void {
  const tally: Tally = { cases: 0, inflightLanded: 0, zombies: 0 };
  (o.run ?? describe)(`${o.name} crash points: the engine crash-point sweep on a ${o.name} store`, () => {
    for (const seed of o.seeds) {
      it(`restores exactly the last acknowledged or in-flight state after a crash at any operation, then fences and resumes (seed ${seed})`, async () => {
        const p = planOf(seed);
        const inner = await o.create();
        // Life 1's operations, counted in a run without faults.
        const counter = new FaultStore(inner, { log: false });
        const bySeq = new Map<number, Captured>();
        let latest = 0;
        if (p.prefix > 0)
          latest = (await checkedLife(inner, inner, 0, bySeq, lifeOf(p, 'count', 0, p.prefix), true)).latest;
        await checkedLife(counter, inner, latest, bySeq, lifeOf(p, 'count', 1, p.life1), true);
        const n = counter.count;
        const failures: string[] = [];
        for (let crash = 0; crash <= n; crash++) {
          for (const landed of [false, true]) {
            tally.cases++;
            try {
              await runCase(inner, p, crash, landed, `case/${crash}${landed ? 'l' : ''}`, tally);
            } catch (err) {
              const why = err instanceof Mismatch ? err.message : `unexpected ${String((err as Error)?.stack ?? err)}`;
              failures.push(
                `seed ${seed} (${p.mode}, baseEvery ${p.baseEvery}, prefix ${p.prefix}, keepLast ${p.keepLast ?? 'all'}) crash at ${crash}${landed ? ' after it landed' : ''}: ${why}`,
              );
            }
          }
        }
        expect(failures.slice(0, 8), `${failures.length} failing cases (first 8 shown)`).toEqual([]);
        expect(n).toBeGreaterThan(p.life1);
      }, 120_000);
    }
    afterAll(() => {
      if (tally.cases === 0) return; // (skipped)
      console.log(
        `${o.name} crash sweep: ${tally.cases} cases, the checkpoint in flight landed ${tally.inflightLanded}x, ${tally.zombies} zombies fenced`,
      );
      expect(tally.zombies).toBeGreaterThan(0);
    });
  });
}
