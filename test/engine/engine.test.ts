import { describe, expect, it, vi } from 'vitest';
import { MemoryStore, SnapshotEngine, StatefoldError, listCheckpoints, restore, type CheckpointInfo } from 'statefold';
import { mulberry32 } from '../support/prng.mjs';
import { engineStores } from '../support/stores.js';
import { verified } from '../support/checkpoints.js';

for (const { name, create } of engineStores) {
  describe(`engine on the ${name} store: checkpoint and restore`, () => {
    it('opens a new stream with no state and seq 0', async () => {
      const engine = await SnapshotEngine.open({ store: await create(), stream: 'fresh' });
      expect(engine.state).toBeUndefined();
      expect(engine.seq).toBe(0);
      await engine.close();
    });

    it('numbers checkpoints from 1, one more each, and restores every one of them', async () => {
      const store = await create();
      const engine = await SnapshotEngine.open({ store, stream: 'agent-42', policy: { baseEvery: 4 } });
      const state = { messages: [] as { role: string; text: string }[], counters: { steps: 0 } };
      const seen: unknown[] = [];
      for (let i = 1; i <= 10; i++) {
        state.messages.push({ role: i % 2 ? 'user' : 'assistant', text: `message ${i}` });
        state.counters.steps = i;
        const info = await engine.checkpoint(state, { meta: { step: i } });
        expect(info.seq).toBe(i);
        expect(engine.seq).toBe(i);
        seen.push(structuredClone(state));
      }
      await engine.close();
      for (let i = 1; i <= 10; i++) {
        const r = await restore(store, 'agent-42', { seq: i });
        expect(r.seq).toBe(i);
        expect(r.state).toEqual(seen[i - 1]);
        expect(r.meta).toEqual({ step: i });
      }
      const latest = await restore(store, 'agent-42');
      expect(latest.seq).toBe(10);
      expect(latest.state).toEqual(seen[9]);
    });

    it('writes the first checkpoint as a base and then a base every baseEvery checkpoints', async () => {
      const store = await create();
      // A state much larger than each change, so that only baseEvery decides.
      let seed = 7;
      const noise = Array.from({ length: 20_000 }, () =>
        String.fromCharCode(33 + ((seed = (seed * 48271) % 2147483647) % 90)),
      ).join('');
      const state = { big: noise, n: 0 };
      const engine = await SnapshotEngine.open({ store, stream: 'cadence', policy: { baseEvery: 4 } });
      const kinds: string[] = [];
      for (let i = 0; i < 10; i++) {
        state.n = i;
        kinds.push((await engine.checkpoint(state)).kind);
      }
      expect(kinds).toEqual(['base', 'delta', 'delta', 'delta', 'base', 'delta', 'delta', 'delta', 'base', 'delta']);
      const list = verified(await listCheckpoints(store, 'cadence'));
      expect(list.map((c) => c.kind)).toEqual(kinds);
      expect(list.map((c) => c.base)).toEqual([1, 1, 1, 1, 5, 5, 5, 5, 9, 9]);
      await engine.close();
    });

    it('writes a base early when the deltas outgrow maxDeltaRatio of the base', async () => {
      const store = await create();
      const state: { log: string[] } = { log: [] };
      const engine = await SnapshotEngine.open({
        store,
        stream: 'ratio',
        policy: { baseEvery: 1000, maxDeltaRatio: 0.5 },
      });
      const infos: CheckpointInfo[] = [];
      const random = mulberry32(11);
      for (let i = 0; i < 30; i++) {
        // Incompressible-ish text, so sizes grow with every step.
        state.log.push(random().toString(36).repeat(20));
        infos.push(await engine.checkpoint(state));
      }
      await engine.close();
      // Between two bases, the deltas never add up to more than half of the base before them.
      let baseBytes = 0;
      let deltas = 0;
      for (const info of infos) {
        if (info.kind === 'base') {
          baseBytes = info.bytes;
          deltas = 0;
        } else {
          deltas += info.bytes;
          expect(deltas).toBeLessThanOrEqual(0.5 * baseBytes);
        }
      }
      expect(infos.filter((i) => i.kind === 'base').length).toBeGreaterThan(1);
      // ...and there were deltas to add up, so the loop above checked something.
      expect(infos.filter((i) => i.kind === 'delta').length).toBeGreaterThan(1);
      expect((await restore(store, 'ratio')).state).toEqual(state);
    });

    it('captures synchronously: mutating the state after checkpoint() returns does not change that checkpoint', async () => {
      const store = await create();
      const engine = await SnapshotEngine.open({ store, stream: 'sync' });
      const state = { items: [1, 2, 3], nested: { label: 'before' }, vec: new Float32Array([1, 2]) };
      const first = engine.checkpoint(state);
      state.items.push(4);
      state.nested.label = 'after';
      state.vec[0] = 99;
      const second = engine.checkpoint(state);
      state.items.length = 0;
      const [a, b] = await Promise.all([first, second]);
      expect((await restore(store, 'sync', { seq: a.seq })).state).toEqual({
        items: [1, 2, 3],
        nested: { label: 'before' },
        vec: new Float32Array([1, 2]),
      });
      expect((await restore(store, 'sync', { seq: b.seq })).state).toEqual({
        items: [1, 2, 3, 4],
        nested: { label: 'after' },
        vec: new Float32Array([99, 2]),
      });
      await engine.close();
    });

    it('commits several checkpoints in flight in call order', async () => {
      const store = await create();
      const engine = await SnapshotEngine.open({ store, stream: 'inflight', policy: { baseEvery: 3 } });
      const state = { n: 0, trail: [] as number[] };
      const promises: Promise<CheckpointInfo>[] = [];
      for (let i = 1; i <= 20; i++) {
        state.n = i;
        state.trail.push(i);
        promises.push(engine.checkpoint(state, { meta: i }));
      }
      expect(engine.pending).toBeGreaterThan(0);
      const infos = await Promise.all(promises);
      expect(infos.map((i) => i.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      for (const info of infos) {
        const r = await restore(store, 'inflight', { seq: info.seq });
        expect(r.state).toEqual({ n: info.seq, trail: Array.from({ length: info.seq }, (_, i) => i + 1) });
        expect(r.meta).toBe(info.seq);
      }
      await engine.close();
    });

    it('lists checkpoints ascending with kind, bytes, createdAt and meta', async () => {
      const store = await create();
      const before = Date.now();
      const engine = await SnapshotEngine.open({ store, stream: 'history', policy: { baseEvery: 2 } });
      const infos: CheckpointInfo[] = [];
      for (let i = 0; i < 5; i++)
        infos.push(await engine.checkpoint({ i, pad: 'p'.repeat(500) }, { meta: { step: i, tags: ['a'] } }));
      await engine.close();
      const list = verified(await listCheckpoints(store, 'history'));
      expect(list.map((c) => c.seq)).toEqual([1, 2, 3, 4, 5]);
      for (let i = 0; i < 5; i++) {
        expect(list[i]).toMatchObject({
          seq: i + 1,
          kind: infos[i]!.kind,
          bytes: infos[i]!.bytes,
          meta: { step: i, tags: ['a'] },
        });
        expect(list[i]!.createdAt).toBeGreaterThanOrEqual(before);
        expect(list[i]!.createdAt).toBeLessThanOrEqual(Date.now());
      }
      expect(await listCheckpoints(store, 'never-written')).toEqual([]);
    });

    it('continues a stream from its last checkpoint when a new engine opens it', async () => {
      const store = await create();
      const a = await SnapshotEngine.open({ store, stream: 'resume', policy: { baseEvery: 4 } });
      for (let i = 1; i <= 6; i++)
        await a.checkpoint({ step: i, history: Array.from({ length: i }, (_, k) => k) }, { meta: { step: i } });
      await a.close();
      const b = await SnapshotEngine.open<{ step: number; history: number[] }>({
        store,
        stream: 'resume',
        policy: { baseEvery: 4 },
      });
      expect(b.seq).toBe(6);
      expect(b.meta).toEqual({ step: 6 });
      const state = b.state!;
      expect(state).toEqual({ step: 6, history: [0, 1, 2, 3, 4, 5] });
      state.step = 7;
      state.history.push(6);
      const info = await b.checkpoint(state);
      expect(info.seq).toBe(7);
      await b.close();
      expect((await restore(store, 'resume')).state).toEqual({ step: 7, history: [0, 1, 2, 3, 4, 5, 6] });
      expect((await restore(store, 'resume', { seq: 6 })).state).toEqual({ step: 6, history: [0, 1, 2, 3, 4, 5] });
    });
  });
}

describe('engine: step policy', () => {
  it('checkpoints every everySteps steps and returns undefined in between', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 's', policy: { everySteps: 3, everyMs: Infinity } });
    const results = [];
    for (let i = 1; i <= 7; i++) results.push(engine.step({ i }));
    expect(results.map((r) => r !== undefined)).toEqual([false, false, true, false, false, true, false]);
    await Promise.all(results.filter(Boolean));
    expect(engine.seq).toBe(2);
    expect((await restore(store, 's')).state).toEqual({ i: 6 });
    // flush forces the last stepped state.
    const forced = await engine.flush();
    expect(forced?.seq).toBe(3);
    expect((await restore(store, 's')).state).toEqual({ i: 7 });
    expect(await engine.flush()).toBeUndefined();
    await engine.close();
  });

  it('checkpoints when everyMs has passed since the last checkpoint', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open({ store, stream: 't', policy: { everyMs: 500, everySteps: Infinity } });
      expect(engine.step({ i: 1 })).toBeUndefined();
      vi.advanceTimersByTime(499);
      expect(engine.step({ i: 2 })).toBeUndefined();
      vi.advanceTimersByTime(1);
      const p = engine.step({ i: 3 });
      expect(p).toBeDefined();
      expect((await p!).seq).toBe(1);
      expect(engine.step({ i: 4 })).toBeUndefined();
      await engine.close();
      // close flushed the last stepped state.
      expect((await restore(store, 't')).state).toEqual({ i: 4 });
    } finally {
      vi.useRealTimers();
    }
  });

  for (const updates of ['copy', 'immutable'] as const) {
    it(`checkpoints when the pending change exceeds maxPendingBytes (${updates})`, async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open({
        store,
        stream: 'b',
        updates,
        policy: { maxPendingBytes: 1000, everyMs: Infinity, everySteps: Infinity },
      });
      let state: { notes: string[] } = { notes: [] };
      const fired: number[] = [];
      for (let i = 1; i <= 30; i++) {
        state = { notes: [...state.notes, 'n'.repeat(150)] };
        const p = engine.step(state);
        if (p) fired.push((await p).seq && i);
      }
      // About 160 bytes of change per step: a checkpoint every 7 steps.
      expect(fired).toEqual([7, 14, 21, 28]);
      await engine.close();
      expect((await restore(store, 'b')).state).toEqual(state);
    });
  }
});

