import { afterAll, describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  migrateStreams,
  restore,
  listCheckpoints,
  type Schema,
  type Store,
} from 'statefold';
import { FaultStore } from 'statefold/testing';
import { Rng } from '../support/random-states.js';

/**
 * Crash-point sweep of `migrateStreams({ apply: true })` (statefold migrate --apply). Three streams:
 * A stored in schema version 1, B already in version 2, C whose newest state the migration
 * refuses. A clean run counts the apply's store operations; then, for every operation and both
 * crash kinds (nothing from it on reaches the store / it lands, then the process dies), the apply
 * runs on a fresh copy and crashes there. After it: every retained seq of each stream restores,
 * in version 2, to the reference upcast of what was written; each stream's newest is its old
 * newest or, for A only, one base of the upcast state after it; C is byte for byte as it was. A
 * rerun then finishes (A and B current, C failed), and a second rerun writes nothing.
 */

type V1 = { n: number; notes: string[]; poison?: true };
const schema: Schema = {
  version: 2,
  migrate: {
    1: (s: V1) => {
      if (s.poison) throw new Error('refused');
      return { data: s };
    },
  },
};
const up = (state: unknown, version: number): unknown => (version === 1 ? { data: state } : state);
const STREAMS = ['sweep/a', 'sweep/b', 'sweep/c'];

interface Written {
  store: MemoryStore;
  /** Per stream, per seq: the version written and the state. */
  seqs: Map<string, Map<number, { version: number; state: unknown }>>;
}

async function written(seed: number): Promise<Written> {
  const r = new Rng(seed);
  const store = new MemoryStore();
  const seqs = new Map<string, Map<number, { version: number; state: unknown }>>();
  for (const stream of STREAMS) {
    const inV2 = stream === 'sweep/b';
    const policy = { baseEvery: r.pick([1, 2, 3, 5]), maxDeltaRatio: Infinity };
    const engine = await SnapshotEngine.open({ store, stream, policy, ...(inV2 && { schema }) });
    const bySeq = new Map<number, { version: number; state: unknown }>();
    const count = 2 + r.int(4);
    for (let k = 1; k <= count; k++) {
      const v1: V1 = { n: k, notes: Array.from({ length: r.int(4) }, (_, i) => `note ${seed}.${k}.${i}`) };
      if (stream === 'sweep/c' && k === count) v1.poison = true;
      const state = inV2 ? { data: v1 } : v1;
      bySeq.set((await engine.checkpoint(state)).seq, { version: inV2 ? 2 : 1, state });
    }
    await engine.close();
    seqs.set(stream, bySeq);
  }
  return { store, seqs };
}

async function copy(from: Store): Promise<MemoryStore> {
  const to = new MemoryStore();
  for (const key of await from.list('')) await to.putIfAbsent(key, (await from.get(key))!);
  return to;
}

async function contents(store: Store, prefix = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of await store.list(prefix))
    if (!key.includes('/hint/')) out.set(key, Buffer.from((await store.get(key))!).toString('hex'));
  return out;
}

const tally = { cases: 0, migratedBeforeCrash: 0 };

/** Every retained seq of each stream against what was written; A's newest may be the migration's base. */
async function check(store: Store, w: Written, what: string): Promise<void> {
  for (const stream of STREAMS) {
    const want = w.seqs.get(stream)!;
    const newest = Math.max(...want.keys());
    for (const entry of await listCheckpoints(store, stream)) {
      if (entry.damaged) throw entry.error;
      if (stream === 'sweep/c' && entry.seq === newest) {
        // The state the migration refuses: MIGRATION_FAILED on every read, and stored as written.
        await expect(restore(store, stream, { seq: entry.seq, schema }), what).rejects.toMatchObject({
          code: 'MIGRATION_FAILED',
        });
        const stored = await restore(store, stream, { seq: entry.seq, schema: 'stored' });
        expect(stored.state, what).toEqual(want.get(newest)!.state);
        continue;
      }
      const r = await restore(store, stream, { seq: entry.seq, schema });
      if (entry.seq <= newest) {
        const { version, state } = want.get(entry.seq)!;
        expect(r.state, `${what}: ${stream} seq ${entry.seq}`).toEqual(up(state, version));
      } else {
        // Only A is migrated: one base, of its old newest state upcast, right after it.
        expect([stream, entry.seq, r.kind, r.schemaVersion], what).toEqual(['sweep/a', newest + 1, 'base', 2]);
        const { version, state } = want.get(newest)!;
        expect(r.state, what).toEqual(up(state, version));
        tally.migratedBeforeCrash++;
      }
    }
  }
}

afterAll(() => {
  console.log(
    `migrate sweep: ${tally.cases} crash cases; checks found the migration's base ${tally.migratedBeforeCrash} times`,
  );
});

describe('crash sweep of migrate --apply: a crash at any store operation leaves every stream restorable', () => {
  for (const seed of Array.from({ length: 12 }, (_, i) => i + 1)) {
    it(`seed ${seed}`, async () => {
      const w = await written(seed);
      const counter = new FaultStore(await copy(w.store), { log: false });
      const clean = await migrateStreams(counter, { schema, apply: true, streams: STREAMS, concurrency: 1 });
      expect(clean.failed).toEqual(['sweep/c']);
      const total = counter.count;
      const cPrefix = (await w.store.list('')).find((k) => k.includes('sweep~2fc'))!.split('/')[0]!;
      const cBefore = await contents(w.store, `${cPrefix}/`);
      for (let i = 0; i < total; i++) {
        for (const landed of [false, true]) {
          const what = `seed ${seed}, crash at operation ${i}${landed ? ' (landed)' : ''}`;
          const store = await copy(w.store);
          const faults = new FaultStore(store, { log: false }).crashAt(i, { landed });
          await migrateStreams(faults, { schema, apply: true, streams: STREAMS, concurrency: 1 }).then(
            () => undefined,
            (err: unknown) => expect(err, what).toMatchObject({ code: 'STORAGE' }),
          );
          tally.cases++;
          await check(store, w, what);
          expect(await contents(store, `${cPrefix}/`), `${what}: C unchanged`).toEqual(cBefore);
          // The rerun finishes what the crash cut short; a second writes nothing.
          const rerun = await migrateStreams(store, { schema, apply: true, streams: STREAMS });
          expect(rerun.failed, what).toEqual(['sweep/c']);
          expect(rerun.streams.find((s) => s.stream === 'sweep/b')?.status, what).toBe('current');
          await check(store, w, `${what}, rerun`);
          const after = await contents(store);
          const again = await migrateStreams(store, { schema, apply: true, streams: STREAMS });
          expect(
            again.streams.map((s) => s.status),
            what,
          ).toEqual(['current', 'current', 'failed']);
          expect(await contents(store), `${what}: a second rerun writes nothing`).toEqual(after);
        }
      }
    }, 120_000);
  }
});
