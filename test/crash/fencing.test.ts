import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  FileStore,
  MemoryStore,
  SnapshotEngine,
  StatefoldError,
  listCheckpoints,
  restore,
  type CheckpointInfo,
  type Store,
} from 'statefold';
import { FaultStore } from 'statefold/testing';
import { Rng, deepCopy } from '../support/random-states.js';
import { firstDifference } from '../support/same.js';
import { verified } from '../support/checkpoints.js';

/**
 * Fencing: opening a stream claims it, and from then on the engine that had it can commit
 * nothing. Two engines in one process, engines fenced with checkpoints in flight or with writes
 * held in the store, and many engines opening and checkpointing at once: never two checkpoints
 * with one seq, never a lost checkpoint, and restore always works.
 */

const STREAM = 'agent/fencing';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
const engineStores: { name: string; create(): Promise<Store> }[] = [
  { name: 'memory', create: async () => new MemoryStore() },
  {
    name: 'file',
    create: async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'statefold-fencing-'));
      dirs.push(dir);
      return new FileStore({ dir });
    },
  },
];

/** Waits (a bounded number of event-loop turns) until `cond` holds. */
async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  expect(cond(), `waited for ${what}`).toBe(true);
}
type State = { by: string; n: number; trail: string[] };
const next = (s: State | undefined, by: string): State => ({
  by,
  n: (s?.n ?? 0) + 1,
  trail: [...(s?.trail ?? []), by].slice(-12),
});

/** One resolved checkpoint: who committed which seq with which state. */
interface Commit {
  engine: string;
  seq: number;
  state: State;
}

/** Checks the committed history: seqs 1..n, each claimed by at most one resolved call, each restoring to what that call captured. */
async function expectOneHistory(store: Store, commits: Commit[], where: string): Promise<number> {
  const bySeq = new Map<number, Commit>();
  for (const c of commits) {
    const other = bySeq.get(c.seq);
    expect(other, `${where}: seq ${c.seq} resolved for ${other?.engine} and ${c.engine} (a fork)`).toBeUndefined();
    bySeq.set(c.seq, c);
  }
  const entries = verified(await listCheckpoints(store, STREAM));
  const listed = entries.map((c) => c.seq);
  expect(listed, `${where}: committed seqs are 1..n`).toEqual(listed.map((_, i) => i + 1));
  // A filler closes a seq that a fenced engine never committed: no caller made it, and it equals the seq before.
  const fillers = new Set(entries.filter((c) => c.filler).map((c) => c.seq));
  expect(
    [...bySeq.keys()].sort((a, b) => a - b),
    `${where}: every committed seq but the fillers was acknowledged to exactly one caller`,
  ).toEqual(listed.filter((seq) => !fillers.has(seq)));
  for (const seq of listed) {
    const r = await restore<State>(store, STREAM, { seq });
    if (fillers.has(seq)) {
      expect(seq, `${where}: a filler has a seq before it`).toBeGreaterThan(1);
      expect(
        firstDifference(r.state, (await restore<State>(store, STREAM, { seq: seq - 1 })).state),
        `${where}: filler seq ${seq} equals seq ${seq - 1}`,
      ).toBeUndefined();
      continue;
    }
    expect(firstDifference(r.state, bySeq.get(seq)!.state), `${where}: seq ${seq}`).toBeUndefined();
    // No lost update: every checkpoint extends the one before it.
    if (seq > 1)
      expect(r.state.n, `${where}: seq ${seq} builds on seq ${seq - 1}`).toBe(
        (await restore<State>(store, STREAM, { seq: seq - 1 })).state.n + 1,
      );
  }
  return listed.length;
}

