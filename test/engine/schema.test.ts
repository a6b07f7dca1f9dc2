import fc from 'fast-check';
import { Rng, deepCopy, evolve, initialState } from '../support/random-states.js';
import { flipByte } from '../support/damage.js';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  diffCheckpoints,
  gc,
  forkStream,
  listCheckpoints,
  restore,
  restoreRange,
  verifyStream,
  type Schema,
  type Store,
} from 'statefold';

// Schema evolution (issue 34): a stream written in schema versions 1, 2 and 3 restores at every
// retained seq as version 3, upcast through the migrations from the version each checkpoint was
// stored in; a newer stream fails closed; a migration that throws changes nothing stored.

const STREAM = 'agent/schema';
type V1 = { n: number; notes: string[] };
type V2 = { data: V1; plan: string };
type V3 = { data: V1; steps: string[] };

/** Version 1 -> 2: everything moves under `data`, a plan starts empty. */
const m1 = (s: V1): V2 => ({ data: s, plan: '' });
/** Version 2 -> 3: the plan (a string) becomes a list of steps. */
const m2 = (s: V2): V3 => ({ data: s.data, steps: s.plan === '' ? [] : s.plan.split(';') });
const V2_SCHEMA: Schema = { version: 2, migrate: { 1: m1 } };
const V3_SCHEMA: Schema = { version: 3, migrate: { 1: m1, 2: m2 } };

/** The reference upcast of a state stored in `from` to version 3. */
function toV3(state: unknown, from: number): V3 {
  if (from === 1) return m2(m1(state as V1));
  if (from === 2) return m2(state as V2);
  return state as V3;
}

const v1 = (k: number): V1 => ({ n: k, notes: Array.from({ length: k % 5 }, (_, i) => `note ${k}.${i}`) });
const v2 = (k: number): V2 => ({ data: v1(k), plan: k % 3 === 0 ? '' : `read;edit ${k};test` });
const v3 = (k: number): V3 => ({ data: v1(k), steps: [`step ${k}`, 'ship'] });

/**
 * Every key and byte of `store` but hints, to tell that nothing changed (a live writer's
 * background work replaces its hints meanwhile).
 */
async function snapshot(store: Store): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of await store.list(''))
    if (!key.includes('/hint/')) out.set(key, Buffer.from((await store.get(key))!).toString('hex'));
  return out;
}

/** Writes lives of checkpoints in versions 1, 2 and 3; returns each seq's stored version and state. */
async function threeLives(
  store: Store,
  o: { baseEvery: number; spanEvery?: number; counts: [number, number, number] },
): Promise<Map<number, { version: number; state: unknown }>> {
  const policy = {
    baseEvery: o.baseEvery,
    maxDeltaRatio: Infinity,
    ...(o.spanEvery !== undefined && { spanEvery: o.spanEvery }),
  };
  const written = new Map<number, { version: number; state: unknown }>();
  const lives: [Schema | undefined, (k: number) => unknown][] = [
    [undefined, v1],
    [V2_SCHEMA, v2],
    [V3_SCHEMA, v3],
  ];
  for (const [i, [schema, make]] of lives.entries()) {
    const engine = await SnapshotEngine.open({ store, stream: STREAM, policy, ...(schema && { schema }) });
    for (let k = 1; k <= o.counts[i]!; k++) {
      const state = make(100 * i + k);
      const info = await engine.checkpoint(state);
      written.set(info.seq, { version: i + 1, state });
    }
    await engine.close();
  }
  return written;
}

