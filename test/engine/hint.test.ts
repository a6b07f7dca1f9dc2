import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, gc, listCheckpoints, restore, type Store } from 'statefold';
import { HookStore, type StoreOp } from '../support/hook-store.js';

/** Counts the keys every list call returned, so a test can tell how much history a call listed. */
class ListCounter extends HookStore {
  listed = 0;
  protected override after(op: StoreOp, _key: string, result: unknown): void {
    if (op === 'list') this.listed += (result as string[]).length;
  }
}

async function longStream(checkpoints: number): Promise<MemoryStore> {
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open({ store, stream: 'h', policy: { baseEvery: 8, maxDeltaRatio: Infinity } });
  for (let n = 1; n <= checkpoints; n++) await engine.checkpoint({ n });
  await engine.close(); // waits for the hint of the last base
  return store;
}

const hintKeys = async (store: Store): Promise<string[]> => (await store.list('')).filter((k) => k.includes('/hint/'));

describe('hint: open and restore list from the newest base, not the whole history', () => {
  it('keeps one hint, naming the newest base', async () => {
    const store = await longStream(300);
    const newestBase = (await listCheckpoints(store, 'h', { reverse: true })).find(
      (c) => !c.damaged && c.kind === 'base',
    )!.seq;
    expect(await hintKeys(store)).toEqual([`s.h/hint/${newestBase.toString(16).padStart(16, '0')}`]);
  });

  it('restores and opens a 300-checkpoint stream listing a few keys, not 300', async () => {
    const store = await longStream(300);
    const counter = new ListCounter(store);
    expect((await restore(counter, 'h')).state).toEqual({ n: 300 });
    expect(counter.listed).toBeLessThan(12);
    counter.listed = 0;
    const engine = await SnapshotEngine.open({ store: counter, stream: 'h' });
    expect(engine.state).toEqual({ n: 300 });
    expect(counter.listed).toBeLessThan(12);
    await engine.checkpoint({ n: 301 });
    await engine.close();
    expect((await restore(store, 'h')).state).toEqual({ n: 301 });
  });

  it('opens after an engine that opened and never committed, still listing only from the hinted base', async () => {
    const store = await longStream(300);
    const idle = await SnapshotEngine.open({ store, stream: 'h' }); // leaves its fence as the tail
    await idle.close();
    const counter = new ListCounter(store);
    const engine = await SnapshotEngine.open({ store: counter, stream: 'h' });
    expect(engine.state).toEqual({ n: 300 });
    expect(counter.listed).toBeLessThan(20);
    await engine.checkpoint({ n: 301 });
    await engine.close();
    expect((await restore(store, 'h')).state).toEqual({ n: 301 });
  });

  it('costs speed, never correctness, when the hint is stale, names a deleted base, or is garbage', async () => {
    const store = await longStream(40);
    // Stale: an older base's hint (the writer dropped it; put it back, and drop the newest).
    for (const key of await hintKeys(store)) await store.delete(key);
    await store.putIfAbsent('s.h/hint/0000000000000001', new Uint8Array(0));
    await store.putIfAbsent('s.h/hint/not-a-seq', new Uint8Array(0));
    expect((await restore(store, 'h')).state).toEqual({ n: 40 });
    // Retention deletes the hinted base: the hint no longer holds, the whole log is listed.
    await gc(store, 'h', { keepLast: 1, minAgeMs: 0 });
    expect((await restore(store, 'h')).state).toEqual({ n: 40 });
    const engine = await SnapshotEngine.open({ store, stream: 'h' });
    expect(engine.state).toEqual({ n: 40 });
    await engine.close();
  });

  it('detects that the newest objects were deleted where the hint says a base existed', async () => {
    const store = await longStream(40);
    const [hint] = await hintKeys(store);
    const base = parseInt(hint!.slice(-16), 16);
    for (const key of await store.list('s.h/log/')) if (parseInt(key.slice(8, 24), 16) >= base) await store.delete(key);
    await expect(restore(store, 'h')).rejects.toMatchObject({ code: 'CORRUPT', seq: base });
    await expect(SnapshotEngine.open({ store, stream: 'h' })).rejects.toMatchObject({ code: 'CORRUPT' });
  });
});

/** Holds every get until the test releases the pending ones: a "round" is one release. */
class RoundStore extends HookStore {
  readonly #pending: (() => void)[] = [];

  protected override async before(op: StoreOp): Promise<void> {
    if (op === 'get') await new Promise<void>((r) => this.#pending.push(r));
  }

  /** Runs `call`, releasing the held gets whenever no new one has come for a few turns; returns its result and the rounds of gets it took. */
  async rounds<T>(call: () => Promise<T>): Promise<{ result: T; rounds: number; gets: number }> {
    let settled = false;
    const promise = call().finally(() => (settled = true));
    let rounds = 0;
    let gets = 0;
    for (let guard = 0; guard < 10_000 && !settled; guard++) {
      let seen = -1;
      while (seen !== this.#pending.length) {
        seen = this.#pending.length;
        for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      }
      if (this.#pending.length > 0) {
        rounds++;
        gets += this.#pending.length;
        for (const release of this.#pending.splice(0)) release();
      }
    }
    return { result: await promise, rounds, gets };
  }
}

describe('hint: the newest checkpoint in one round of reads', () => {
  it('reads the newest chain at once, not its tail and then the rest', async () => {
    const store = await longStream(45); // bases every 8: the hint names 41, the chain is 41..45
    const held = new RoundStore(store);
    const { result, rounds, gets } = await held.rounds(() => restore(held, 'h'));
    expect(result.state).toEqual({ n: 45 });
    expect(rounds).toBe(1);
    expect(gets).toBe(5);
  });
});
