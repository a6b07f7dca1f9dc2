import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from 'statefold/postgres';
import { SqliteStore } from 'statefold/sqlite';
import {
  MemoryStore,
  SnapshotEngine,
  deleteStream,
  forkStream,
  isStatefoldError,
  listCheckpoints,
  restore,
  type Store,
} from 'statefold';
import { HookStore, type StoreOp } from '../support/hook-store.js';
import { dropTables, freshTable, pgTestUrl } from '../support/pg-env.js';
import { mulberry32 } from '../support/prng.mjs';
import { firstDifference } from '../support/same.js';

/**
 * Seeded interleavings of everything that races on one stream: a writer whose retention deletes
 * behind it (keepLast 2-5, minAgeMs 0), engines opening on it at random moments (each fencing the
 * last), a reader restoring and listing, and in some seeds a fork of it and a deleteStream. Every
 * store call of every actor yields a seeded number of event-loop turns first, so each seed is one
 * interleaving, replayed by its seed (Math.random is seeded too, for the waits of claims), and in
 * some seeds an actor other than the first writer crashes at a chosen store call, before or after
 * it lands. After all have settled, a last engine opens and
 * commits. Checked: no seq acknowledged by two engines of one stream's life (a fork), no
 * acknowledged checkpoint lost, every restore (the reader's and the final ones) the state that was
 * acknowledged for that seq, or for a filler the one before it, and no error but FENCED and
 * NOT_FOUND anywhere.
 */

const SEEDS = Number(process.env.RACE_SEEDS ?? 1000);
/** Seeds run on each store with group commit (SQLite, PostgreSQL). */
const STORE_SEEDS = Number(process.env.RACE_STORE_SEEDS ?? 60);
const STREAM = 'agent/races';

type State = { by: string; n: number; pad: string };

interface Ack {
  seq: number;
  state: State;
  /** When it was acknowledged, on the run's clock (a counter of events). */
  at: number;
  /** The life of the stream it belongs to: the engine that started it (a new stream, or one started anew after a delete). */
  life: string;
}

interface Run {
  acks: Ack[];
  /** Every state an engine tried to checkpoint, with its life: one in flight when its engine crashed may have landed. */
  attempts: Omit<Ack, 'seq' | 'at'>[];
  reads: { seq: number; state: unknown }[];
  errors: string[];
  /**
   * The clock when the delete started and (once it has) when it resolved, in seeds that delete,
   * and whether it took effect: a fence of its landed (it may have crashed before).
   */
  deleted?: { from: number; to?: number; landed?: boolean };
  forks: { to: string; fromSeq: number; state: unknown }[];
}