describe('schema evolution', () => {
  it('restores every seq of a stream written in versions 1, 2 and 3 as version 3', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          baseEvery: fc.integer({ min: 1, max: 8 }),
          spanEvery: fc.constantFrom(undefined, undefined, 3),
          counts: fc.tuple(
            fc.integer({ min: 1, max: 12 }),
            fc.integer({ min: 0, max: 12 }),
            fc.integer({ min: 1, max: 12 }),
          ),
        }),
        async (o) => {
          const store = new MemoryStore();
          const written = await threeLives(store, o);
          for (const [seq, { version, state }] of written) {
            const r = await restore<V3>(store, STREAM, { seq, schema: V3_SCHEMA });
            expect(r.state, `seq ${seq}`).toEqual(toV3(state, version));
            expect(r.schemaVersion).toBe(version);
          }
          // Each chain read once across the upcast bases: the same states, in version 3.
          const seqs = [...written.keys()];
          for (let from = 1; from <= seqs.length; from += 64) {
            const to = Math.min(seqs.length, from + 63);
            const range = await restoreRange<V3>(store, STREAM, { from, to, schema: V3_SCHEMA });
            for (const r of range)
              expect(r.state).toEqual(toV3(written.get(r.seq)!.state, written.get(r.seq)!.version));
          }
          // Integrity is checked as stored, whatever the versions.
          expect((await verifyStream(store, STREAM)).damaged).toEqual([]);
        },
      ),
      { numRuns: 40, seed: 34_01 },
    );
  });

  it('records the version in format 5 frames only, and starts each version with a base', async () => {
    const store = new MemoryStore();
    const written = await threeLives(store, { baseEvery: 32, counts: [4, 3, 3] });
    const entries = await listCheckpoints(store, STREAM);
    for (const e of entries) {
      if (e.damaged) throw e.error;
      // (The last key of its slot: after a fence of the engine that committed it.)
      const slot = (await store.list('')).filter((k) => k.includes(`/log/${e.seq.toString(16).padStart(16, '0')}`));
      const bytes = (await store.get(slot[slot.length - 1]!))!;
      expect(bytes[4], `seq ${e.seq}`).toBe(written.get(e.seq)!.version === 1 ? 1 : 5);
    }
    // The first checkpoint of each newer version is a base; the rest of its life deltas.
    expect(entries.map((e) => (e.damaged ? 'x' : e.kind))).toEqual([
      'base',
      'delta',
      'delta',
      'delta',
      'base',
      'delta',
      'delta',
      'base',
      'delta',
      'delta',
    ]);
    // An engine of version 3 opens the stream upcast, and reads its own version as it is.
    const engine = await SnapshotEngine.open<V3>({ store, stream: STREAM, schema: V3_SCHEMA });
    expect(engine.state).toEqual(v3(203));
    await engine.close();
  });

  it('fails closed on a stream newer than the code, unless its writer declared it readable', async () => {
    const store = new MemoryStore();
    await threeLives(store, { baseEvery: 4, counts: [2, 2, 2] });
    const before = await snapshot(store);
    for (const schema of [undefined, V2_SCHEMA]) {
      const expected = { code: 'SCHEMA_TOO_NEW', stream: STREAM, seq: 6 };
      await expect(restore(store, STREAM, schema && { schema })).rejects.toMatchObject(expected);
      await expect(SnapshotEngine.open({ store, stream: STREAM, ...(schema && { schema }) })).rejects.toMatchObject(
        expected,
      );
      await expect(restore(store, STREAM, schema && { schema })).rejects.toThrow(
        /schema version 3.*reads up to version [12]/,
      );
    }
    // (An open that failed closed wrote nothing: no fence, no fencing of a writer.)
    expect(await snapshot(store)).toEqual(before);
    // Older seqs of the stream still read in older code, and 'stored' reads any as it is.
    expect((await restore<V2>(store, STREAM, { seq: 4, schema: V2_SCHEMA })).state).toEqual(v2(102));
    expect((await restore(store, STREAM, { schema: 'stored' })).state).toEqual(v3(202));

    // A version 3 writer that declares its states readable by version 2 code.
    const compatible = { ...V3_SCHEMA, readableFrom: 2 };
    const w3 = await SnapshotEngine.open({ store, stream: STREAM, schema: compatible });
    await w3.checkpoint(v3(300));
    await w3.close();
    const asStored = await restore(store, STREAM, { schema: V2_SCHEMA });
    expect(asStored.state).toEqual(v3(300));
    expect(asStored.schemaVersion).toBe(3);
    await expect(restore(store, STREAM)).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
    // Version 2 code opens it as stored and writes on in version 2, from a base.
    const w2 = await SnapshotEngine.open<unknown>({ store, stream: STREAM, schema: V2_SCHEMA });
    expect(w2.state).toEqual(v3(300));
    const info = await w2.checkpoint(v2(400));
    expect(info.kind).toBe('base');
    await w2.close();
    expect((await restore(store, STREAM, { schema: V3_SCHEMA })).state).toEqual(m2(v2(400)));
  });

  it('a migration that throws rejects MIGRATION_FAILED naming stream, seq and version, and changes nothing', async () => {
    const store = new MemoryStore();
    const writer = await SnapshotEngine.open({ store, stream: STREAM, schema: V2_SCHEMA });
    await writer.checkpoint(v2(1));
    await writer.checkpoint(v2(2));
    const before = await snapshot(store);
    if (process.env.SCHEMA_DEBUG) console.log([...before.keys()]);
    const boom: Schema = {
      version: 3,
      migrate: {
        1: m1,
        2: () => {
          throw new TypeError('no plan');
        },
      },
    };
    for (const attempt of [
      () => SnapshotEngine.open({ store, stream: STREAM, schema: boom }),
      () => restore(store, STREAM, { schema: boom }),
      () => restoreRange(store, STREAM, { from: 1, to: 2, schema: boom }),
    ]) {
      const err = await attempt().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: 'MIGRATION_FAILED', stream: STREAM });
      expect(String((err as Error).message)).toMatch(/from schema version 2 to 3 threw: TypeError: no plan/);
    }
    const empty: Schema = { version: 3, migrate: { 1: m1, 2: () => undefined } };
    await expect(restore(store, STREAM, { schema: empty })).rejects.toMatchObject({ code: 'MIGRATION_FAILED', seq: 2 });
    // Nothing stored changed, and the live writer was not fenced.
    if (process.env.SCHEMA_DEBUG) console.log([...(await snapshot(store)).keys()]);
    expect(await snapshot(store)).toEqual(before);
    expect((await writer.checkpoint(v2(3))).seq).toBe(3);
    await writer.close();
  });

  it('rejects a bad schema where it is given, before the store is touched', async () => {
    const store = new MemoryStore();
    const bad: unknown[] = [
      { version: 0 },
      { version: 1.5 },
      { version: 3, migrate: { 2: m2 } }, // no migration from 1 to 2, but one from 2: a gap below is fine...
      { version: 3, migrate: { 1: m1 } }, // ...a missing last step is not
      { version: 3, migrate: { 1: m1, 2: 'm2' } },
      { version: 3, migrate: { 0: m1, 1: m1, 2: m2 } },
      { version: 2, readableFrom: 3 },
      'stored',
    ];
    for (const schema of bad.slice(0, 2).concat(bad.slice(3))) {
      await expect(SnapshotEngine.open({ store, stream: STREAM, schema: schema as Schema })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    }
    // Code that reads from version 2 on: a stream stored in version 1 is beyond it.
    const w1 = await SnapshotEngine.open({ store, stream: STREAM });
    await w1.checkpoint(v1(1));
    await w1.close();
    await expect(restore(store, STREAM, { schema: bad[2] as Schema })).rejects.toMatchObject({
      code: 'MIGRATION_FAILED',
      message: expect.stringMatching(/no migration from version 1 to 2/),
    });
  });

  it('sealed frames record the version in their authenticated header', async () => {
    const store = new MemoryStore();
    const encryption = { keys: { k: new Uint8Array(32).fill(7) }, current: 'k' };
    const w = await SnapshotEngine.open({ store, stream: STREAM, encryption });
    await w.checkpoint(v1(1));
    await w.close();
    const w3 = await SnapshotEngine.open<V3>({ store, stream: STREAM, encryption, schema: V3_SCHEMA });
    expect(w3.state).toEqual(toV3(v1(1), 1));
    await w3.checkpoint(v3(2));
    await w3.close();
    expect((await restore(store, STREAM, { encryption, schema: V3_SCHEMA, seq: 1 })).state).toEqual(toV3(v1(1), 1));
    await expect(restore(store, STREAM, { encryption })).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
  });

  it('tools read what is stored: verify, diff and fork need no schema, and a fork keeps the version', async () => {
    const store = new MemoryStore();
    await threeLives(store, { baseEvery: 4, counts: [3, 3, 3] });
    expect((await verifyStream(store, STREAM)).damaged).toEqual([]);
    // Seq 3 (version 1) against seq 9 (version 3): the states as stored.
    const ops = await diffCheckpoints(store, STREAM, 3, 9);
    expect(ops.length).toBeGreaterThan(0);
    await forkStream(store, STREAM, 'agent/fork', { seq: 9 });
    const forked = await restore<V3>(store, 'agent/fork', { schema: V3_SCHEMA });
    expect([forked.schemaVersion, forked.state]).toEqual([3, v3(203)]);
    await expect(restore(store, 'agent/fork')).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
    await forkStream(store, STREAM, 'agent/fork-old', { seq: 2 });
    expect((await restore<V3>(store, 'agent/fork-old', { schema: V3_SCHEMA })).state).toEqual(toV3(v1(2), 1));
  });

  it('verify, list, diff and fork take the schema too', async () => {
    const store = new MemoryStore();
    await threeLives(store, { baseEvery: 4, counts: [3, 3, 3] });
    // verify: every intact seq upcast; the seqs a broken migration cannot read, reported by seq.
    const broken: Schema = { version: 3, migrate: { 1: m1, 2: (s: V2) => (s.data.n === 102 ? undefined : m2(s)) } };
    const report = await verifyStream(store, STREAM, { schema: broken });
    expect(report.damaged).toEqual([]);
    expect(report.unreadable?.map((u) => [u.seq, u.error.code])).toEqual([[5, 'MIGRATION_FAILED']]);
    expect((await verifyStream(store, STREAM, { schema: V3_SCHEMA })).unreadable).toEqual([]);
    expect((await verifyStream(store, STREAM, { schema: V2_SCHEMA })).unreadable?.map((u) => u.seq)).toEqual([7, 8, 9]);
    // list: entries say the version they were stored in; the schema is checked, never applied to metas.
    const listed = await listCheckpoints(store, STREAM, { schema: V3_SCHEMA });
    expect(listed.map((e) => (e.damaged ? 0 : e.schemaVersion))).toEqual([1, 1, 1, 2, 2, 2, 3, 3, 3]);
    await expect(listCheckpoints(store, STREAM, { schema: { version: -1 } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    // diff with the schema compares upcast states; fork with it writes the upcast state in version 3.
    const ops = await diffCheckpoints(store, STREAM, 2, 3, { schema: V3_SCHEMA });
    expect(ops.length).toBeGreaterThan(0);
    expect(ops.every((op) => op.path.startsWith('/data/'))).toBe(true); // (as stored, the paths are /n, /notes)
    expect((await diffCheckpoints(store, STREAM, 2, 3)).every((op) => !op.path.startsWith('/data/'))).toBe(true);
    await forkStream(store, STREAM, 'agent/upcast', { seq: 2, schema: V3_SCHEMA });
    const forked = await restore<V3>(store, 'agent/upcast', { schema: V3_SCHEMA });
    expect([forked.schemaVersion, forked.state]).toEqual([3, toV3(v1(2), 1)]);
  });

  it('seeded random states across three versions and retention: every retained seq restores as version 3', async () => {
    // Generic reshapes of any state: 1 -> 2 wraps it under `v1`, 2 -> 3 adds a count of its keys.
    const r1 = (s: Record<string, unknown>) => ({ v1: s });
    const r2 = (s: { v1: Record<string, unknown> }) => ({ ...s, keys: Object.keys(s.v1).length });
    const schemas: (Schema | undefined)[] = [
      undefined,
      { version: 2, migrate: { 1: r1 } },
      { version: 3, migrate: { 1: r1, 2: r2 } },
    ];
    const upcast = (state: any, from: number): unknown => (from === 1 ? r2(r1(state)) : from === 2 ? r2(state) : state);
    for (let seed = 1; seed <= 12; seed++) {
      const r = new Rng(seed * 104_729);
      const store = new MemoryStore();
      const policy = { baseEvery: 1 + r.int(6), ...(r.chance(0.3) && { spanEvery: 2 + r.int(3) }) };
      const written = new Map<number, { version: number; state: unknown }>();
      let state = initialState(r);
      for (const [i, schema] of schemas.entries()) {
        const engine = await SnapshotEngine.open<Record<string, unknown>>({
          store,
          stream: STREAM,
          policy,
          ...(schema && { schema }),
        });
        for (let k = 0; k < 2 + r.int(10); k++) {
          state = evolve(state, r, 'copy');
          // Each version writes its own shape of the evolving state.
          const shaped = i === 0 ? state : i === 1 ? r1(state) : r2(r1(state));
          written.set((await engine.checkpoint(deepCopy(shaped))).seq, { version: i + 1, state: deepCopy(shaped) });
        }
        await engine.close();
      }
      const keepLast = r.chance(0.5) ? 1 + r.int(12) : undefined;
      if (keepLast !== undefined) await gc(store, STREAM, { keepLast, minAgeMs: 0 });
      const retained = await listCheckpoints(store, STREAM);
      if (keepLast !== undefined) expect(retained.length).toBeGreaterThanOrEqual(Math.min(keepLast, written.size));
      for (const e of retained) {
        const r3 = await restore(store, STREAM, { seq: e.seq, schema: schemas[2]! });
        const { version, state: stored } = written.get(e.seq)!;
        expect(r3.state, `seed ${seed} seq ${e.seq}`).toEqual(upcast(stored, version));
      }
    }
  });

  it('an upgrade meets damage as an open without one does: repair, or CORRUPT with its hint', async () => {
    const store = new MemoryStore();
    const w = await SnapshotEngine.open({ store, stream: STREAM, policy: { baseEvery: 3, maxDeltaRatio: Infinity } });
    for (let k = 1; k <= 5; k++) await w.checkpoint(v1(k));
    await w.close();
    // Seq 4, the newest chain's base, is damaged.
    const key = (await store.list('')).filter((k) => k.includes('/log/0000000000000004')).at(-1)!;
    await flipByte(store, key);
    await expect(SnapshotEngine.open({ store, stream: STREAM, schema: V3_SCHEMA })).rejects.toMatchObject({
      code: 'CORRUPT',
      message: expect.stringMatching(/repair/),
    });
    const repaired = await SnapshotEngine.open<V3>({ store, stream: STREAM, schema: V3_SCHEMA, repair: true });
    expect(repaired.state).toEqual(toV3(v1(3), 1));
    await repaired.close();
    // verify with the schema reports the damage and reads the rest, rather than rejecting.
    const report = await verifyStream(store, STREAM, { schema: V3_SCHEMA });
    expect(report.damaged.map((d) => d.seq)).toEqual([4, 5]);
    expect(report.unreadable).toEqual([]);
  });

  it('a migration that returns what cannot be checkpointed fails the open, before the claim', async () => {
    const store = new MemoryStore();
    const w = await SnapshotEngine.open({ store, stream: STREAM });
    await w.checkpoint(v1(1));
    await w.close();
    const before = await snapshot(store);
    const bad: Schema = { version: 2, migrate: { 1: (s: V1) => ({ ...s, run: () => 'a function' }) } };
    await expect(SnapshotEngine.open({ store, stream: STREAM, schema: bad })).rejects.toMatchObject({
      code: 'MIGRATION_FAILED',
      seq: 1,
      message: expect.stringMatching(/cannot be checkpointed/),
    });
    expect(await snapshot(store)).toEqual(before);
  });
});
