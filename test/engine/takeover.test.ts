import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { SnapshotEngine, listCheckpoints, restore, type CheckpointInfo, type Store } from 'statefold';
import { HookStore } from '../support/hook-store.js';
import { mulberry32 } from '../support/prng.mjs';
import { engineStores } from '../support/stores.js';
import { verified } from '../support/checkpoints.js';

/** Every operation waits a seeded random 0-`maxMs` ms first, as a remote store's round trips do. */
class SlowStore extends HookStore {
  readonly #random: () => number;
  ops = 0;
  constructor(
    inner: Store,
    seed: number,
    readonly maxMs: number,
  ) {
    super(inner);
    this.#random = mulberry32(seed);
  }
  protected override before(): Promise<void> {
    this.ops++;
    return sleep(Math.floor(this.#random() * (this.maxMs + 1)));
  }
}

type State = { by: string; n: number };

for (const { name, create } of engineStores) {
  describe(`takeover on the ${name} store: a new engine fences a writer committing as fast as it can`, () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      it(`opens, fences the old writer and keeps seqs contiguous (seed ${seed})`, async () => {
        const inner = await create();
        const store = new SlowStore(inner, seed, 3);
        const stream = `takeover/${seed}`;
        const old = await SnapshotEngine.open<State>({ store, stream, policy: { baseEvery: 8 } });
        const acked = new Map<number, State>();
        let stopped: unknown;
        // The old writer keeps up to 3 checkpoints in flight, back to back, until it is fenced.
        const writer = (async () => {
          const inFlight = new Set<Promise<void>>();
          for (let n = 1; stopped === undefined && n <= 5_000; n++) {
            const state = { by: 'old', n };
            const p = old.checkpoint(state).then(
              (info: CheckpointInfo) => void acked.set(info.seq, state),
              (err: unknown) => void (stopped ??= err),
            );
            inFlight.add(p);
            void p.finally(() => inFlight.delete(p));
            if (inFlight.size >= 3) await Promise.race(inFlight);
          }
          await Promise.allSettled([...inFlight]);
        })();
        for (let i = 0; i < 10_000 && acked.size < 5; i++) await sleep(1);
        expect(acked.size, `seed ${seed}: the old writer got going`).toBeGreaterThanOrEqual(5);

        const before = store.ops;
        const fresh = await SnapshotEngine.open<State>({ store, stream });
        const claimOps = store.ops - before;
        await writer;
        expect(stopped, `seed ${seed}: the old writer is fenced`).toMatchObject({ code: 'FENCED', stream });
        expect(old.fenced).toBe(true);

        const mine = await fresh.checkpoint({ by: 'new', n: 0 });
        expect(mine.seq).toBe(fresh.seq);
        const entries = verified(await listCheckpoints(inner, stream));
        expect(
          entries.map((e) => e.seq),
          `seed ${seed}: seqs are contiguous`,
        ).toEqual(entries.map((_, i) => i + 1));
        expect(entries[entries.length - 1]!.seq).toBe(mine.seq);
        expect(
          (await restore<State>(inner, stream)).state,
          `seed ${seed}: the newest state is the new engine's`,
        ).toEqual({ by: 'new', n: 0 });
        // Every seq the old writer was told committed holds its state; every other seq before the new
        // engine's is a filler equal to the seq before it.
        for (const entry of entries.slice(0, -1)) {
          const got = (await restore<State>(inner, stream, { seq: entry.seq })).state;
          if (entry.filler) {
            expect(acked.has(entry.seq), `seed ${seed}: filler seq ${entry.seq} was not acknowledged`).toBe(false);
            expect(got, `seed ${seed}: filler seq ${entry.seq}`).toEqual(
              (await restore<State>(inner, stream, { seq: entry.seq - 1 })).state,
            );
          } else {
            expect(got, `seed ${seed}: seq ${entry.seq}`).toEqual(acked.get(entry.seq));
          }
        }
        // Bounded: the claim does not race the writer slot by slot for ever.
        expect(claimOps, `seed ${seed}: store operations of the claim`).toBeLessThan(200);
        await fresh.close();
      });
    }
  });
}