async function race(seed: number, inner: Store = new MemoryStore()): Promise<{ run: Run; failures: string[] }> {
  const random = mulberry32(seed);
  const int = (lo: number, hi: number): number => lo + Math.floor(random() * (hi - lo + 1));
  let clock = 0;
  const tick = (): number => ++clock;
  /** Actors that crashed: from a chosen call on, every call of theirs fails, as if the process died there. */
  const crashed = new Set<string>();
  /**
   * Each actor's view of the store: every call first yields 0-3 turns of the event loop, and one
   * in 40 stalls for 30-300 (a process descheduled mid-open while the writer commits on and its
   * retention deletes behind it). An actor that `mayCrash` dies, in 3 of 10 seeds, at a chosen
   * call: before it reaches the store, or once it has landed.
   */
  const actorStore = (name = '?', mayCrash = false): Store => {
    const crashAt = mayCrash && random() < 0.3 ? int(0, 40) : Infinity;
    const landed = random() < 0.5;
    let calls = 0;
    const die = (): never => {
      crashed.add(name);
      throw new Error(`${name} crashed`);
    };
    return new (class extends HookStore {
      protected override async before(op: StoreOp, key: string): Promise<void> {
        if (process.env.RACE_TRACE === '2') console.log(`[${clock}] ${name} ${op} ${key.slice(key.indexOf('/') + 1)}`);
        for (let i = random() < 0.025 ? int(30, 300) : int(0, 3); i > 0; i--) await new Promise((r) => setImmediate(r));
        if (crashed.has(name) || (calls === crashAt && !landed)) die();
        calls++;
      }
      protected override after(op: StoreOp, key: string, result: unknown): void {
        // The delete takes effect with its first fence.
        const d = run.deleted;
        if (name === 'delete' && d && op === 'putIfAbsent' && key.includes('/log/') && result === true) d.landed = true;
        if (calls - 1 === crashAt) die();
      }
    })(inner);
  };
  const turns = (n: number): Promise<void> =>
    (async () => {
      for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
    })();
  const run: Run = { acks: [], attempts: [], reads: [], errors: [], forks: [] };
  /**
   * The life of the stream an engine opened on: the life of the checkpoint whose state it opened
   * with, or, opened on nothing, a new life (the first, or after a delete; anything else is a bug).
   */
  const lives = new Map<string, number>([['first', 0]]);
  const suspects = new Set<string>();
  const lifeOf = (name: string, state: State | undefined): string => {
    if (state === undefined) {
      if (run.acks.length === 0 && run.deleted === undefined) return 'first';
      // Opened on nothing after checkpoints were acknowledged: its claim may have come first
      // (then it is fenced before it commits anything), or a delete ran; else it must not commit.
      if (run.acks.length > 0) suspects.add(name);
      lives.set(name, tick());
      return name;
    }
    const from = [...run.acks, ...run.attempts.filter((a) => crashed.has(a.state.by))].find(
      (a) => firstDifference(a.state, state) === undefined,
    );
    if (from === undefined)
      run.errors.push(`${name} opened on a state never acknowledged: ${JSON.stringify(state).slice(0, 60)}`);
    return from?.life ?? name;
  };
  const pad = 'x'.repeat(int(0, 400));
  const trace = (line: string): void => {
    if (process.env.RACE_TRACE) console.log(`[${clock}] ${line}`);
  };
  const fail = (who: string, err: unknown): void => {
    trace(`${who} failed: ${(err as Error).message}`);
    if (isStatefoldError(err, 'FENCED') || isStatefoldError(err, 'NOT_FOUND')) return;
    if (crashed.has(who.split(' ')[0]!)) return; // its own crash, whatever it surfaced as
    // A reader outpaced by retention with minAgeMs 0 (the grace that prevents it turned off).
    if (who === 'reader' && (err as Error).message?.includes('trimmed faster than it can be read')) return;
    run.errors.push(`${who}: ${(err as { code?: string }).code ?? ''} ${(err as Error).message ?? String(err)}`);
  };

  /** An engine that opens after `delay` turns and commits `count` checkpoints, up to `inFlight` at once. */
  const writer = async (name: string, delay: number, count: number, retention: boolean): Promise<void> => {
    await turns(delay);
    let engine: SnapshotEngine<State>;
    try {
      engine = await SnapshotEngine.open<State>({
        store: actorStore(name, name !== 'A'),
        stream: STREAM,
        policy: { baseEvery: int(2, 5) },
        ...(retention && { retention: { keepLast: int(2, 5), minAgeMs: 0 } }),
      });
    } catch (err) {
      fail(`${name} open`, err);
      return;
    }
    const life = lifeOf(name, engine.state);
    trace(
      `${name} opened at seq ${engine.seq} on ${JSON.stringify(engine.state ?? null).slice(0, 30)} (life ${life}, epoch ${engine.epoch})`,
    );
    const inFlight = int(1, 3);
    const pending = new Set<Promise<void>>();
    let stopped = false;
    for (let n = 1; n <= count && !stopped; n++) {
      const state: State = { by: name, n, pad };
      run.attempts.push({ state, life });
      const p = engine.checkpoint(state).then(
        (info) => {
          trace(`${name} acked seq ${info.seq} (${info.kind}) n=${n}`);
          run.acks.push({ seq: info.seq, state, at: tick(), life });
        },
        (err: unknown) => {
          stopped = true;
          fail(`${name} checkpoint ${n}`, err);
        },
      );
      pending.add(p);
      void p.finally(() => pending.delete(p));
      if (pending.size >= inFlight) await Promise.race(pending);
      await turns(int(0, 2));
    }
    await Promise.all(pending);
    await engine.close().catch((err: unknown) => fail(`${name} close`, err));
  };

  const reader = async (): Promise<void> => {
    const store = actorStore();
    for (let i = 0; i < 6; i++) {
      await turns(int(0, 20));
      try {
        const newest = await restore<State>(store, STREAM);
        run.reads.push({ seq: newest.seq, state: newest.state });
        const listed = await listCheckpoints(store, STREAM);
        const pick = listed[int(0, Math.max(0, listed.length - 1))];
        if (pick !== undefined && !pick.damaged) {
          const r = await restore<State>(store, STREAM, { seq: pick.seq });
          run.reads.push({ seq: r.seq, state: r.state });
        }
      } catch (err) {
        fail('reader', err);
      }
    }
  };

  const actors: Promise<void>[] = [
    writer('A', 0, int(10, 30), true),
    writer('B', int(5, 60), int(0, 8), random() < 0.5),
    writer('C', int(5, 120), int(0, 8), random() < 0.5),
    reader(),
  ];
  if (random() < 0.35) {
    const to = `fork-${seed}`;
    actors.push(
      (async () => {
        await turns(int(5, 80));
        try {
          const info = await forkStream(actorStore('fork', true), STREAM, to);
          run.forks.push({ to, fromSeq: info.from.seq, state: (await restore(inner, to)).state });
        } catch (err) {
          fail('fork', err);
        }
      })(),
    );
  }
  if (random() < 0.3) {
    actors.push(
      (async () => {
        await turns(int(10, 100));
        const deleted: { from: number; to?: number } = { from: tick() };
        run.deleted = deleted;
        try {
          await deleteStream(actorStore('delete', true), STREAM);
          deleted.to = tick();
        } catch (err) {
          fail('delete', err);
        }
      })(),
      // An engine that opens while the delete may be running.
      writer('E', int(20, 140), int(1, 6), false),
    );
  }
  await Promise.all(actors);

  // A last engine opens on what is there and commits.
  const failures: string[] = [];
  const before = await listCheckpoints(inner, STREAM);
  const last = await SnapshotEngine.open<State>({ store: inner, stream: STREAM });
  const life = lifeOf('F', last.state);
  const lastInfo = await last.checkpoint({ by: 'F', n: 1, pad });
  await last.close();
  run.acks.push({ seq: lastInfo.seq, state: { by: 'F', n: 1, pad }, at: tick(), life });
  failures.push(...run.errors);

  // An acknowledgement of a life older than a delete that took effect, made once the delete had
  // begun (its engine opened before the delete, its write held in the store): it lands in deleted
  // history, below the delete's floor, where no reader sees it. A straggler, not a fork.
  const d = run.deleted?.landed ? run.deleted : undefined;
  const straggler = (a: Ack): boolean => d !== undefined && a.at > d.from && lives.get(a.life)! < d.from;
  // Opened on nothing after checkpoints were acknowledged, with no delete to explain it: its claim
  // came first and it must be fenced before it commits anything.
  for (const name of suspects)
    if (d === undefined && run.acks.some((a) => a.life === name))
      failures.push(`${name} opened on an empty stream after checkpoints were acknowledged, and committed`);
  // A fork: two acknowledgements of one seq in one life of the stream.
  const bySeq = new Map<number, Ack[]>();
  for (const ack of run.acks) bySeq.set(ack.seq, [...(bySeq.get(ack.seq) ?? []), ack]);
  for (const [seq, all] of bySeq) {
    const acks = all.filter((a) => !straggler(a));
    if (new Set(acks.map((a) => a.life)).size < acks.length)
      failures.push(
        `fork at seq ${seq}: acknowledged by ${acks.map((a) => `${a.state.by} (life ${a.life})`).join(', ')}`,
      );
  }
  /** The acknowledgement of a seq in the life the last engine opened on. */
  const ackOf = (seq: number): Ack | undefined => bySeq.get(seq)?.find((a) => a.life === life && !straggler(a));
  const after = await listCheckpoints(inner, STREAM);
  if (process.env.RACE_TRACE)
    console.log(
      `final: ${after.map((e) => `${e.seq}${!e.damaged && e.filler ? 'f' : ''}:${e.damaged ? '!' : JSON.stringify(bySeq.get(e.seq)?.map((a) => a.state.by + a.state.n + '/' + a.life))}`).join(' ')} last=${lastInfo.seq} life=${life}`,
    );
  const seqs = after.map((e) => e.seq);
  if (seqs.some((s, i) => s !== seqs[0]! + i)) failures.push(`seqs not contiguous: ${seqs.join(',')}`);
  // (Past the newest listed seq, unless a claim that crashed left slots to fill.)
  if (last.seq !== lastInfo.seq || lastInfo.seq <= (before[before.length - 1]?.seq ?? 0))
    failures.push(`the last engine committed seq ${lastInfo.seq} after a stream listed up to ${before.at(-1)?.seq}`);
  let expected: unknown;
  for (const entry of after) {
    if (entry.damaged) {
      failures.push(`seq ${entry.seq} is damaged: ${entry.error.message}`);
      continue;
    }
    const ack = ackOf(entry.seq);
    // Not acknowledged: a filler (the state before it), or a checkpoint in flight when its engine crashed.
    const inFlight = async (): Promise<State | undefined> => {
      const state = (await restore<State>(inner, STREAM, { seq: entry.seq }).catch(() => undefined))?.state;
      return run.attempts.find(
        (a) => a.life === life && crashed.has(a.state.by) && firstDifference(a.state, state) === undefined,
      )?.state;
    };
    if (ack !== undefined) expected = ack.state;
    else if (!entry.filler && (await inFlight()) !== undefined) expected = await inFlight();
    else if (!entry.filler || expected === undefined) {
      failures.push(`seq ${entry.seq} was never acknowledged and is not a filler after an acknowledged seq`);
      continue;
    }
    const got = await restore(inner, STREAM, { seq: entry.seq }).then(
      (r) => r.state,
      (err: Error) => err,
    );
    const diff = firstDifference(got, expected);
    if (diff !== undefined) failures.push(`seq ${entry.seq} restores another state: ${diff}`);
  }
  // Lost: an acknowledged checkpoint of the stream's last life above its oldest retained seq that
  // the stream does not hold (below it, retention removed it; other lives, a delete).
  const oldest = seqs[0] ?? Infinity;
  for (const ack of run.acks) {
    if (ack.life === life && !straggler(ack) && ack.seq >= oldest && !seqs.includes(ack.seq))
      failures.push(`lost: seq ${ack.seq} acknowledged by ${ack.state.by} is not in the stream`);
  }
  /** A state a crashed engine was checkpointing: its commit may have landed unacknowledged. */
  const landedOf = (state: unknown): boolean =>
    run.attempts.some((a) => crashed.has(a.state.by) && firstDifference(state, a.state) === undefined);
  // Every restore the reader made: a state acknowledged for that seq, or a filler's, or one in
  // flight when its engine crashed.
  for (const read of run.reads) {
    const acks = bySeq.get(read.seq) ?? [];
    const ok =
      acks.some((a) => firstDifference(read.state, a.state) === undefined) ||
      run.acks.some((a) => a.seq < read.seq && firstDifference(read.state, a.state) === undefined) ||
      landedOf(read.state);
    if (!ok) failures.push(`the reader restored seq ${read.seq} to a state never acknowledged there or before`);
  }
  for (const fork of run.forks) {
    const acks = bySeq.get(fork.fromSeq) ?? [];
    const ok =
      acks.some((a) => firstDifference(fork.state, a.state) === undefined) ||
      run.acks.some((a) => a.seq < fork.fromSeq && firstDifference(fork.state, a.state) === undefined) ||
      landedOf(fork.state);
    if (!ok) failures.push(`the fork of seq ${fork.fromSeq} holds a state never acknowledged there`);
  }
  return { run, failures };
}

