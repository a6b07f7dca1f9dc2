import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import { MemoryStore, SnapshotEngine, StatefoldError, gc, listCheckpoints, restore, type Store } from 'statefold';
import { HookStore } from '../support/hook-store.js';

describe('engine: close is a state', () => {
  it('rejects checkpoint and a second close with CLOSED while close is pending, and commits neither', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'closing' });
    await engine.checkpoint({ n: 1 });
    const inFlight = engine.checkpoint({ n: 2 });
    const closing = engine.close();
    await expect(engine.checkpoint({ n: 3 })).rejects.toMatchObject({ code: 'CLOSED', stream: 'closing' });
    await expect(engine.close()).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(engine.flush()).rejects.toMatchObject({ code: 'CLOSED' });
    const stepped = engine.step({ n: 4 });
    expect(stepped).toBeInstanceOf(Promise);
    await expect(stepped).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(engine.effect('t', () => 1)).rejects.toMatchObject({ code: 'CLOSED' });
    await closing;
    // The checkpoint made before close commits; nothing made after it does.
    expect((await inFlight).seq).toBe(2);
    const restored = await restore(store, 'closing');
    expect(restored.seq).toBe(2);
    expect(restored.state).toEqual({ n: 2 });
    expect((await listCheckpoints(store, 'closing')).map((c) => c.seq)).toEqual([1, 2]);
  });

  it('still commits the last step that did not checkpoint, and an effect that settles while closing', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store,
      stream: 'closing-effect',
      policy: { everySteps: 100, everyMs: Infinity },
    });
    await engine.checkpoint({ n: 0 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const effect = engine.effect('pay-1', async () => {
      await gate;
      return 'paid';
    });
    // Let the intent commit before closing.
    while (engine.pendingEffects().length === 0) await new Promise((r) => setImmediate(r));
    expect(engine.step({ n: 1 })).toBeUndefined();
    const closing = engine.close();
    release();
    await closing;
    await expect(effect).resolves.toBe('paid');
    const restored = await restore(store, 'closing-effect');
    expect(restored.state).toEqual({ n: 1 });
    expect(restored.effects.find((e) => e.token === 'pay-1')).toMatchObject({ status: 'done', result: 'paid' });
  });
});

describe('engine: step checks the state it does not checkpoint', () => {
  const configs = [
    ['copy', {}],
    ['immutable', {}],
    ['copy, with maxPendingBytes', { maxPendingBytes: 1e9 }],
  ] as const;
  for (const [name, policy] of configs) {
    it(`rejects a state it cannot checkpoint at the step that passed it, and keeps the step before (${name})`, async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open<Record<string, unknown>>({
        store,
        stream: 'step-check',
        updates: name.startsWith('immutable') ? 'immutable' : 'copy',
        policy: { everySteps: 100, everyMs: Infinity, ...policy },
      });
      await engine.checkpoint({ n: 0 });
      expect(engine.step({ n: 1 })).toBeUndefined();
      const bad = engine.step({ n: 2, tools: { run: () => 1 } });
      expect(bad).toBeInstanceOf(Promise);
      await expect(bad).rejects.toMatchObject({
        code: 'INVALID_STATE',
        stream: 'step-check',
        path: '$.tools.run',
        message: 'checkpoint stream "step-check": $.tools.run: a function cannot be checkpointed',
      });
      const badMeta = engine.step({ n: 2 }, { meta: { at: 1n } });
      expect(badMeta).toBeInstanceOf(Promise);
      await expect(badMeta).rejects.toMatchObject({ code: 'INVALID_STATE', path: 'meta.at' });
      // The last valid step is the one close() checkpoints.
      await engine.close();
      expect((await restore(store, 'step-check')).state).toEqual({ n: 1 });
    });
  }

  it('waits for the work in the background when its last checkpoint fails, then rejects with that error', async () => {
    const inner = new MemoryStore();
    // The hint written after each base waits until released.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let hinting = false;
    const store = new HookStore(inner, async (op, key) => {
      if (op === 'putIfAbsent' && key.includes('/hint/')) {
        hinting = true;
        await held;
      }
    });
    const engine = await SnapshotEngine.open<Record<string, unknown>>({
      store,
      stream: 'close-waits',
      policy: { everySteps: 100, everyMs: Infinity },
    });
    await engine.checkpoint({ n: 0 });
    while (!hinting) await new Promise((r) => setImmediate(r));
    // A valid step, then changed in place ('copy' reads it when it checkpoints) into one that is not.
    const state: Record<string, unknown> = { n: 1 };
    expect(engine.step(state)).toBeUndefined();
    state.run = () => 1;
    let settled = false;
    const closing = engine.close().finally(() => (settled = true));
    closing.catch(() => undefined);
    for (let turn = 0; turn < 50; turn++) await new Promise((r) => setImmediate(r));
    // Still waiting for the hint: close() has not returned with work running behind it.
    expect(settled).toBe(false);
    release();
    await expect(closing).rejects.toMatchObject({ code: 'INVALID_STATE', path: '$.run' });
    expect(await inner.list('s.close-waits/hint/')).toHaveLength(1);
    await expect(engine.close()).rejects.toMatchObject({ code: 'CLOSED' });
    expect((await restore(inner, 'close-waits')).state).toEqual({ n: 0 });
  });
});

