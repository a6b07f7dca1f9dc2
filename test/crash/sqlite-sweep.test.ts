import { copyFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore } from 'statefold/sqlite';
import { FaultStore } from 'statefold/testing';
import { Rng, type Mode } from '../support/random-states.js';
import {
  Mismatch,
  expectCode,
  expectHistory,
  expectLatestOneOf,
  expectSame,
  live,
  type Captured,
} from '../support/lives.js';

/**
 * Crash points of SqliteStore. A store operation is one SQLite transaction, which lands whole or
 * not at all, so a crash can fall: before the transaction reaches the database (nothing landed),
 * inside it before COMMIT (nothing: SQLite rolls it back, see sqlite-kill.test.ts), while COMMIT
 * appends its frames to the WAL (torn: the frames after the last whole commit frame are ignored),
 * or after COMMIT and before the reply (landed, not acknowledged). The first part cuts the WAL of
 * a real group commit at every frame boundary and inside frames and opens each copy; the second
 * runs the engine's crash-point sweep (test/crash/crash-sweep.test.ts) on a SqliteStore, every
 * operation crashing both before and after it lands.
 */

const dirs: string[] = [];
const stores: SqliteStore[] = [];
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'statefold-sqlite-crash-'));
  dirs.push(dir);
  return dir;
}

const body = (key: string, size: number): Buffer => {
  const b = Buffer.alloc(size, key.length);
  b.write(key, 0);
  return b;
};

/** Every key of a store and its body, in key order. */
async function contents(store: SqliteStore): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for (const key of await store.list('')) out.push([key, Buffer.from((await store.get(key))!).toString('base64')]);
  return out;
}

describe('sqlite crash points: a commit torn anywhere in its WAL frames', () => {
  it('opens every cut of the last group commit as before it or, cut after its commit frame, as after it', async () => {
    const dir = await freshDir();
    const file = path.join(dir, 'torn.db');
    const store = new SqliteStore({ path: file });
    stores.push(store);
    for (let i = 0; i < 5; i++) await store.putIfAbsent(`t/${i}`, body(`t/${i}`, 3000));
    const before = await contents(store);
    const walStart = (await stat(`${file}-wal`)).size;
    const tx = store.stats().transactions;
    // One group commit: creates across many pages, an existing key, a delete.
    const results = await Promise.all([
      store.putIfAbsent('t/a', body('t/a', 9000)),
      store.putIfAbsent('t/0', body('x', 10)),
      store.delete('t/1'),
      store.putIfAbsent('t/b', body('t/b', 20000)),
    ]);
    expect(results).toEqual([true, false, undefined, true]);
    expect(store.stats().transactions - tx, 'the four writes were one transaction').toBe(1);
    const after = await contents(store);
    const wal = await readFile(`${file}-wal`);
    const pageSize = wal.readUInt32BE(8);
    const frame = 24 + pageSize;
    const frames = (wal.length - walStart) / frame;
    expect(Number.isInteger(frames) && frames > 3, `whole frames after the earlier commits (${frames})`).toBe(true);
    // The last frame is the commit frame: its header holds the database size after the commit.
    expect(wal.readUInt32BE(wal.length - frame + 4)).toBeGreaterThan(0);
    for (let f = 0; f < frames - 1; f++) expect(wal.readUInt32BE(walStart + f * frame + 4), `frame ${f}`).toBe(0);

    const cuts = new Set<number>([walStart, walStart + 1, wal.length - 1, wal.length]);
    for (let f = 0; f < frames; f++) {
      const at = walStart + f * frame;
      for (const c of [at, at + 12, at + 24, at + 24 + (pageSize >> 1)]) cuts.add(c);
    }
    let whole = 0;
    let none = 0;
    const check = async (wal2: Buffer, what: string, expected: [string, string][]): Promise<void> => {
      const copy = path.join(await freshDir(), 'copy.db');
      await copyFile(file, copy);
      await writeFile(`${copy}-wal`, wal2);
      const reopened = new SqliteStore({ path: copy });
      try {
        expect(await contents(reopened), what).toEqual(expected);
        // The copy takes writes again: the torn frames are gone for good.
        expect(await reopened.putIfAbsent('t/after', body('t/after', 100)), what).toBe(true);
        expect(await reopened.putIfAbsent('t/a', body('t/a', 100)), what).toBe(expected !== after);
      } finally {
        await reopened.close();
      }
    };
    for (const cut of [...cuts].sort((a, b) => a - b)) {
      const landed = cut === wal.length;
      await check(wal.subarray(0, cut), `WAL cut at byte ${cut} of ${wal.length}`, landed ? after : before);
      if (landed) whole++;
      else none++;
    }
    // A commit frame whose bytes were damaged (its checksum fails) does not count either.
    const flipped = Buffer.from(wal);
    flipped[wal.length - (pageSize >> 1)]! ^= 0x40;
    await check(flipped, 'the commit frame damaged', before);
    expect(none).toBeGreaterThan(4 * frames);
    expect(whole).toBe(1);
  });
});

