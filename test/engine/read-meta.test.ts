import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  checkEngineOptions,
  gc,
  isStatefoldError,
  readCheckpointMeta,
  type EngineOptions,
  type Store,
} from 'statefold';
import { flipByte } from '../support/damage.js';
import { HookStore, type StoreOp } from '../support/hook-store.js';

// The two exports an integration builds on besides restore and listCheckpoints: the meta of one
// checkpoint read without a listing (the LangGraph saver binary-searches on it), and the checks
// of SnapshotEngine.open made before any engine is opened.

/** A store that counts the operations that reach it. */
function counting(inner: Store): { store: Store; count: Record<StoreOp, number>; reset(): void } {
  const zero = (): Record<StoreOp, number> => ({ get: 0, putIfAbsent: 0, list: 0, delete: 0, removeLeftovers: 0 });
  const count = zero();
  const store = new HookStore(inner, (op) => void count[op]++);
  return { store, count, reset: () => Object.assign(count, zero()) };
}

/** Stream `s` with checkpoints 1..n, the meta of each `{ step }`. */
async function stream(store: Store, n: number, options: Partial<EngineOptions> = {}): Promise<void> {
  const engine = await SnapshotEngine.open({ store, stream: 's', ...options });
  for (let step = 1; step <= n; step++)
    await engine.checkpoint({ step, notes: 'x'.repeat(200 * step) }, { meta: { step } });
  await engine.close();
}

const code = (c: string) => (e: unknown) => isStatefoldError(e, c as never);

describe('readCheckpointMeta', () => {
  it('reads the meta of a checkpoint in one store read, listing and folding nothing', async () => {
    const { store, count, reset } = counting(new MemoryStore());
    await stream(store, 12, { policy: { baseEvery: 5 } });
    for (let seq = 2; seq <= 12; seq++) {
      reset();
      expect(await readCheckpointMeta(store, 's', seq)).toEqual({ step: seq });
      expect(count, `seq ${seq}`).toEqual({ get: 1, putIfAbsent: 0, list: 0, delete: 0, removeLeftovers: 0 });
    }
  });

  it('finds a checkpoint that follows a fence in its slot (a first open, a takeover) by listing', async () => {
    const store = new MemoryStore();
    const first = await SnapshotEngine.open({ store, stream: 's' });
    for (let step = 1; step <= 3; step++) await first.checkpoint({ step }, { meta: { step } });
    // Opened while the first engine still writes: it fences the next slot and commits behind the fence.
    const second = await SnapshotEngine.open({ store, stream: 's' });
    await second.checkpoint({ step: 4 }, { meta: { step: 4, by: 'second' } });
    const { store: counted, count } = counting(store);
    expect(await readCheckpointMeta(counted, 's', 4)).toEqual({ step: 4, by: 'second' });
    expect(count.list).toBeGreaterThan(0);
    expect(await readCheckpointMeta(store, 's', 1)).toEqual({ step: 1 });
    await second.close();
  });

  it('is NOT_FOUND for a seq the stream does not hold: beyond the newest, removed by gc, an unknown stream', async () => {
    const store = new MemoryStore();
    await stream(store, 8, { policy: { baseEvery: 3 } });
    const report = await gc(store, 's', { keepLast: 2, minAgeMs: 0 });
    expect(report.oldestRetained).toBeGreaterThan(1);
    for (const [id, seq] of [
      ['s', 9],
      ['s', 1],
      ['no-such-stream', 1],
    ] as const) {
      await expect(readCheckpointMeta(store, id, seq), `${id} ${seq}`).rejects.toSatisfy(code('NOT_FOUND'));
    }
    await expect(readCheckpointMeta(store, 's', 9)).rejects.toThrow(/^stream "s" seq 9: no checkpoint$/);
    expect(await readCheckpointMeta(store, 's', 8)).toEqual({ step: 8 });
  });

  it('gives undefined for a checkpoint committed without meta', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 's' });
    await engine.checkpoint({ a: 1 });
    await engine.checkpoint({ a: 2 });
    await engine.close();
    await expect(readCheckpointMeta(store, 's', 2)).resolves.toBeUndefined();
  });

  it('reads an encrypted stream with its keys, and is KEY_UNAVAILABLE without them', async () => {
    const store = new MemoryStore();
    const encryption = { keys: { k1: randomBytes(32) }, current: 'k1' };
    await stream(store, 3, { encryption });
    expect(await readCheckpointMeta(store, 's', 2, { encryption })).toEqual({ step: 2 });
    await expect(readCheckpointMeta(store, 's', 2)).rejects.toSatisfy(code('KEY_UNAVAILABLE'));
  });

  it('is CORRUPT for a damaged checkpoint, naming its seq', async () => {
    const store = new MemoryStore();
    await stream(store, 3);
    const key = (await store.list('')).find((k) => k.endsWith('/log/0000000000000002'))!;
    await flipByte(store, key);
    await expect(readCheckpointMeta(store, 's', 2)).rejects.toSatisfy(
      (e) => isStatefoldError(e, 'CORRUPT') && e.seq === 2,
    );
  });

  it('is INVALID_ARGUMENT, before any store call, for a bad seq, stream id, store or option', async () => {
    const { store, count } = counting(new MemoryStore());
    for (const call of [
      () => readCheckpointMeta(store, 's', 0),
      () => readCheckpointMeta(store, 's', 1.5),
      () => readCheckpointMeta(store, '', 1),
      () => readCheckpointMeta({} as Store, 's', 1),
      () => readCheckpointMeta(store, 's', 1, { maxPayloadBytes: -1 }),
      () => readCheckpointMeta(store, 's', 1, { encryption: { keys: {}, current: 'k' } }),
    ]) {
      await expect(call()).rejects.toSatisfy(code('INVALID_ARGUMENT'));
    }
    expect(count).toEqual({ get: 0, putIfAbsent: 0, list: 0, delete: 0, removeLeftovers: 0 });
  });
});

describe('checkEngineOptions', () => {
  it('accepts what SnapshotEngine.open accepts, touching no store', () => {
    const { store, count } = counting(new MemoryStore());
    checkEngineOptions({ store, stream: 's', policy: { baseEvery: 4 }, retention: { keepLast: 3 } });
    expect(count).toEqual({ get: 0, putIfAbsent: 0, list: 0, delete: 0, removeLeftovers: 0 });
  });

  it('rejects what SnapshotEngine.open rejects, with the same INVALID_ARGUMENT', async () => {
    const store = new MemoryStore();
    for (const options of [
      { store, stream: '' },
      { store, stream: 'x'.repeat(513) },
      { store: {} as Store, stream: 's' },
      { store, stream: 's', policy: { baseEvery: 0 } },
      { store, stream: 's', updates: 'sometimes' as never },
      { store, stream: 's', onPendingEffect: 'later' as never },
      { store, stream: 's', encryption: { keys: {}, current: 'k' } },
    ]) {
      let thrown: unknown;
      try {
        checkEngineOptions(options);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, JSON.stringify(options.stream)).toSatisfy(code('INVALID_ARGUMENT'));
      await expect(SnapshotEngine.open(options)).rejects.toThrow((thrown as Error).message);
    }
    expect(await store.list('')).toEqual([]);
  });
});