describe('capture: a getter that throws is named by its own path', () => {
  const boom = (): object =>
    Object.defineProperty({ ok: 1 }, 'boom', {
      enumerable: true,
      get: () => {
        throw new Error('boom');
      },
    });
  for (const updates of ['copy', 'immutable'] as const) {
    it(`reports $.tools.boom, in a first checkpoint, a later one and an array element (${updates})`, async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open<unknown>({ store, stream: `getter-${updates}`, updates });
      const first = await engine.checkpoint({ tools: boom() }).catch((e: unknown) => e);
      expect(first).toMatchObject({ code: 'INVALID_STATE', path: '$.tools.boom' });
      expect((first as Error).message).toBe(
        `checkpoint stream "getter-${updates}": $.tools.boom: reading it threw (boom); only plain data (no getters or Proxies that throw) can be checkpointed`,
      );
      await engine.checkpoint({ tools: { ok: 1, boom: 2 }, list: [{ ok: 1, boom: 2 }] });
      const later = await engine.checkpoint({ tools: boom(), list: [{ ok: 1, boom: 2 }] }).catch((e: unknown) => e);
      expect(later).toMatchObject({ code: 'INVALID_STATE', path: '$.tools.boom' });
      const element = await engine.checkpoint({ tools: { ok: 1, boom: 2 }, list: [boom()] }).catch((e: unknown) => e);
      expect(element).toMatchObject({ code: 'INVALID_STATE', path: '$.list[0].boom' });
      const meta = await engine.checkpoint({ n: 1 }, { meta: { tools: boom() } }).catch((e: unknown) => e);
      expect(meta).toMatchObject({ code: 'INVALID_STATE', path: 'meta.tools.boom' });
      await engine.close();
      expect((await restore(store, `getter-${updates}`)).state).toEqual({
        tools: { ok: 1, boom: 2 },
        list: [{ ok: 1, boom: 2 }],
      });
    });
  }
});

describe('retention: gc racing another gc', () => {
  it('lists again when the other gc deletes what this one listed, instead of rejecting NOT_FOUND', async () => {
    const inner = new MemoryStore();
    const engine = await SnapshotEngine.open({ store: inner, stream: 'race', policy: { baseEvery: 4 } });
    for (let n = 1; n <= 21; n++) await engine.checkpoint({ n });
    await engine.close();
    const retention = { keepLast: 2, minAgeMs: 0 };
    // The first gc lists; before its first read, a second gc (another process) trims the stream.
    let interfered = false;
    const store = new HookStore(inner, async (op) => {
      if (op === 'get' && !interfered) {
        interfered = true;
        const other = await gc(inner, 'race', { keepLast: 1, minAgeMs: 0 });
        expect(other.deleted.length).toBeGreaterThan(0);
      }
    });
    const report = await gc(store, 'race', retention);
    expect(interfered).toBe(true);
    expect(report.oldestRetained).toBeGreaterThan(1);
    const restored = await restore(inner, 'race');
    expect(restored.state).toEqual({ n: 21 });
    for (const entry of await listCheckpoints(inner, 'race')) {
      expect((await restore(inner, 'race', { seq: entry.seq })).state).toEqual({ n: entry.seq });
    }
  });
});

