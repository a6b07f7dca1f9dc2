import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, StatefoldError, listCheckpoints, restore, type CheckpointInfo } from 'statefold';
import { FaultStore } from 'statefold/testing';
import { Rng, deepCopy, evolve, initialState, type Mode } from '../support/random-states.js';
import { firstDifference } from '../support/same.js';

/** A checkpoint's commit (not a hint, written after each base in the background). */
const COMMIT = /\/log\//;

/**
 * Failures that are not crashes: one store operation fails (before its write lands, after it
 * landed, with its read-back failing too, or by timing out and landing late) in the middle of
 * several checkpoints in flight. The failed checkpoint rejects (or resolves when the engine can
 * tell its write landed), later ones still commit with contiguous seqs, and every committed seq
 * restores to exactly the state captured by the call that got it. A seq no resolved call got may
 * only hold the state of a call that rejected (an unknown outcome), once, in call order.
 */

const STREAM = 'agent/failures';
const macrotask = (): Promise<void> => new Promise((r) => setImmediate(r));

type FaultKind =
  'fails before landing' | 'fails after landing' | 'lands but its read-back fails' | 'times out and lands late';
const KINDS: FaultKind[] = [
  'fails before landing',
  'fails after landing',
  'lands but its read-back fails',
  'times out and lands late',
];

interface Call {
  state: unknown;
  meta: unknown;
  promise: Promise<CheckpointInfo>;
}

function checkpoint(
  engine: SnapshotEngine<Record<string, unknown>>,
  calls: Call[],
  state: Record<string, unknown>,
): Promise<CheckpointInfo> {
  const meta = { call: calls.length };
  const promise = engine.checkpoint(state, { meta });
  calls.push({ state: deepCopy(state), meta, promise });
  promise.catch(() => undefined);
  return promise;
}

/** Maps every committed seq to the call whose state it holds, checking the contract; returns the newest seq. */
async function expectCommittedMatchCalls(
  store: MemoryStore,
  calls: Call[],
  victim: number,
  kind: FaultKind,
  where: string,
): Promise<number> {
  const settled = await Promise.allSettled(calls.map((c) => c.promise));
  const owner = new Map<number, number>();
  for (let i = 0; i < settled.length; i++) {
    const s = settled[i]!;
    if (s.status === 'rejected') {
      expect(i, `${where}: call ${i} rejected (${String(s.reason)})`).toBe(victim);
      expect(s.reason, where).toBeInstanceOf(StatefoldError);
      expect((s.reason as StatefoldError).code, where).toBe('STORAGE');
      continue;
    }
    const seq = s.value.seq;
    expect(owner.has(seq), `${where}: seq ${seq} resolved for calls ${owner.get(seq)} and ${i}`).toBe(false);
    owner.set(seq, i);
  }
  const victimSettled = settled[victim]!;
  if (kind === 'fails after landing')
    expect(victimSettled.status, `${where}: the engine reads a landed write back`).toBe('fulfilled');
  // A timed-out write may land before the engine reads it back: then the call resolves.
  else if (kind !== 'times out and lands late') expect(victimSettled.status, where).toBe('rejected');

  const listed = (await listCheckpoints(store, STREAM)).map((c) => c.seq);
  expect(listed, `${where}: committed seqs are 1..n`).toEqual(listed.map((_, i) => i + 1));
  let lastCall = -1;
  let unowned = 0;
  for (const seq of listed) {
    const r = await restore(store, STREAM, { seq });
    let call = owner.get(seq);
    if (call === undefined) {
      // An unknown outcome: it must be the failed call's state.
      unowned++;
      expect(victimSettled.status, `${where}: seq ${seq} is held by no resolved call`).toBe('rejected');
      call = victim;
    }
    expect(call, `${where}: seqs follow call order (seq ${seq})`).toBeGreaterThan(lastCall);
    lastCall = call;
    expect(
      firstDifference(r.state, calls[call]!.state),
      `${where}: seq ${seq} holds call ${call}'s state`,
    ).toBeUndefined();
    expect(r.meta, where).toEqual(calls[call]!.meta);
  }
  if (kind === 'fails before landing' || kind === 'fails after landing') expect(unowned, where).toBe(0);
  if (kind === 'lands but its read-back fails') expect(unowned, `${where}: the landed write is committed`).toBe(1);
  expect(unowned, where).toBeLessThanOrEqual(1);
  return listed.length;
}

