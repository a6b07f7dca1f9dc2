import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  isStatefoldError,
  restore,
  restoreRange,
  type ListOptions,
  type ScannedObject,
  type Store,
} from 'statefold';
import { HookStore } from '../support/hook-store.js';

/** Counts calls by operation; forwards `scan` when `scans` (else the store has none, as HookStore). */
class Counted extends HookStore {
  readonly calls = new Map<string, number>();
  constructor(
    inner: MemoryStore,
    scans: boolean,
    readonly scanAnswer?: () => unknown,
  ) {
    super(inner, (op) => void this.calls.set(op, (this.calls.get(op) ?? 0) + 1));
    if (scans)
      (this as Store).scan = async (prefix: string, options?: ListOptions): Promise<ScannedObject[]> => {
        this.calls.set('scan', (this.calls.get('scan') ?? 0) + 1);
        return (this.scanAnswer?.() as ScannedObject[]) ?? inner.scan(prefix, options);
      };
  }
  get total(): number {
    return [...this.calls.values()].reduce((a, b) => a + b, 0);
  }
}

async function stream(): Promise<MemoryStore> {
  const store = new MemoryStore();
  let engine = await SnapshotEngine.open({ store, stream: 'r', policy: { baseEvery: 10, maxDeltaRatio: Infinity } });
  for (let i = 1; i <= 57; i++) {
    await engine.checkpoint({ n: i, items: Array.from({ length: i % 13 }, (_, k) => `item ${k} at ${i}`) });
    if (i % 17 === 0) {
      await engine.close();
      engine = await SnapshotEngine.open({ store, stream: 'r', policy: { baseEvery: 10, maxDeltaRatio: Infinity } });
    }
  }
  await engine.close();
  return store;
}

describe('reads on a store that scans (Store.scan)', () => {
  it('give what they give on a store that lists and reads, in fewer calls', async () => {
    const store = await stream();
    const scanning = new Counted(store, true);
    const listing = new Counted(store, false);
    const reads: [string, (s: Store) => Promise<unknown>][] = [
      ['restore', (s) => restore(s, 'r')],
      ['restore seq 23', (s) => restore(s, 'r', { seq: 23 })],
      ['restore seq 2', (s) => restore(s, 'r', { seq: 2 })],
      ['restoreRange 15-40', (s) => restoreRange(s, 'r', { from: 15, to: 40 })],
      [
        'open',
        async (s) => {
          const engine = await SnapshotEngine.open({ store: s, stream: 'r' });
          const got = { seq: engine.seq, state: engine.state };
          await engine.close();
          return got;
        },
      ],
    ];
    let [scanned, listed] = [0, 0];
    for (const [name, read] of reads) {
      scanning.calls.clear();
      listing.calls.clear();
      expect(await read(scanning), name).toEqual(await read(listing));
      expect(scanning.calls.get('scan') ?? 0, name).toBeGreaterThan(0);
      // (No more calls; an old seq's own frame comes with the listing of its slots, a round sooner.)
      expect(scanning.total, name).toBeLessThanOrEqual(listing.total);
      [scanned, listed] = [scanned + scanning.total, listed + listing.total];
    }
    expect(scanned).toBeLessThan(listed / 2);
    // The newest checkpoint: the hint, the floors, then its chain with its keys (3 calls, not 3 + one per frame).
    scanning.calls.clear();
    await restore(scanning, 'r');
    expect(scanning.total).toBe(3);
  });

  it('reject STORAGE, naming scan, when a store scans back something that is not objects', async () => {
    const store = await stream();
    for (const answer of [() => ['not', 'objects'], () => [{ key: 1, body: new Uint8Array() }], () => 'x']) {
      const bad = new Counted(store, true, answer);
      await expect(restore(bad, 'r')).rejects.toSatisfy(
        (e) => isStatefoldError(e, 'STORAGE') && (e as Error).message.includes('scan'),
      );
    }
  });

  it('scan the bytes of at most 64 keys after a hint, however far behind the newest it is, and none with span deltas', async () => {
    for (const spanEvery of [1, 4]) {
      const store = new MemoryStore();
      const policy = { baseEvery: 1000, spanEvery, maxDeltaRatio: Infinity };
      const engine = await SnapshotEngine.open({ store, stream: 'r', policy });
      for (let i = 1; i <= 150; i++) await engine.checkpoint({ n: i });
      await engine.close();
      let scanned = 0;
      const counted: Store = new Counted(store, true, undefined);
      const scan = counted.scan!.bind(counted);
      counted.scan = async (prefix: string, options?: ListOptions) => {
        const got = await scan(prefix, options);
        scanned += got.length;
        return got;
      };
      expect((await restore(counted, 'r')).state, `spanEvery ${spanEvery}`).toEqual({ n: 150 });
      expect(scanned, `spanEvery ${spanEvery}`).toBeLessThanOrEqual(spanEvery === 1 ? 64 : 0);
    }
  });
});