describe('commit: a failed read-back names stream and seq', () => {
  it('wraps the store error of reading back a key found taken in STORAGE with stream, seq and key', async () => {
    const inner = new MemoryStore();
    let failGets = false;
    const store = new HookStore(inner, (op) => {
      if (op === 'get' && failGets) throw new Error('connection reset');
    });
    const first = await SnapshotEngine.open({ store, stream: 'rb' });
    await first.checkpoint({ a: 1 });
    // A second engine takes the stream: the first one's next key is now its fence.
    const second = await SnapshotEngine.open({ store: inner, stream: 'rb' });
    failGets = true;
    const err = await first.checkpoint({ a: 2 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'STORAGE', stream: 'rb', seq: 2 });
    expect((err as { key?: string }).key).toMatch(/log\/0000000000000002$/);
    expect((err as Error).message).toMatch(/^commit .*stream "rb" seq 2 .*connection reset/);
    expect((err as Error).cause).toBeInstanceOf(Error);
    failGets = false;
    await second.checkpoint({ b: 1 });
    expect((await restore(inner, 'rb')).state).toEqual({ b: 1 });
    await second.close();
    await first.close();
  });
});

describe('values: every JS string round-trips, lone surrogates included', () => {
  const lone = ['\uD800', 'a\uDC00b', 'x\uDBFF', '\uDFFF\uD800', 'ok \uD83D\uDE00 then \uD83D'];
  const charCodes = (s: string): number[] => Array.from({ length: s.length }, (_, i) => s.charCodeAt(i));
  for (const updates of ['copy', 'immutable'] as const) {
    it(`keeps lone surrogates in values, keys, meta and ops exactly (${updates})`, async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open<Record<string, unknown>>({
        store,
        stream: `lone-${updates}`,
        updates,
        policy: { baseEvery: 100, maxDeltaRatio: Infinity },
      });
      const base = { texts: [...lone], byKey: Object.fromEntries(lone.map((k, i) => [k, i])), plain: 'é' };
      await engine.checkpoint(base, { meta: { note: lone[1] } });
      // A delta: the pointer of each op names a key with a lone surrogate.
      const next = {
        ...base,
        byKey: { ...base.byKey, [lone[0]!]: 'changed', [`new${lone[2]}`]: lone[3] },
        texts: [...lone, lone[4]],
      };
      const info = await engine.checkpoint(next);
      expect(info.kind).toBe('delta');
      await engine.close();
      const first = await restore<typeof base>(store, `lone-${updates}`, { seq: 1 });
      expect(first.state.texts.map(charCodes)).toEqual(lone.map(charCodes));
      expect(Object.keys(first.state.byKey).map(charCodes)).toEqual(lone.map(charCodes));
      expect(charCodes((first.meta as { note: string }).note)).toEqual(charCodes(lone[1]!));
      const second = await restore<Record<string, unknown>>(store, `lone-${updates}`);
      expect(second.state).toEqual(next);
      expect(Object.keys(second.state.byKey as object).map(charCodes)).toEqual(Object.keys(next.byKey).map(charCodes));
    });
  }

  it('runs an effect whose token has a lone surrogate once, across a reopen', async () => {
    const store = new MemoryStore();
    const token = `pay-\uD800-1`;
    let calls = 0;
    const a = await SnapshotEngine.open({ store, stream: 'lone-effect' });
    await a.checkpoint({ n: 1 });
    expect(await a.effect(token, () => (calls++, `paid\uDC00`))).toBe('paid\uDC00');
    await a.close();
    const b = await SnapshotEngine.open({ store, stream: 'lone-effect' });
    expect(b.effects.map((e) => charCodes(e.token))).toEqual([charCodes(token)]);
    expect(await b.effect(token, () => (calls++, 'again'))).toBe('paid\uDC00');
    expect(calls).toBe(1);
    await b.close();
  });
});