async function batchCase(seed: number, kind: FaultKind): Promise<void> {
  const where = `seed ${seed}, a put that ${kind}`;
  const r = new Rng(seed);
  const mode: Mode = seed % 2 === 0 ? 'copy' : 'immutable';
  const inner = new MemoryStore();
  const faults = new FaultStore(inner, { seed });
  // Small random delays reorder nothing (the engine writes one at a time) but move every await.
  faults.inject({ times: Infinity }, { type: 'delay', ms: () => (r.chance(0.3) ? r.int(3) : 0) });
  const engine = await SnapshotEngine.open<Record<string, unknown>>({
    store: faults,
    stream: STREAM,
    policy: { baseEvery: r.pick([1, 2, 3, 4]) },
    updates: mode,
  });
  const calls: Call[] = [];
  let state = initialState(r);
  for (let i = r.int(5); i > 0; i--) {
    state = evolve(state, r, mode);
    await checkpoint(engine, calls, state);
  }
  // Half the batches start right after an awaited checkpoint, while the engine's drain is winding down.
  if (r.chance(0.5)) await macrotask();
  const size = 2 + r.int(6);
  const victim = calls.length + r.int(size);
  const nthPut = victim - calls.length;
  faults.clearFaults();
  if (kind === 'fails before landing') faults.inject({ op: 'putIfAbsent', key: COMMIT, nth: nthPut }, { type: 'fail' });
  if (kind === 'fails after landing')
    faults.inject({ op: 'putIfAbsent', key: COMMIT, nth: nthPut }, { type: 'fail', landed: true });
  if (kind === 'lands but its read-back fails') {
    faults.inject({ op: 'putIfAbsent', key: COMMIT, nth: nthPut }, { type: 'fail', landed: true });
    faults.inject({ op: 'get', nth: 0 }, { type: 'fail' });
  }
  if (kind === 'times out and lands late')
    faults.inject({ op: 'putIfAbsent', key: COMMIT, nth: nthPut }, { type: 'timeout' });
  faults.inject({ times: Infinity }, { type: 'delay', ms: () => (r.chance(0.3) ? r.int(3) : 0) });
  const releaseAfter = calls.length + r.int(size + 1);
  const first = calls.length;
  for (let i = 0; i < size; i++) {
    state = evolve(state, r, mode);
    void checkpoint(engine, calls, state);
  }
  for (let i = first; i < calls.length; i++) {
    await calls[i]!.promise.catch(() => undefined);
    if (i >= releaseAfter && faults.held > 0) await faults.release();
  }
  await faults.release();
  faults.clearFaults();

  // One more checkpoint on the same engine continues the stream right after whatever landed.
  const before = (await listCheckpoints(inner, STREAM)).length;
  state = evolve(state, r, mode);
  const after = await checkpoint(engine, calls, state);
  expect(after.seq, `${where}: the next checkpoint continues the stream`).toBe(before + 1);
  const latest = await expectCommittedMatchCalls(inner, calls, victim, kind, where);
  expect(latest, where).toBe(after.seq);
  expect(engine.seq, where).toBe(latest);
  expect(firstDifference(engine.state, (await restore(inner, STREAM)).state), `${where}: engine.state`).toBeUndefined();

  // A new engine fences this one and resumes from the same state.
  const next = await SnapshotEngine.open<Record<string, unknown>>({ store: inner, stream: STREAM, updates: mode });
  expect(next.seq, where).toBe(latest);
  expect(firstDifference(next.state, calls[calls.length - 1]!.state), `${where}: reopened state`).toBeUndefined();
  await expect(engine.checkpoint(state), where).rejects.toMatchObject({ code: 'FENCED' });
}