for (const { name, create } of engineStores) {
  const seeds = name === 'memory' ? { inFlight: 25, racing: 12 } : { inFlight: 12, racing: 8 };
  describe(`fencing on the ${name} store: two engines on one stream in one process`, () => {
    it('fences A when B opens: A commits nothing more, B continues from what A committed, seqs stay contiguous', async () => {
      const store = await create();
      const a = await SnapshotEngine.open<State>({ store, stream: STREAM, policy: { baseEvery: 3 } });
      const commits: Commit[] = [];
      let s: State | undefined;
      for (let i = 0; i < 4; i++) {
        s = next(s, 'A');
        commits.push({ engine: 'A', seq: (await a.checkpoint(s)).seq, state: deepCopy(s) });
      }
      const b = await SnapshotEngine.open<State>({ store, stream: STREAM, policy: { baseEvery: 3 } });
      expect(b.seq).toBe(4);
      expect(b.state).toEqual(s);
      expect(b.epoch).toBeGreaterThan(a.epoch);
      await expect(a.checkpoint(next(s, 'A'))).rejects.toMatchObject({ code: 'FENCED', stream: STREAM });
      expect(a.fenced).toBe(true);
      await expect(a.checkpoint(next(s, 'A'))).rejects.toMatchObject({ code: 'FENCED' });
      expect((await listCheckpoints(store, STREAM)).length).toBe(4);
      let t = b.state;
      for (let i = 0; i < 3; i++) {
        t = next(t, 'B');
        const info = await b.checkpoint(t);
        expect(info.seq).toBe(5 + i);
        commits.push({ engine: 'B', seq: info.seq, state: deepCopy(t) });
      }
      await expect(a.checkpoint(next(s, 'A'))).rejects.toMatchObject({ code: 'FENCED' });
      expect(await expectOneHistory(store, commits, 'A then B')).toBe(7);
      await b.close();
    });

    it('fences A with checkpoints in flight: those committed before B opened are in B, the rest reject FENCED', async () => {
      const outcomes = { committed: 0, fenced: 0 };
      for (let seed = 1; seed <= seeds.inFlight; seed++) {
        const r = new Rng(seed);
        const inner = await create();
        // Random small delays on A's writes; B opens on the store itself, without them, so that its
        // open can overtake A's queue (on the delayed store too, it came last every time).
        const store = new FaultStore(inner, { seed }).inject(
          { times: Infinity },
          { type: 'delay', ms: () => r.int(3) },
        );
        const a = await SnapshotEngine.open<State>({ store, stream: STREAM, policy: { baseEvery: 1 + r.int(4) } });
        const calls: { state: State; promise: Promise<CheckpointInfo> }[] = [];
        let s: State | undefined;
        for (let i = 0; i < 2 + r.int(8); i++) {
          s = next(s, 'A');
          const promise = a.checkpoint(s);
          promise.catch(() => undefined);
          calls.push({ state: deepCopy(s), promise });
        }
        await sleep(r.int(6));
        const b = await SnapshotEngine.open<State>({ store: inner, stream: STREAM });
        const settled = await Promise.allSettled(calls.map((c) => c.promise));
        const commits: Commit[] = [];
        let fencedFrom = settled.length;
        settled.forEach((x, i) => {
          if (x.status === 'fulfilled') {
            outcomes.committed++;
            expect(i, `seed ${seed}: a checkpoint after a FENCED one resolved`).toBeLessThan(fencedFrom);
            commits.push({ engine: 'A', seq: x.value.seq, state: calls[i]!.state });
          } else {
            outcomes.fenced++;
            expect(x.reason, `seed ${seed}`).toMatchObject({ code: 'FENCED' });
            fencedFrom = Math.min(fencedFrom, i);
          }
        });
        // B opened on the last checkpoint A committed, followed by the fillers B wrote to close the
        // seqs A never reached (when B's claim jumped ahead of A's back-to-back commits).
        const fillers = verified(await listCheckpoints(inner, STREAM))
          .filter((c) => c.filler)
          .map((c) => c.seq);
        expect(
          fillers.every((seq) => seq > commits.length && seq <= b.seq),
          `seed ${seed}: fillers only after A's last commit`,
        ).toBe(true);
        expect(b.seq, `seed ${seed}: B opened on the last checkpoint A committed`).toBe(
          commits.length + fillers.length,
        );
        expect(b.state, `seed ${seed}`).toEqual(commits.length ? commits[commits.length - 1]!.state : undefined);
        let t = b.state;
        for (let i = 0; i < 2; i++) {
          t = next(t, 'B');
          const info = await b.checkpoint(t);
          expect(info.seq, `seed ${seed}`).toBe(commits.length + fillers.length + 1);
          commits.push({ engine: 'B', seq: info.seq, state: deepCopy(t) });
        }
        await expectOneHistory(inner, commits, `seed ${seed}`);
      }
      // B's open did land among A's writes: some of A's checkpoints committed, some were fenced.
      expect(outcomes.committed, "A's checkpoints committed").toBeGreaterThan(0);
      expect(outcomes.fenced, "A's checkpoints fenced").toBeGreaterThan(0);
    });

    it('never forks when several engines open and checkpoint at once, and restore always works', async () => {
      let fenced = 0;
      for (let seed = 1; seed <= seeds.racing; seed++) {
        const r = new Rng(seed * 13);
        const inner = await create();
        const store = new FaultStore(inner, { seed, log: false }).inject(
          { times: Infinity },
          { type: 'delay', ms: () => (r.chance(0.5) ? r.int(3) : 0) },
        );
        const commits: Commit[] = [];
        const errors: string[] = [];
        const agent = async (id: string): Promise<void> => {
          await sleep(r.int(8));
          let engine: SnapshotEngine<State>;
          try {
            engine = await SnapshotEngine.open<State>({ store, stream: STREAM, policy: { baseEvery: 1 + r.int(4) } });
          } catch (err) {
            errors.push(`${id} open: ${String(err)}`);
            return;
          }
          let s = engine.state;
          let expected = engine.seq;
          for (let i = 0; i < 6; i++) {
            s = next(s, id);
            try {
              const info = await engine.checkpoint(s);
              // An engine's own checkpoints are contiguous from where it opened: nobody slipped in between.
              if (info.seq !== ++expected) errors.push(`${id}: seq ${info.seq}, expected ${expected}`);
              commits.push({ engine: id, seq: info.seq, state: deepCopy(s) });
            } catch (err) {
              if (!(err instanceof StatefoldError && err.code === 'FENCED'))
                errors.push(`${id} checkpoint: ${String(err)}`);
              fenced++;
              return;
            }
            if (r.chance(0.3)) await sleep(r.int(3));
          }
        };
        await Promise.all(Array.from({ length: 2 + r.int(5) }, (_, i) => agent(`E${i}`)));
        expect(errors, `seed ${seed}`).toEqual([]);
        const latest = await expectOneHistory(inner, commits, `seed ${seed}`);
        const last = await SnapshotEngine.open<State>({ store: inner, stream: STREAM });
        expect(last.seq, `seed ${seed}`).toBe(latest);
        expect((await last.checkpoint(next(last.state, 'last'))).seq, `seed ${seed}`).toBe(latest + 1);
      }
      // The engines did overlap: some were fenced mid-run.
      expect(fenced).toBeGreaterThan(0);
    });
  });
}