describe('errors: one boundary for capture and for store calls', () => {
  for (const updates of ['copy', 'immutable'] as const) {
    it(`turns a throwing getter or Proxy trap into INVALID_STATE naming the path, and captures nothing (${updates})`, async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open<unknown>({ store, stream: `traps-${updates}`, updates });
      let n = 1;
      await engine.checkpoint({ ok: { n } });
      const getter = {
        ok: { n: 1 },
        bad: Object.defineProperty({}, 'x', {
          enumerable: true,
          get: () => {
            throw new TypeError('getter exploded');
          },
        }),
      };
      const ownKeys = {
        ok: { n: 1 },
        bad: new Proxy(
          {},
          {
            ownKeys: () => {
              throw 42;
            },
          },
        ),
      };
      const proto = {
        ok: { n: 1 },
        bad: new Proxy(
          {},
          {
            getPrototypeOf: () => {
              throw Symbol('trap');
            },
          },
        ),
      };
      for (const [what, state] of [
        ['getter', getter],
        ['ownKeys', ownKeys],
        ['getPrototypeOf', proto],
      ] as const) {
        const err = await engine.checkpoint(state).catch((e: unknown) => e);
        expect(err, what).toBeInstanceOf(StatefoldError);
        expect(err, what).toMatchObject({ code: 'INVALID_STATE', stream: `traps-${updates}` });
        expect((err as StatefoldError).path, what).toMatch(/^\$\.bad/);
        // Nothing of the rejected state was captured: the next checkpoint diffs against the last good one.
        n++;
        expect(await engine.checkpoint({ ok: { n } }).then((i) => i.ops), what).toBe(1);
      }
      const meta = await engine.checkpoint({ ok: { n: n + 1 } }, { meta: getter }).catch((e: unknown) => e);
      expect(meta).toMatchObject({ code: 'INVALID_STATE' });
      await engine.close();
      expect((await restore(store, `traps-${updates}`)).state).toEqual({ ok: { n } });
    });
  }

  const misbehaving: [string, (inner: Store) => Store, string][] = [
    ['get answers a string', (inner) => new HookStore(inner, () => undefined, { get: () => 'bytes' }), 'STORAGE'],
    [
      'list answers an object',
      (inner) => new HookStore(inner, () => undefined, { list: () => ({ keys: [] }) }),
      'STORAGE',
    ],
    [
      'putIfAbsent answers a string',
      (inner) => new HookStore(inner, () => undefined, { putIfAbsent: () => 'yes' }),
      'STORAGE',
    ],
    [
      'get throws 42',
      (inner) =>
        new HookStore(inner, (op) => {
          if (op === 'get') throw 42;
        }),
      'STORAGE',
    ],
    [
      'list throws a symbol',
      (inner) =>
        new HookStore(inner, (op) => {
          if (op === 'list') throw Symbol('nope');
        }),
      'STORAGE',
    ],
    [
      'list throws an object without toString',
      (inner) =>
        new HookStore(inner, (op) => {
          if (op === 'list') throw Object.create(null);
        }),
      'STORAGE',
    ],
  ];
  for (const [what, make] of misbehaving) {
    it(`rejects with a StatefoldError when a store misbehaves: ${what}`, async () => {
      const inner = new MemoryStore();
      const seed = await SnapshotEngine.open({ store: inner, stream: 'm' });
      await seed.checkpoint({ a: 1 });
      await seed.close();
      const store = make(inner);
      const reads = what.startsWith('putIfAbsent')
        ? []
        : [() => restore(store, 'm'), () => listCheckpoints(store, 'm')];
      for (const attempt of [() => SnapshotEngine.open({ store, stream: 'm' }), ...reads]) {
        const err = await attempt().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, what).toBeInstanceOf(StatefoldError);
        expect(err, what).toMatchObject({ code: 'STORAGE' });
        expect((err as Error).message, what).toMatch(/(^|: )(get|list|putIfAbsent) s\.m/);
      }
    });
  }

  it('fails TIMEOUT when a store call never settles, within storeTimeoutMs', async () => {
    const inner = new MemoryStore();
    const never = new HookStore(inner, (op) => (op === 'list' ? new Promise<void>(() => undefined) : undefined));
    await expect(SnapshotEngine.open({ store: never, stream: 't', storeTimeoutMs: 50 })).rejects.toMatchObject({
      code: 'TIMEOUT',
    });
    await expect(restore(never, 't', { storeTimeoutMs: 50 })).rejects.toMatchObject({
      code: 'TIMEOUT',
      message: expect.stringMatching(/^list .*within 50 ms/),
    });
    await expect(SnapshotEngine.open({ store: inner, stream: 't', storeTimeoutMs: 0 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('arms no TIMEOUT timer for a store that answers in process, and still times out one that answers late', async () => {
    const inner = new MemoryStore();
    const seed = await SnapshotEngine.open({ store: inner, stream: 'q' });
    await seed.checkpoint({ a: 1 });
    await seed.close();
    const spy = vi.spyOn(globalThis, 'setTimeout');
    try {
      // Answered within a few microtask turns: nothing can hang, so no timer (one costs ~0.3 ms in a fresh process).
      expect((await restore(inner, 'q', { storeTimeoutMs: 50 })).state).toEqual({ a: 1 });
      expect(spy).not.toHaveBeenCalled();
      // Still pending after many microtask turns, then never settling: the timer is armed, TIMEOUT as before.
      let turns = 0;
      const late = new HookStore(inner, async (op) => {
        if (op !== 'list') return;
        while (turns++ < 50) await undefined;
        await new Promise<void>(() => undefined);
      });
      await expect(restore(late, 'q', { storeTimeoutMs: 50 })).rejects.toMatchObject({
        code: 'TIMEOUT',
        message: expect.stringMatching(/^list .*within 50 ms/),
      });
      expect(turns).toBeGreaterThan(50);
      // Answering after those turns is no failure: the timer is cleared.
      const slow = new HookStore(inner, async () => {
        for (let i = 0; i < 50; i++) await undefined;
        await sleep(5);
      });
      expect((await restore(slow, 'q', { storeTimeoutMs: 1_000 })).state).toEqual({ a: 1 });
    } finally {
      spy.mockRestore();
    }
  });

  it('keeps a storeTimeoutMs longer than 2^31-1 ms: with 30 days, calls that take 25 ms succeed', async () => {
    // Node runs a setTimeout of more than 2^31-1 ms after 1 ms: every call used to fail TIMEOUT.
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const inner = new MemoryStore();
      const slow = new HookStore(inner, () => sleep(25));
      const storeTimeoutMs = 30 * 24 * 3600 * 1000;
      const engine = await SnapshotEngine.open({ store: slow, stream: 'month', storeTimeoutMs });
      await engine.checkpoint({ a: 1 });
      await engine.checkpoint({ a: 2 });
      await engine.close();
      expect((await restore(slow, 'month', { storeTimeoutMs })).state).toEqual({ a: 2 });
      expect((await listCheckpoints(slow, 'month', { storeTimeoutMs })).map((c) => c.seq)).toEqual([1, 2]);
      await new Promise((r) => setImmediate(r));
      expect(warnings).not.toContain('TimeoutOverflowWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('rejects ABORTED, not STORAGE, when the caller aborts', async () => {
    const inner = new MemoryStore();
    const engine = await SnapshotEngine.open({ store: inner, stream: 'ab' });
    await engine.checkpoint({ a: 1 });
    await engine.close();
    const controller = new AbortController();
    controller.abort(new Error('user cancelled'));
    for (const attempt of [
      () => restore(inner, 'ab', { signal: controller.signal }),
      () => listCheckpoints(inner, 'ab', { signal: controller.signal }),
      () => gc(inner, 'ab', { keepLast: 1 }, { signal: controller.signal }),
    ]) {
      await expect(attempt()).rejects.toMatchObject({ code: 'ABORTED' });
    }
    // Aborted while the store works: the store's own failure is the cause.
    const late = new AbortController();
    const slow = new HookStore(inner, async (op) => {
      if (op === 'get') {
        late.abort();
        throw new Error('request cancelled');
      }
    });
    await expect(restore(slow, 'ab', { signal: late.signal })).rejects.toMatchObject({ code: 'ABORTED' });
  });
});