/** Runs the seeds `from`..`to` of `race`, each on a store `make` gives; resolves the failures and totals. */
async function races(
  from: number,
  to: number,
  make: (seed: number) => Store | Promise<Store>,
): Promise<{ failed: string[]; acks: number; deletes: number; forks: number; fenced: number }> {
  const failed: string[] = [];
  let [acks, deletes, forks, fenced] = [0, 0, 0, 0];
  for (let seed = from; seed <= to; seed++) {
    // The engine's own random waits (a claim that starts over) from the seed too, so that a
    // seed replays its interleaving.
    const random = Math.random;
    Math.random = mulberry32(seed * 31 + Number(process.env.RACE_RAND ?? 7));
    const store = await make(seed);
    const { run, failures } = await race(seed, store)
      .catch((err: Error) => ({
        run: { acks: [], attempts: [], reads: [], errors: [], forks: [] } as Run,
        failures: [`the last engine or the checks failed: ${err.message}`],
      }))
      .finally(() => (Math.random = random));
    // (A store with connections or a file closes once its seed is checked.)
    await (store as { close?: () => Promise<void> }).close?.();
    acks += run.acks.length;
    if (run.deleted) deletes++;
    forks += run.forks.length;
    fenced += new Set(run.acks.map((a) => a.state.by)).size;
    if (failures.length > 0) failed.push(`seed ${seed}: ${failures.slice(0, from === to ? 50 : 3).join(' | ')}`);
  }
  return { failed, acks, deletes, forks, fenced };
}