describe('fencing: writes held in the store', () => {
  it("fences A whose write is still in flight when B opens: A's write lands nowhere and A rejects FENCED", async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const a = await SnapshotEngine.open<State>({ store: faults, stream: STREAM });
    const s1 = next(undefined, 'A');
    await a.checkpoint(s1);
    faults.inject({ op: 'putIfAbsent' }, { type: 'hold' });
    const held = a.checkpoint(next(s1, 'A'));
    held.catch(() => undefined);
    await until(() => faults.held === 1, 'the write to be held');
    const b = await SnapshotEngine.open<State>({ store: inner, stream: STREAM });
    expect(b.seq).toBe(1);
    await faults.release();
    await expect(held).rejects.toMatchObject({ code: 'FENCED' });
    const s2 = next(s1, 'B');
    expect((await b.checkpoint(s2)).seq).toBe(2);
    expect((await restore(inner, STREAM)).state).toEqual(s2);
  });

  it("keeps A's write that landed before B opened, even when A hears back only afterwards", async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const a = await SnapshotEngine.open<State>({ store: faults, stream: STREAM });
    faults.inject({ op: 'putIfAbsent' }, { type: 'hold', landed: true });
    const s1 = next(undefined, 'A');
    const held = a.checkpoint(s1);
    await until(() => faults.held === 1, 'the write to land and be held');
    const b = await SnapshotEngine.open<State>({ store: inner, stream: STREAM });
    expect(b.seq).toBe(1);
    expect(b.state).toEqual(s1);
    await faults.release();
    expect((await held).seq).toBe(1);
    await expect(a.checkpoint(next(s1, 'A'))).rejects.toMatchObject({ code: 'FENCED' });
    expect((await b.checkpoint(next(s1, 'B'))).seq).toBe(2);
  });

  it("recovers a stream whose open failed while its fence landed late: A is fenced, a new open resumes A's state", async () => {
    const inner = new MemoryStore();
    const a = await SnapshotEngine.open<State>({ store: inner, stream: STREAM });
    const s1 = next(undefined, 'A');
    await a.checkpoint(s1);
    const faults = new FaultStore(inner).inject({ op: 'putIfAbsent' }, { type: 'timeout' });
    await expect(SnapshotEngine.open({ store: faults, stream: STREAM })).rejects.toMatchObject({ code: 'STORAGE' });
    await faults.release();
    // The failed open's fence holds the next slot: A can no longer commit (safe), nothing is lost.
    await expect(a.checkpoint(next(s1, 'A'))).rejects.toMatchObject({ code: 'FENCED' });
    const c = await SnapshotEngine.open<State>({ store: inner, stream: STREAM });
    expect(c.seq).toBe(1);
    expect(c.state).toEqual(s1);
    expect((await c.checkpoint(next(s1, 'C'))).seq).toBe(2);
    expect((await listCheckpoints(inner, STREAM)).map((x) => x.seq)).toEqual([1, 2]);
  });

  it('lets a fenced engine be closed', async () => {
    // close() is where callers release an engine (often in a finally block); on a fenced engine it
    // rejects FENCED and the engine never becomes closed. engine.ts close() even skips the flush
    // when fenced, which it never reaches because #assertOpen throws first.
    const store = new MemoryStore();
    const a = await SnapshotEngine.open<State>({ store, stream: STREAM });
    await a.checkpoint(next(undefined, 'A'));
    await SnapshotEngine.open<State>({ store, stream: STREAM });
    await expect(a.checkpoint(next(undefined, 'A'))).rejects.toMatchObject({ code: 'FENCED' });
    await expect(a.close()).resolves.toBeUndefined();
  });
});
