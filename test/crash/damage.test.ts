import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, StatefoldError, listCheckpoints, restore } from 'statefold';
import { FaultStore, type Fault } from 'statefold/testing';
import { Rng, deepCopy, evolve, initialState } from '../support/random-states.js';
import { firstDifference } from '../support/same.js';

/**
 * Damage detection through the read path: every object restore or open reads may come back
 * with a flipped byte or cut short (a bad disk, a broken proxy, a truncated download). Each
 * such read must end in CORRUPT naming the stream, seq and key, never in a wrong state; and the
 * stream must be intact and usable once reads are good again.
 */

const STREAM = 'agent/damage';
type Damage = Extract<Fault, { type: 'corrupt' | 'truncate' }>;
const DAMAGES: Damage[] = [
  { type: 'corrupt' },
  { type: 'corrupt' },
  { type: 'corrupt', offset: 0 },
  { type: 'corrupt', offset: -1, mask: 0x80 },
  { type: 'corrupt', offset: 12, mask: 0xff },
  { type: 'truncate' },
  { type: 'truncate', keep: -1 },
  { type: 'truncate', keep: 0 },
];

/** A stream of `n` checkpoints of random states; returns the store and the captured states by seq. */
async function stream(seed: number, n: number, baseEvery: number): Promise<{ store: MemoryStore; states: unknown[] }> {
  const r = new Rng(seed);
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open<Record<string, unknown>>({ store, stream: STREAM, policy: { baseEvery } });
  // A large unchanging field keeps deltas small, so that only baseEvery decides where bases go.
  let state: Record<string, unknown> = {
    ...initialState(r),
    noise: Array.from({ length: 300 }, (_, j) => `w${(j * 7919) % 1000}`).join(' '),
  };
  const states: unknown[] = [undefined];
  for (let i = 1; i <= n; i++) {
    state = evolve(state, r, 'copy');
    await engine.checkpoint(state, { meta: { i } });
    states.push(deepCopy(state));
  }
  await engine.close();
  return { store, states };
}

function expectCorrupt(err: unknown, where: string): void {
  expect(err, where).toBeInstanceOf(StatefoldError);
  const e = err as StatefoldError;
  expect(e.code, `${where}: ${e.message}`).toBe('CORRUPT');
  expect(e.stream, where).toBe(STREAM);
  expect(e.seq, where).toBeTypeOf('number');
  expect(e.key, where).toMatch(/\/log\/[0-9a-f]{16}/);
}

