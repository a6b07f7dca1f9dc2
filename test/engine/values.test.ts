import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, StatefoldError, restore } from 'statefold';

const modes = ['copy', 'immutable'] as const;

async function roundTrip(value: unknown, updates: 'copy' | 'immutable' = 'copy'): Promise<unknown> {
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open({ store, stream: 'v', updates });
  await engine.checkpoint(value);
  await engine.close();
  return (await restore(store, 'v')).state;
}

describe('state values: what restores', () => {
  it('restores JSON values deep-equal, at the root too', async () => {
    for (const value of [
      0,
      1.5,
      'text',
      '',
      true,
      false,
      null,
      [],
      {},
      [1, 'a', null, [true, { x: [] }]],
      { a: { b: { c: [1, 2, { d: 'e' }] } } },
    ]) {
      expect(await roundTrip(value), JSON.stringify(value)).toEqual(value);
    }
  });

  it('restores keys such as __proto__, constructor, "", and keys with / and ~ as plain data', async () => {
    const state = JSON.parse(
      '{"__proto__": {"polluted": true}, "constructor": {"prototype": 1}, "": "empty", "a/b": 1, "c~d": 2, "~1": 3, "nested": {"__proto__": [1]}}',
    );
    for (const updates of modes) {
      const back = (await roundTrip(state, updates)) as Record<string, unknown>;
      expect(Object.getOwnPropertyNames(back).sort()).toEqual(
        ['', '__proto__', 'a/b', 'c~d', 'constructor', 'nested', '~1'].sort(),
      );
      expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(back, '__proto__')!.value).toEqual({ polluted: true });
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(back['a/b']).toBe(1);
      expect(back['c~d']).toBe(2);
      expect(back['~1']).toBe(3);
    }
  });

  it('restores changes made through keys such as __proto__ and "a/b" in later deltas', async () => {
    for (const updates of modes) {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open({
        store,
        stream: 'k',
        updates,
        policy: { baseEvery: 100, maxDeltaRatio: Infinity },
      });
      let state = JSON.parse('{"x": {"__proto__": {"v": 1}, "a/b": {"~": 1}}}');
      await engine.checkpoint(state);
      state = JSON.parse('{"x": {"__proto__": {"v": 2, "w": 3}, "a/b": {"~": 2}, "__proto__2": 0}}');
      const info = await engine.checkpoint(state);
      expect(info.kind).toBe('delta');
      await engine.close();
      const back = (await restore(store, 'k')).state as { x: Record<string, unknown> };
      expect(Object.getOwnPropertyDescriptor(back.x, '__proto__')!.value).toEqual({ v: 2, w: 3 });
      expect(back.x['a/b']).toEqual({ '~': 2 });
      expect(Object.getPrototypeOf(back.x)).toBe(Object.prototype);
      expect(({} as Record<string, unknown>).v).toBeUndefined();
    }
  });

  it('restores Date and typed arrays with their type and value', async () => {
    const state = {
      at: new Date('2026-12-02T10:00:00.123Z'),
      invalid: new Date(NaN),
      bytes: new Uint8Array([0, 1, 255]),
      f32: new Float32Array([1.5, -0, NaN, Infinity]),
      f64: new Float64Array([Math.PI, -0]),
      i16: new Int16Array([-3, 7]),
      big: new BigUint64Array([2n ** 63n]),
      buf: Buffer.from('buffer'),
      list: [new Date(0), new Float32Array(0)],
    };
    for (const updates of modes) {
      const back = (await roundTrip(state, updates)) as typeof state;
      expect(back.at).toBeInstanceOf(Date);
      expect(back.at.getTime()).toBe(state.at.getTime());
      expect(Number.isNaN(back.invalid.getTime())).toBe(true);
      expect(back.bytes).toBeInstanceOf(Uint8Array);
      expect(back.bytes.constructor).toBe(Uint8Array);
      expect(back.f32).toBeInstanceOf(Float32Array);
      expect(Object.is(back.f32[1], -0)).toBe(true);
      expect(back.f64).toEqual(state.f64);
      expect(back.i16).toEqual(state.i16);
      expect(back.big).toEqual(state.big);
      expect(Buffer.isBuffer(back.buf)).toBe(true);
      expect(back.buf.toString()).toBe('buffer');
      expect(back.list[0]).toEqual(new Date(0));
      expect(back.list[1]).toBeInstanceOf(Float32Array);
    }
  });

  it('restores NaN, Infinity, -Infinity and -0 exactly', async () => {
    const back = (await roundTrip({ a: NaN, b: Infinity, c: -Infinity, d: -0, e: [-0, 0], f: 0 })) as Record<
      string,
      unknown
    >;
    expect(back.a).toBeNaN();
    expect(back.b).toBe(Infinity);
    expect(back.c).toBe(-Infinity);
    expect(Object.is(back.d, -0)).toBe(true);
    expect(Object.is((back.e as number[])[0], -0)).toBe(true);
    expect(Object.is((back.e as number[])[1], 0)).toBe(true);
    expect(Object.is(back.f, 0)).toBe(true);
  });

  it('sees a change from 0 to -0 and from NaN to a number', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'z' });
    const state = { x: 0 as number, y: NaN };
    await engine.checkpoint(state);
    state.x = -0;
    const info = await engine.checkpoint(state);
    expect(info.ops).toBe(1);
    state.y = 1;
    await engine.checkpoint(state);
    await engine.close();
    expect(Object.is((await restore<typeof state>(store, 'z', { seq: 2 })).state.x, -0)).toBe(true);
    expect((await restore<typeof state>(store, 'z', { seq: 3 })).state.y).toBe(1);
  });

  it('drops properties whose value is undefined, as JSON does', async () => {
    expect(await roundTrip({ a: 1, b: undefined, c: { d: undefined } })).toStrictEqual({ a: 1, c: {} });
    // In copy mode, undefined array items become null, as in JSON.
    expect(await roundTrip([1, undefined, 3])).toEqual([1, null, 3]);
  });
});