// The engine's crash-point sweep, on a SqliteStore: one database file per seed, one stream per case.
interface Plan {
  seed: number;
  mode: Mode;
  baseEvery: number;
  prefix: number;
  life1: number;
}
const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];

function planOf(seed: number): Plan {
  const r = new Rng(seed * 7919 + 1);
  return {
    seed,
    mode: seed % 2 === 0 ? 'copy' : 'immutable',
    baseEvery: r.pick([4, 4, 4, 1, 2, 3]),
    prefix: r.pick([0, 0, 1, 2, 3, 5]),
    life1: 5 + r.int(6),
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
  };
}

/** One life on `faulty` (over `inner`): checks its open and that the stream then holds what was acknowledged or in flight. */
async function checkedLife(
  faulty: FaultStore | SqliteStore,
  inner: SqliteStore,
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

const tally = { cases: 0, inflightLanded: 0, zombies: 0 };

async function runCase(inner: SqliteStore, p: Plan, crash: number, landed: boolean, stream: string): Promise<void> {
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
  await expectHistory(inner, stream, bySeq, latest, 'after life 3');
  if (l1.engine !== undefined && f1.crashed) {
    f1.heal();
    tally.zombies++;
    const zombie = await l1.engine.checkpoint({ zombie: true }).then(
      (info) => `resolved seq ${info.seq}`,
      (err: unknown) => err,
    );
    expectCode(zombie, ['FENCED', 'CLOSED'], 'life 1 back as a zombie');
    await expectHistory(inner, stream, bySeq, latest, 'after the zombie');
  }
}

describe('sqlite crash points: the engine crash-point sweep on a SqliteStore', () => {
  for (const seed of SEEDS) {
    it(`restores exactly the last acknowledged or in-flight state after a crash at any operation, then fences and resumes (seed ${seed})`, async () => {
      const p = planOf(seed);
      const inner = new SqliteStore({ path: path.join(await freshDir(), 'sweep.db') });
      stores.push(inner);
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
            await runCase(inner, p, crash, landed, `case/${crash}${landed ? 'l' : ''}`);
          } catch (err) {
            const why = err instanceof Mismatch ? err.message : `unexpected ${String((err as Error)?.stack ?? err)}`;
            failures.push(
              `seed ${seed} (${p.mode}, baseEvery ${p.baseEvery}, prefix ${p.prefix}) crash at ${crash}${landed ? ' after it landed' : ''}: ${why}`,
            );
          }
        }
      }
      expect(failures.slice(0, 8), `${failures.length} failing cases (first 8 shown)`).toEqual([]);
      expect(n).toBeGreaterThan(p.life1);
    }, 120_000);
  }
  afterAll(() => {
    console.log(
      `sqlite crash sweep: ${tally.cases} cases, the checkpoint in flight landed ${tally.inflightLanded}x, ${tally.zombies} zombies fenced`,
    );
    expect(tally.zombies).toBeGreaterThan(0);
  });
});