describe('failures: one failed store operation among checkpoints in flight', () => {
  for (const kind of KINDS) {
    it(`keeps seqs contiguous and every seq holding its call's state when a put ${kind} (60 seeds)`, async () => {
      for (let seed = 1; seed <= 60; seed++) await batchCase(seed, kind);
    });
  }
});

describe('failures: single cases', () => {
  async function openWith(
    faults: FaultStore,
    updates: Mode = 'copy',
  ): Promise<SnapshotEngine<{ n: number; log: string[] }>> {
    return SnapshotEngine.open<{ n: number; log: string[] }>({
      store: faults,
      stream: STREAM,
      policy: { baseEvery: 4 },
      updates,
    });
  }

  it('rejects STORAGE when a put fails before landing; the next checkpoint takes that seq as a base', async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const engine = await openWith(faults);
    const state = { n: 0, log: [] as string[] };
    for (let i = 0; i < 2; i++) {
      state.n++;
      await engine.checkpoint(state);
    }
    faults.inject({ op: 'putIfAbsent', key: COMMIT }, { type: 'fail' });
    state.n++;
    await expect(engine.checkpoint(state)).rejects.toMatchObject({ code: 'STORAGE' });
    expect(engine.seq).toBe(2);
    state.n++;
    const info = await engine.checkpoint(state);
    expect(info).toMatchObject({ seq: 3, kind: 'base' });
    expect((await restore(inner, STREAM)).state).toEqual({ n: 4, log: [] });
  });

  it('resolves a checkpoint whose put landed but reported failure (the engine reads it back)', async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const engine = await openWith(faults);
    faults.inject({ op: 'putIfAbsent', key: COMMIT }, { type: 'fail', landed: true });
    const info = await engine.checkpoint({ n: 1, log: ['a'] });
    expect(info.seq).toBe(1);
    expect((await restore(inner, STREAM)).state).toEqual({ n: 1, log: ['a'] });
  });

  it('keeps engine.seq, engine.state and engine.meta describing one checkpoint after an unknown outcome', async () => {
    // put #1 lands but reports failure and its read-back fails too: checkpoint 1 rejects though
    // it is committed. Checkpoint 2 finds it, moves to the next seq, and that put fails.
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const engine = await openWith(faults);
    await engine.checkpoint({ n: 0, log: [] }, { meta: 'zero' });
    // Counted over commits only: the hint written after the base above runs in the background.
    faults.inject({ op: 'putIfAbsent', key: COMMIT, nth: 0 }, { type: 'fail', landed: true }); // put seq 2: lands, reports failure
    faults.inject({ op: 'get', key: COMMIT, nth: 0 }, { type: 'fail' }); // its read-back
    faults.inject({ op: 'putIfAbsent', key: COMMIT, nth: 2 }, { type: 'fail' }); // checkpoint 2: put seq 2 (exists), get seq 2, put seq 3 fails
    const one = engine.checkpoint({ n: 1, log: ['one'] }, { meta: 'one' });
    const two = engine.checkpoint({ n: 2, log: ['two'] }, { meta: 'two' });
    await expect(one).rejects.toMatchObject({ code: 'STORAGE' });
    await expect(two).rejects.toMatchObject({ code: 'STORAGE' });
    const latest = await restore(inner, STREAM);
    expect(latest).toMatchObject({ seq: 2, state: { n: 1, log: ['one'] }, meta: 'one' });
    expect(engine.seq).toBe(2);
    // engine.state must be the state of engine.seq, as it is after every other outcome.
    expect(engine.state).toEqual(latest.state);
    expect(engine.meta).toEqual('one');
  });

  it('recovers a write that timed out and landed late: the next checkpoint takes the seq after it', async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const engine = await openWith(faults);
    await engine.checkpoint({ n: 1, log: [] });
    faults.inject({ op: 'putIfAbsent', key: COMMIT }, { type: 'timeout' });
    await expect(engine.checkpoint({ n: 2, log: ['late'] })).rejects.toMatchObject({ code: 'STORAGE' });
    await faults.release();
    expect((await restore(inner, STREAM)).state).toEqual({ n: 2, log: ['late'] });
    const info = await engine.checkpoint({ n: 3, log: ['late', 'next'] });
    expect(info).toMatchObject({ seq: 3, kind: 'base' });
    expect((await restore(inner, STREAM, { seq: 2 })).state).toEqual({ n: 2, log: ['late'] });
    expect((await restore(inner, STREAM)).state).toEqual({ n: 3, log: ['late', 'next'] });
  });

  it('leaves the stream unchanged when open fails on a transient error, and a retry opens it', async () => {
    const inner = new MemoryStore();
    const first = await openWith(new FaultStore(inner));
    await first.checkpoint({ n: 1, log: ['x'] });
    for (const op of ['list', 'get', 'putIfAbsent'] as const) {
      const faults = new FaultStore(inner).inject({ op }, { type: 'fail' });
      await expect(openWith(faults), op).rejects.toMatchObject({ code: 'STORAGE' });
      expect((await restore(inner, STREAM)).seq, op).toBe(1);
      const engine = await openWith(faults);
      expect(engine.seq, op).toBe(1);
      expect(engine.state, op).toEqual({ n: 1, log: ['x'] });
    }
    const last = await openWith(new FaultStore(inner));
    expect((await last.checkpoint({ n: 2, log: ['x', 'y'] })).seq).toBe(2);
  });
});