describe('state values: changes inside Date and typed arrays are never missed', () => {
  it('copy mode: in-place edits of a typed array and a Date are checkpointed', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store,
      stream: 'leaf',
      policy: { baseEvery: 100, maxDeltaRatio: Infinity },
    });
    const state = { emb: new Float32Array([1, 2, 3]), at: new Date(1000) };
    await engine.checkpoint(state);
    state.emb[1] = 42;
    const second = await engine.checkpoint(state);
    expect(second).toMatchObject({ kind: 'delta', ops: 1 });
    state.at.setTime(2000);
    const third = await engine.checkpoint(state);
    expect(third).toMatchObject({ kind: 'delta', ops: 1 });
    const unchanged = await engine.checkpoint(state);
    expect(unchanged.ops).toBe(0);
    await engine.close();
    expect((await restore<typeof state>(store, 'leaf', { seq: 2 })).state.emb).toEqual(new Float32Array([1, 42, 3]));
    expect((await restore<typeof state>(store, 'leaf', { seq: 2 })).state.at.getTime()).toBe(1000);
    expect((await restore<typeof state>(store, 'leaf', { seq: 3 })).state.at.getTime()).toBe(2000);
  });

  it('immutable mode: a typed array or Date changed in place inside an unchanged subtree is still checkpointed', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store,
      stream: 'leaf-i',
      updates: 'immutable',
      policy: { baseEvery: 100, maxDeltaRatio: Infinity },
    });
    const docs = [
      { id: 'a', emb: new Float32Array([1, 2]) },
      { id: 'b', emb: new Float32Array([3, 4]), seen: new Date(5) },
    ];
    const s1 = { docs, other: { x: 1 } };
    await engine.checkpoint(s1);
    // Same references everywhere; only the bytes and the time changed.
    docs[1]!.emb[0] = 30;
    docs[1]!.seen!.setTime(6);
    const info = await engine.checkpoint(s1);
    expect(info).toMatchObject({ kind: 'delta', ops: 2 });
    // A new root that shares the docs subtree; the embedding changes again.
    docs[0]!.emb[1] = 20;
    const s2 = { ...s1, other: { x: 2 } };
    expect((await engine.checkpoint(s2)).ops).toBe(2);
    await engine.close();
    const r2 = (await restore<typeof s1>(store, 'leaf-i', { seq: 2 })).state;
    expect(r2.docs[1]!.emb).toEqual(new Float32Array([30, 4]));
    expect(r2.docs[1]!.seen!.getTime()).toBe(6);
    expect(r2.docs[0]!.emb).toEqual(new Float32Array([1, 2]));
    const r3 = (await restore<typeof s1>(store, 'leaf-i', { seq: 3 })).state;
    expect(r3.docs[0]!.emb).toEqual(new Float32Array([1, 20]));
    expect(r3.other).toEqual({ x: 2 });
  });

  it('immutable mode: freezes what it captured, so an accidental in-place edit throws instead of being lost', async () => {
    const engine = await SnapshotEngine.open({ store: new MemoryStore(), stream: 'frozen', updates: 'immutable' });
    const state = { plan: { steps: ['a'] } };
    await engine.checkpoint(state);
    expect(() => state.plan.steps.push('b')).toThrow(TypeError);
    expect(Object.isFrozen(state.plan)).toBe(true);
    await engine.close();
  });

  it('immutable mode: a checkpoint captured before an in-place typed-array edit keeps the earlier bytes', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store,
      stream: 'versions',
      updates: 'immutable',
      policy: { baseEvery: 1 },
    });
    const emb = new Float32Array([1, 1]);
    const state = { emb };
    // Every checkpoint is a base, encoded after the next capture: each must see its own bytes.
    const p1 = engine.checkpoint(state);
    emb[0] = 2;
    const p2 = engine.checkpoint(state);
    emb[0] = 3;
    const p3 = engine.checkpoint(state);
    await Promise.all([p1, p2, p3]);
    await engine.close();
    for (const seq of [1, 2, 3]) {
      expect((await restore<typeof state>(store, 'versions', { seq })).state.emb[0]).toBe(seq);
    }
  });
});