describe('engine: lifecycle and arguments', () => {
  it('rejects checkpoint, flush and close after close with CLOSED', async () => {
    const engine = await SnapshotEngine.open({ store: new MemoryStore(), stream: 'c' });
    await engine.checkpoint({ a: 1 });
    await engine.close();
    await expect(engine.checkpoint({ a: 2 })).rejects.toMatchObject({ code: 'CLOSED', stream: 'c' });
    await expect(engine.flush()).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(engine.close()).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('fences the first engine when a second opens the stream; the fenced one still closes', async () => {
    const store = new MemoryStore();
    const a = await SnapshotEngine.open({ store, stream: 'two' });
    await a.checkpoint({ by: 'a', n: 1 });
    const b = await SnapshotEngine.open({ store, stream: 'two' });
    expect(b.epoch).toBeGreaterThan(a.epoch);
    expect(b.state).toEqual({ by: 'a', n: 1 });
    await expect(a.checkpoint({ by: 'a', n: 2 })).rejects.toMatchObject({ code: 'FENCED', stream: 'two' });
    expect(a.fenced).toBe(true);
    await expect(a.checkpoint({ by: 'a', n: 3 })).rejects.toMatchObject({ code: 'FENCED' });
    await a.close();
    await expect(a.checkpoint({ by: 'a', n: 4 })).rejects.toMatchObject({ code: 'CLOSED' });
    expect((await b.checkpoint({ by: 'b', n: 2 })).seq).toBe(2);
    await b.close();
    expect((await listCheckpoints(store, 'two')).map((c) => c.seq)).toEqual([1, 2]);
    expect((await restore(store, 'two')).state).toEqual({ by: 'b', n: 2 });
  });

  it('retries a commit whose key was reported taken but holds nothing (S3 409 ConditionalRequestConflict)', async () => {
    const inner = new MemoryStore();
    let phantoms = 2;
    // A conditional write that lost a race to a write that then failed: "exists", yet nothing is there.
    const store = Object.assign(Object.create(inner) as MemoryStore, {
      putIfAbsent: async (key: string, body: Uint8Array) =>
        key.endsWith('log/0000000000000002') && phantoms-- > 0 ? false : inner.putIfAbsent(key, body),
      get: (key: string) => inner.get(key),
      list: (prefix: string, o?: { startAfter?: string }) => inner.list(prefix, o),
      delete: (key: string) => inner.delete(key),
    });
    const engine = await SnapshotEngine.open({ store, stream: 'phantom' });
    await engine.checkpoint({ n: 1 });
    expect((await engine.checkpoint({ n: 2 })).seq).toBe(2);
    expect(phantoms).toBeLessThan(0);
    await engine.close();
    expect((await restore(inner, 'phantom')).state).toEqual({ n: 2 });
  });

  it('waits for checkpoints in flight before close resolves', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'w' });
    const promises = [1, 2, 3].map((n) => engine.checkpoint({ n }));
    await engine.close();
    expect(engine.pending).toBe(0);
    expect((await Promise.all(promises)).map((i) => i.seq)).toEqual([1, 2, 3]);
  });

  it('rejects malformed options with INVALID_ARGUMENT', async () => {
    const store = new MemoryStore();
    await expect(SnapshotEngine.open({ store: {} as never, stream: 'x' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(SnapshotEngine.open({ store, stream: 'x', policy: { baseEvery: 0 } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('baseEvery'),
    });
    await expect(SnapshotEngine.open({ store, stream: 'x', policy: { baseEvery: 2.5 } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(SnapshotEngine.open({ store, stream: 'x', policy: { everyMs: -1 } })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(SnapshotEngine.open({ store, stream: 'x', policy: { basEvery: 3 } as never })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining('basEvery'),
    });
    await expect(SnapshotEngine.open({ store, stream: 'x', updates: 'sometimes' as never })).rejects.toBeInstanceOf(
      StatefoldError,
    );
    // Nothing was written by the refused opens.
    expect(await store.list('')).toEqual([]);
  });

  it('rejects a missing store, null options or a bad concurrency with INVALID_ARGUMENT, not a TypeError', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'args' });
    await engine.checkpoint({ a: 1 });
    await engine.close();
    for (const call of [
      () => restore(null as never, 'args'),
      () => listCheckpoints(undefined as never, 'args'),
      () => restore(store, 'args', null as never),
      () => restore(store, 'args', { concurrency: 0 }),
      () => listCheckpoints(store, 'args', { concurrency: -1 }),
      () => restore(store, 'args', { seq: '1' as never }),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    await expect(restore(store, 'args', { seq: '1' as never })).rejects.toMatchObject({
      message: expect.stringContaining('"1" (a string)'),
    });
  });

  it('rejects restore of a malformed, future or unknown seq with a typed error', async () => {
    const store = new MemoryStore();
    await expect(restore(store, 'nobody')).rejects.toMatchObject({ code: 'NOT_FOUND', stream: 'nobody' });
    const engine = await SnapshotEngine.open({ store, stream: 'r' });
    await engine.checkpoint({ a: 1 });
    await engine.checkpoint({ a: 2 });
    for (const seq of [0, -1, 1.5, NaN, Infinity, '2' as never]) {
      await expect(restore(store, 'r', { seq }), String(seq)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    await expect(restore(store, 'r', { seq: 3 })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      seq: 3,
      message: expect.stringContaining('beyond the newest checkpoint, 2'),
    });
    await engine.close();
  });
});