describe('failures: in-flight checkpoints with updates: immutable', () => {
  it('encodes a Date changed in place as it was at capture, for checkpoints queued right after an awaited one', async () => {
    // Dates and typed arrays cannot be frozen, so immutable mode keeps versions of them for the
    // checkpoints not yet encoded. Checkpoints 2 and 3 are captured while the engine's drain loop
    // is winding down after resolving 1, and checkpoint 2 ends up encoded with the Date's later value.
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open<{ when: Date; n: number }>({
      store,
      stream: STREAM,
      policy: { baseEvery: 1 },
      updates: 'immutable',
    });
    const when = new Date(1000);
    let state = { when, n: 0 };
    await engine.checkpoint(state);
    state = { ...state, n: 1 };
    const two = engine.checkpoint(state); // captures when = 1000
    when.setTime(2000);
    state = { ...state, n: 2 };
    const three = engine.checkpoint(state); // captures when = 2000
    when.setTime(3000);
    await Promise.all([two, three]);
    const got = [];
    for (const seq of [1, 2, 3]) got.push((await restore<{ when: Date }>(store, STREAM, { seq })).state.when.getTime());
    expect(got).toEqual([1000, 1000, 2000]);
  });

  it('encodes typed arrays changed in place as they were at capture, whatever the timing (40 seeds)', async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const r = new Rng(seed);
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open<{ bytes: Uint8Array; when: Date; n: number }>({
        store,
        stream: STREAM,
        policy: { baseEvery: 1 + r.int(3) },
        updates: 'immutable',
      });
      const bytes = new Uint8Array(4);
      const when = new Date(0);
      let state = { bytes, when, n: 0 };
      const captured: unknown[] = [];
      const pending: Promise<CheckpointInfo>[] = [];
      for (let i = 1; i <= 12; i++) {
        bytes[r.int(4)] = r.int(256);
        if (r.chance(0.5)) when.setTime(r.int(1e6));
        state = { ...state, n: i };
        pending.push(engine.checkpoint(state));
        captured.push(deepCopy(state));
        // Sometimes wait for everything so far, sometimes for the newest only, sometimes not at all.
        const w = r.int(3);
        if (w === 0) await Promise.all(pending);
        else if (w === 1) await pending[pending.length - 1];
      }
      const infos = await Promise.all(pending);
      for (let i = 0; i < infos.length; i++) {
        const got = (await restore(store, STREAM, { seq: infos[i]!.seq })).state;
        expect(firstDifference(got, captured[i]), `seed ${seed}: seq ${infos[i]!.seq}`).toBeUndefined();
      }
    }
  });
});