describe('damage: reads that come back damaged', () => {
  it('rejects CORRUPT for every damaged read of every restore, never returning another state', async () => {
    let cases = 0;
    for (const seed of [1, 2, 3]) {
      const { store, states } = await stream(seed, 11, 4);
      for (let seq = 1; seq <= 11; seq++) {
        const counter = new FaultStore(store);
        expect(firstDifference((await restore(counter, STREAM, { seq })).state, states[seq])).toBeUndefined();
        const gets = counter.log.filter((o) => o.op === 'get').length;
        for (let g = 0; g < gets; g++) {
          for (const [d, damage] of DAMAGES.entries()) {
            const where = `seed ${seed} seq ${seq}: get #${g} damaged by ${JSON.stringify(damage)}`;
            const faults = new FaultStore(store, { seed: seed * 100 + g * 10 + d }).inject(
              { op: 'get', nth: g },
              damage,
            );
            cases++;
            const got = await restore(faults, STREAM, { seq }).then(
              (r) => r,
              (err: unknown) => err,
            );
            if (got instanceof Error) expectCorrupt(got, where);
            else
              expect.fail(
                `${where}: restore resolved seq ${(got as { seq: number }).seq} instead of rejecting CORRUPT`,
              );
          }
        }
      }
    }
    expect(cases).toBeGreaterThan(500);
  });

  it('rejects CORRUPT for a damaged read while opening, leaves the stream intact, and opens once reads are good', async () => {
    const { store, states } = await stream(9, 10, 4);
    const counter = new FaultStore(store);
    const probe = await SnapshotEngine.open({ store: counter, stream: STREAM });
    expect(probe.seq).toBe(10);
    const gets = counter.log.filter((o) => o.op === 'get').length;
    expect(gets).toBeGreaterThan(1);
    let latest = 10;
    let corrupt = 0;
    let unused = 0;
    for (let g = 0; g < gets; g++) {
      for (const damage of DAMAGES) {
        const where = `get #${g} of open damaged by ${JSON.stringify(damage)}`;
        const faults = new FaultStore(store, { seed: g }).inject({ op: 'get', nth: g }, damage);
        const opened = await SnapshotEngine.open<Record<string, unknown>>({ store: faults, stream: STREAM }).then(
          (engine) => engine,
          (e: unknown) => e,
        );
        // A damaged read that open used is CORRUPT; one it read ahead and did not use (the newest
        // chain is read in one round) changes nothing: open then holds the newest state, exactly.
        if (opened instanceof SnapshotEngine) {
          unused++;
          expect(opened.seq, where).toBe(latest);
          expect(firstDifference(opened.state, states[latest]), where).toBeUndefined();
        } else {
          corrupt++;
          expectCorrupt(opened, where);
        }
        expect((await listCheckpoints(store, STREAM)).length, where).toBe(latest);
      }
    }
    expect(corrupt, 'damaged reads that open used').toBeGreaterThan(0);
    expect(corrupt + unused).toBe(gets * DAMAGES.length);
    // Reads are good again: the stream opens on its newest checkpoint and goes on.
    const engine = await SnapshotEngine.open<Record<string, unknown>>({ store, stream: STREAM });
    expect(engine.seq).toBe(latest);
    expect(firstDifference(engine.state, states[latest])).toBeUndefined();
    const next = { ...engine.state, more: true };
    expect((await engine.checkpoint(next)).seq).toBe(++latest);
    for (let seq = 1; seq < latest; seq++)
      expect(firstDifference((await restore(store, STREAM, { seq })).state, states[seq]), `seq ${seq}`).toBeUndefined();
  });

  it('treats a damaged read-back of a landed write as an unknown outcome: the next checkpoint finds it and goes on', async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const engine = await SnapshotEngine.open<{ n: number }>({ store: faults, stream: STREAM });
    await engine.checkpoint({ n: 1 });
    faults.inject({ op: 'putIfAbsent' }, { type: 'fail', landed: true });
    faults.inject({ op: 'get' }, { type: 'corrupt' });
    await expect(engine.checkpoint({ n: 2 })).rejects.toMatchObject({ code: 'STORAGE' });
    expect((await engine.checkpoint({ n: 3 })).seq).toBe(3);
    expect((await restore(inner, STREAM, { seq: 2 })).state).toEqual({ n: 2 });
    expect((await restore(inner, STREAM)).state).toEqual({ n: 3 });
  });

  it('never lets a fenced engine commit when it reads the fence back damaged', async () => {
    const inner = new MemoryStore();
    const faults = new FaultStore(inner);
    const a = await SnapshotEngine.open<{ n: number }>({ store: faults, stream: STREAM });
    await a.checkpoint({ n: 1 });
    const b = await SnapshotEngine.open<{ n: number }>({ store: inner, stream: STREAM });
    faults.inject({ op: 'get' }, { type: 'truncate' });
    const first = await a.checkpoint({ n: 2 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(first).toBeInstanceOf(StatefoldError);
    expect(['CORRUPT', 'FENCED']).toContain((first as StatefoldError).code);
    await expect(a.checkpoint({ n: 3 })).rejects.toMatchObject({ code: 'FENCED' });
    expect((await b.checkpoint({ n: 20 })).seq).toBe(2);
    expect((await listCheckpoints(inner, STREAM)).map((c) => c.seq)).toEqual([1, 2]);
    expect((await restore(inner, STREAM)).state).toEqual({ n: 20 });
  });
});
