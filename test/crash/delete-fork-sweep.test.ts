import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  deleteStream,
  forkStream,
  listCheckpoints,
  listStreams,
  restore,
  type Store,
} from 'statefold';
import { FaultStore } from 'statefold/testing';
import { firstDifference } from '../support/same.js';

/**
 * Crash-point sweeps of deleteStream and forkStream: for every store operation of one run and both
 * crash kinds (nothing from that operation on reaches the store / it lands and then the process
 * dies), on a copy of a stream whose writer (retention keepLast 2, minAgeMs 0) is still open. After
 * the crash the stream must read as it was or as deleted (never CORRUPT, never a mix), the writer
 * must be fenced or go on consistently, a second delete (or fork) must finish the job, and a new
 * engine on the id must open, commit and restore.
 */

const STREAM = 'agent/sweep';
type State = { n: number; pad: string };
const pad = 'p'.repeat(300);

async function copyOf(store: MemoryStore): Promise<MemoryStore> {
  const copy = new MemoryStore();
  for (const key of await store.list('')) await copy.putIfAbsent(key, (await store.get(key))!);
  return copy;
}

/** A stream of 9 checkpoints whose retention has run, and its states by seq. */
async function written(): Promise<{ store: MemoryStore; states: Map<number, State> }> {
  const store = new MemoryStore();
  const states = new Map<number, State>();
  const engine = await SnapshotEngine.open<State>({
    store,
    stream: STREAM,
    policy: { baseEvery: 3 },
    retention: { keepLast: 2, minAgeMs: 0 },
  });
  for (let n = 1; n <= 9; n++) states.set((await engine.checkpoint({ n, pad })).seq, { n, pad });
  await engine.close();
  return { store, states };
}

/** Every listed seq restores to its state; resolves the newest seq listed (0 when none). */
async function consistent(store: Store, states: Map<number, State>, where: string): Promise<number> {
  const listed = await listCheckpoints(store, STREAM);
  for (const entry of listed) {
    expect(entry.damaged, `${where}: seq ${entry.seq} damaged`).toBe(false);
    const got = (await restore<State>(store, STREAM, { seq: entry.seq })).state;
    const want = states.get(entry.seq);
    expect(firstDifference(got, want), `${where}: seq ${entry.seq}`).toBeUndefined();
  }
  return listed.at(-1)?.seq ?? 0;
}

describe('crash-point sweep: deleteStream', () => {
  it('a delete cut short at any store operation leaves the stream whole or deleted, and a new delete or engine finishes it', async () => {
    const { store: original, states } = await written();
    const counter = new FaultStore(await copyOf(original));
    await deleteStream(counter, STREAM);
    expect(counter.count).toBeGreaterThan(10);
    const failures: string[] = [];
    for (let crash = 0; crash < counter.count; crash++) {
      for (const landed of [false, true]) {
        const where = `crash at delete operation ${crash}${landed ? ' after it landed' : ''}`;
        try {
          const store = await copyOf(original);
          // The writer that had the stream open (its last checkpoint was 9).
          const writer = await SnapshotEngine.open<State>({ store, stream: STREAM, policy: { baseEvery: 3 } });
          await deleteStream(new FaultStore(store).crashAt(crash, { landed }), STREAM).catch(() => undefined);
          // Readers: the stream as it was (every listed seq restores) or nothing.
          const newest = await consistent(store, states, where);
          const r = await restore<State>(store, STREAM).then(
            (x) => x.seq,
            (e: { code?: string }) => e.code,
          );
          if (newest > 0) expect(r, where).toBe(newest);
          else expect(r, where).toBe('NOT_FOUND');
          // The writer commits on the stream as it was, or is fenced.
          const next = await writer.checkpoint({ n: 10, pad }).then(
            (i) => i.seq,
            (e: { code?: string }) => e.code ?? 'error',
          );
          if (typeof next === 'number') {
            states.set(next, { n: 10, pad });
            expect(next, `${where}: the writer went on`).toBe(newest + 1);
            await consistent(store, states, `${where}, then the writer`);
            states.delete(next);
          } else expect(next, where).toBe('FENCED');
          // A second delete finishes the job; the id then starts anew.
          await deleteStream(store, STREAM);
          expect(await listStreams(store), where).toEqual([]);
          await expect(writer.checkpoint({ n: 11, pad }), where).rejects.toMatchObject({ code: 'FENCED' });
          const fresh = await SnapshotEngine.open<State>({ store, stream: STREAM });
          expect(fresh.state, where).toBeUndefined();
          const first = await fresh.checkpoint({ n: 100, pad });
          await fresh.close();
          expect((await restore(store, STREAM)).state, where).toEqual({ n: 100, pad });
          expect(
            (await listCheckpoints(store, STREAM)).map((c) => c.seq),
            where,
          ).toEqual([first.seq]);
        } catch (err) {
          failures.push(`${where}: ${(err as Error).message}`);
        }
      }
    }
    expect(failures.slice(0, 5), `${failures.length} crash points failed`).toEqual([]);
  }, 120_000);
});

describe('crash-point sweep: forkStream', () => {
  it('a fork cut short at any store operation leaves the target absent or the whole fork, and a retry settles it', async () => {
    const { store: original, states } = await written();
    const counter = new FaultStore(await copyOf(original));
    await forkStream(counter, STREAM, 'fork');
    const failures: string[] = [];
    for (let crash = 0; crash < counter.count; crash++) {
      for (const landed of [false, true]) {
        const where = `crash at fork operation ${crash}${landed ? ' after it landed' : ''}`;
        try {
          const store = await copyOf(original);
          await forkStream(new FaultStore(store).crashAt(crash, { landed }), STREAM, 'fork').catch(() => undefined);
          const forked = await listCheckpoints(store, 'fork');
          if (forked.length === 0) {
            // Nothing of it: a retry makes the fork.
            expect((await forkStream(store, STREAM, 'fork')).seq, where).toBe(1);
          } else {
            expect(
              forked.map((c) => c.seq),
              where,
            ).toEqual([1]);
            await expect(forkStream(store, STREAM, 'fork'), where).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
          }
          expect((await restore(store, 'fork')).state, where).toEqual(states.get(9));
          await consistent(store, states, `${where}: the original`);
        } catch (err) {
          failures.push(`${where}: ${(err as Error).message}`);
        }
      }
    }
    expect(failures.slice(0, 5), `${failures.length} crash points failed`).toEqual([]);
  }, 120_000);
});