describe('races: retention, claims, a fork and a delete, seeded interleavings', () => {
  const url = pgTestUrl();
  it(`${SEEDS} seeded interleavings: no fork, no lost acknowledged checkpoint, no wrong state`, async () => {
    const only = process.env.RACE_SEED === undefined ? undefined : Number(process.env.RACE_SEED);
    const r = await races(only ?? 1, only ?? SEEDS, () => new MemoryStore());
    console.log(
      `races: ${SEEDS} interleavings, ${r.acks} acknowledged checkpoints, ${r.deletes} with a delete, ${r.forks} forks, ${r.fenced} engines that committed`,
    );
    expect(r.failed.slice(0, 5), `${r.failed.length} of ${SEEDS} seeds failed`).toEqual([]);
  }, 600_000);

  // The same interleavings on the stores with group commit, whose writes of one turn share a
  // transaction (a store per seed: one database file, one table).
  const dirs: string[] = [];
  const tables: string[] = [];
  afterAll(async () => {
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
    if (url !== undefined) await dropTables(url, tables);
  });
  it(`${STORE_SEEDS} of them on SqliteStore`, async () => {
    const r = await races(1, STORE_SEEDS, async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'statefold-races-'));
      dirs.push(dir);
      return new SqliteStore({ path: path.join(dir, 'races.db') });
    });
    console.log(`races on sqlite: ${STORE_SEEDS} interleavings, ${r.acks} acknowledged, ${r.forks} forks`);
    expect(r.failed.slice(0, 5), `${r.failed.length} of ${STORE_SEEDS} seeds failed`).toEqual([]);
  }, 600_000);
  (url === undefined ? it.skip : it)(
    `${STORE_SEEDS} of them on PostgresStore`,
    async () => {
      const r = await races(1, STORE_SEEDS, () => {
        const store = new PostgresStore({ connectionString: url!, table: freshTable('races') });
        tables.push(store.table);
        return store;
      });
      console.log(`races on postgres: ${STORE_SEEDS} interleavings, ${r.acks} acknowledged, ${r.forks} forks`);
      expect(r.failed.slice(0, 5), `${r.failed.length} of ${STORE_SEEDS} seeds failed`).toEqual([]);
    },
    600_000,
  );
});