describe('state values: what is rejected', () => {
  class Tool {
    run(): void {}
  }
  const cases: [string, () => unknown, string, string][] = [
    ['a function', () => ({ tools: [1, 2, 3, { run: () => 1 }] }), '$.tools[3].run', 'a function'],
    ['a symbol', () => ({ s: Symbol('x') }), '$.s', 'a symbol'],
    ['a bigint', () => ({ n: [1n] }), '$.n[0]', 'a bigint'],
    ['a class instance', () => ({ t: new Tool() }), '$.t', 'an instance of Tool'],
    ['a Map', () => ({ m: new Map() }), '$.m', 'a Map'],
    ['a Set', () => ({ 'odd key': new Set() }), '$["odd key"]', 'a Set'],
    ['undefined as the state', () => undefined, '$', 'undefined'],
    [
      'a cycle',
      () => {
        const a: Record<string, unknown> = { b: { c: {} } };
        (a.b as Record<string, Record<string, unknown>>).c!.back = a;
        return a;
      },
      '$.b.c.back',
      'a cycle',
    ],
  ];
  for (const updates of modes) {
    for (const [name, make, path, what] of cases) {
      it(`rejects ${name} with INVALID_STATE naming ${path} (${updates}), and stays usable`, async () => {
        const store = new MemoryStore();
        const engine = await SnapshotEngine.open({ store, stream: 'bad', updates });
        await engine.checkpoint({ ok: 1 });
        const err = await engine.checkpoint(make()).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(StatefoldError);
        expect(err).toMatchObject({ code: 'INVALID_STATE', path, stream: 'bad' });
        expect((err as Error).message).toContain(path);
        expect((err as Error).message).toContain(what);
        expect((err as Error).message).toContain('"bad"');
        // The stream is untouched and the engine goes on.
        expect(engine.seq).toBe(1);
        expect((await restore(store, 'bad')).state).toEqual({ ok: 1 });
        expect((await engine.checkpoint({ ok: 2 })).seq).toBe(2);
        expect((await restore(store, 'bad')).state).toEqual({ ok: 2 });
        await engine.close();
      });
    }
  }

  it('immutable mode: a rejected state is not frozen, not even its valid parts', async () => {
    const engine = await SnapshotEngine.open({ store: new MemoryStore(), stream: 'nf', updates: 'immutable' });
    const s1 = { kept: { a: 1 } };
    await engine.checkpoint(s1);
    const fresh = { list: [1, 2], nested: { x: 1 } };
    await expect(engine.checkpoint({ ...s1, fresh, bad: () => 1 })).rejects.toMatchObject({
      code: 'INVALID_STATE',
      path: '$.bad',
    });
    expect(Object.isFrozen(fresh)).toBe(false);
    expect(Object.isFrozen(fresh.nested)).toBe(false);
    fresh.list.push(3);
    // Once accepted, it is frozen like the rest.
    await engine.checkpoint({ ...s1, fresh });
    expect(Object.isFrozen(fresh.list)).toBe(true);
    await engine.close();
  });

  it('rejects meta that cannot be encoded with INVALID_STATE naming meta', async () => {
    const engine = await SnapshotEngine.open({ store: new MemoryStore(), stream: 'm' });
    await expect(engine.checkpoint({ a: 1 }, { meta: { cb: () => 1 } })).rejects.toMatchObject({
      code: 'INVALID_STATE',
      path: 'meta.cb',
    });
    expect((await engine.checkpoint({ a: 1 }, { meta: { ok: new Date(1) } })).seq).toBe(1);
    await engine.close();
  });

  it('rejects a cycle even when the state is deeper than the cycle check threshold', async () => {
    const engine = await SnapshotEngine.open({ store: new MemoryStore(), stream: 'deep' });
    const root: Record<string, unknown> = {};
    let node = root;
    for (let i = 0; i < 100; i++) node = (node.next = {}) as Record<string, unknown>;
    node.loop = root;
    await expect(engine.checkpoint(root)).rejects.toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringContaining('a cycle'),
    });
    await engine.close();
  });
});
