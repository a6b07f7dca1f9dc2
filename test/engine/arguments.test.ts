import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  StatefoldError,
  deleteStream,
  diffCheckpoints,
  forkStream,
  gc,
  listCheckpoints,
  listStreams,
  restore,
  verifyStream,
  type Store,
} from 'statefold';
import { HookStore } from '../support/hook-store.js';
import { mulberry32 } from '../support/prng.mjs';

// Malformed arguments: every one is a StatefoldError (INVALID_ARGUMENT, or INVALID_STATE for a
// state or meta) that says what and where, raised before the store is touched, never a raw
// TypeError thrown while checking or describing the value.

/** Every key of `store` with its bytes, to compare before and after. */
async function contents(store: Store): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of await store.list('')) out.set(key, Buffer.from((await store.get(key))!).toString('hex'));
  return out;
}

/** A store holding stream `seeded` (bases and deltas, an effect), and a hook that counts every call made to it. */
async function seededStore(): Promise<{ inner: MemoryStore; store: HookStore; calls: () => number }> {
  const inner = new MemoryStore();
  const engine = await SnapshotEngine.open({ store: inner, stream: 'seeded', policy: { baseEvery: 2 } });
  for (let n = 1; n <= 5; n++) await engine.checkpoint({ n, list: [n, n + 1] }, { meta: { n } });
  await engine.effect('pay-1', () => 'paid');
  await engine.close();
  let count = 0;
  const store = new HookStore(inner, () => void count++);
  return { inner, store, calls: () => count };
}

/** The rejection of `call`, whether it throws or returns a rejected promise; undefined when it does neither. */
async function rejection(call: () => unknown): Promise<unknown> {
  try {
    const result = call();
    if (result instanceof Promise) await result;
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('arguments: the malformed calls of issue 28', () => {
  it('rejects a bigint seq with INVALID_ARGUMENT naming the call, the stream and the value', async () => {
    const { store } = await seededStore();
    const err = await rejection(() => restore(store, 'seeded', { seq: 1n as never }));
    expect(err).toBeInstanceOf(StatefoldError);
    expect(err).toMatchObject({
      code: 'INVALID_ARGUMENT',
      stream: 'seeded',
      message: 'restore stream "seeded": seq 1n (a bigint) is not a positive integer',
    });
  });

  it('rejects option values without a prototype, which cannot be turned into text, with INVALID_ARGUMENT', async () => {
    const { store } = await seededStore();
    const bare = Object.create(null) as never;
    await expect(restore(store, 'seeded', { storeTimeoutMs: bare })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^restore: storeTimeoutMs an object with a null prototype is not a positive/),
    });
    await expect(listCheckpoints(store, 'seeded', { limit: bare })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'listCheckpoints stream "seeded": limit an object with a null prototype is not a positive integer',
    });
  });

  it('rejects null options of gc and a null effectRetention of open with INVALID_ARGUMENT', async () => {
    const { store, calls } = await seededStore();
    await expect(gc(store, 'seeded', { keepLast: 1, minAgeMs: 0 }, null as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'gc stream "seeded": options must be an object, not null',
    });
    await expect(
      SnapshotEngine.open({ store, stream: 'seeded', effectRetention: null as never }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'effectRetention: must be an object, not null',
    });
    expect(calls()).toBe(0);
  });

  it('rejects null options of effect with INVALID_ARGUMENT, without running fn or writing', async () => {
    const { inner } = await seededStore();
    const engine = await SnapshotEngine.open({ store: inner, stream: 'seeded' });
    const before = await contents(inner);
    let ran = 0;
    const err = await rejection(() => engine.effect('pay-2', () => ran++, null as never));
    expect(err).toBeInstanceOf(StatefoldError);
    expect(err).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'effect "pay-2" on stream "seeded": options must be an object, not null',
    });
    await expect(engine.effect('pay-2', () => ran++, { onPending: 'later' as never })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(`onPending "later" must be 'retry', 'throw' or a function`),
    });
    expect(ran).toBe(0);
    expect(await contents(inner)).toEqual(before);
    expect(engine.pendingEffects()).toEqual([]);
    await engine.close();
  });

  it('rejects an onProgress that is not a function before anything is read or deleted', async () => {
    const { inner, store, calls } = await seededStore();
    const before = await contents(inner);
    const bad = { onProgress: 'x' as never };
    for (const [name, call] of [
      ['deleteStream', () => deleteStream(store, 'seeded', bad)],
      ['gc', () => gc(store, 'seeded', { keepLast: 1, minAgeMs: 0 }, bad)],
      ['verifyStream', () => verifyStream(store, 'seeded', bad)],
      ['listStreams', () => listStreams(store, bad)],
    ] as const) {
      const err = await rejection(call);
      expect(err, name).toBeInstanceOf(StatefoldError);
      expect(err, name).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((err as Error).message, name).toMatch(
        new RegExp(`^${name}( stream "seeded")?: onProgress must be a function, not "x"$`),
      );
    }
    expect(calls()).toBe(0);
    expect(await contents(inner)).toEqual(before);
    expect((await restore(inner, 'seeded')).state).toEqual({ n: 5, list: [5, 6] });
  });

  it('records an effect whose fn throws an object without a prototype as failed, and rethrows that object', async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'bare-throw' });
    await engine.checkpoint({ n: 1 });
    const thrown = Object.create(null) as object;
    const err = await rejection(() =>
      engine.effect('t', () => {
        throw thrown;
      }),
    );
    expect(err).toBe(thrown);
    expect(engine.effects).toMatchObject([{ token: 't', status: 'failed', error: { message: '[object Object]' } }]);
    await engine.close();
  });
});

/** Values that are malformed for most options; `valid` below says for which they are not. */
const WEIRD: (() => unknown)[] = [
  () => 1n,
  () => -3n,
  () => Symbol('weird'),
  () => null,
  () => Object.create(null),
  () => 'x',
  () => '',
  () => '5',
  () => -1,
  () => 0,
  () => NaN,
  () => -Infinity,
  () => 1.5,
  () => 2 ** 60,
  () => () => 1,
  () => [],
  () => [1, 2],
  () => ({}),
  () => true,
  () => new Date(0),
  () => new Map(),
  () => ({ nested: Symbol('deep') }),
  // Describing it asks for its prototype, and that throws.
  () =>
    new Proxy(
      {},
      {
        getPrototypeOf: () => {
          throw new Error('trap');
        },
      },
    ),
];

const positiveInt = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1;
const isObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v);
/** What a checkpoint can hold, for the values of WEIRD. */
const checkpointable = (v: unknown): boolean => {
  if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) return true;
  if (typeof v !== 'object') return false;
  if (Array.isArray(v)) return v.every(checkpointable);
  try {
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto === Date.prototype) return true;
    return (proto === Object.prototype || proto === null) && Object.values(v).every(checkpointable);
  } catch {
    return false;
  }
};

/** Which values an argument accepts: those are never passed as malformed. */
const valid: Record<string, (v: unknown) => boolean> = {
  store: () => false,
  stream: (v) => typeof v === 'string' && v !== '',
  options: isObject,
  checkpointOptions: (v) => v === null || isObject(v),
  seq: positiveInt,
  limit: positiveInt,
  concurrency: positiveInt,
  maxPayloadBytes: positiveInt,
  storeTimeoutMs: (v) => typeof v === 'number' && v > 0,
  signal: () => false,
  onProgress: (v) => typeof v === 'function',
  boolean: (v) => typeof v === 'boolean',
  encryption: () => false,
  now: (v) => typeof v === 'number' && Number.isFinite(v),
  prefix: (v) => typeof v === 'string',
  objectOption: isObject,
  retention: (v) => isObject(v) && ('keepLast' in (v as object) || 'keepForMs' in (v as object)),
  nonNegative: (v) => typeof v === 'number' && v >= 0,
  keepLast: (v) => positiveInt(v) || v === 0 || v === Infinity,
  policyCount: (v) => typeof v === 'number' && Number.isInteger(v) && v > 0,
  policyAmount: (v) => typeof v === 'number' && v > 0,
  updates: (v) => v === 'copy' || v === 'immutable',
  pending: (v) => v === 'retry' || v === 'throw' || typeof v === 'function',
  token: (v) => typeof v === 'string' && v !== '',
  fn: (v) => typeof v === 'function',
  state: checkpointable,
};

/** One argument of one call: what it accepts, the call with every other argument valid (and writing), and the code expected. */
type Slot = [name: string, kind: keyof typeof valid, call: (v: unknown) => unknown, code?: 'INVALID_STATE'];

/** Every argument and option of the public API, each as a call whose other arguments are valid: accepted, it would write. */
function slots(store: Store, engine: SnapshotEngine): Slot[] {
  const s = 'seeded';
  const keep = { keepLast: 1, minAgeMs: 0 };
  const open = (o: object) => SnapshotEngine.open({ store, stream: s, ...o });
  const readKeys = ['concurrency', 'maxPayloadBytes', 'storeTimeoutMs', 'signal', 'encryption'] as const;
  /** One slot per option key, each of the kind of the same name. */
  const common = (name: string, keys: readonly (keyof typeof valid)[], call: (o: object) => unknown): Slot[] =>
    keys.map((key): Slot => [`${name} ${key}`, key, (v) => call({ [key]: v })]);
  return [
    ['restore store', 'store', (v) => restore(v as Store, s)],
    ['restore stream', 'stream', (v) => restore(store, v as string)],
    ['restore options', 'options', (v) => restore(store, s, v as object)],
    ['restore seq', 'seq', (v) => restore(store, s, { seq: v as number })],
    ['restore skipDamaged', 'boolean', (v) => restore(store, s, { skipDamaged: v as boolean })],
    ...common('restore', readKeys, (o) => restore(store, s, o)),
    ['listCheckpoints options', 'options', (v) => listCheckpoints(store, s, v as object)],
    ['listCheckpoints limit', 'limit', (v) => listCheckpoints(store, s, { limit: v as number })],
    ['listCheckpoints after', 'seq', (v) => listCheckpoints(store, s, { after: v as number })],
    ['listCheckpoints before', 'seq', (v) => listCheckpoints(store, s, { before: v as number })],
    ['listCheckpoints reverse', 'boolean', (v) => listCheckpoints(store, s, { reverse: v as boolean })],
    ...common('listCheckpoints', readKeys, (o) => listCheckpoints(store, s, o)),
    ['gc store', 'store', (v) => gc(v as Store, s, keep)],
    ['gc stream', 'stream', (v) => gc(store, v as string, keep)],
    ['gc retention', 'retention', (v) => gc(store, s, v as never)],
    ['gc keepLast', 'policyCount', (v) => gc(store, s, { ...keep, keepLast: v as number })],
    ['gc keepForMs', 'nonNegative', (v) => gc(store, s, { ...keep, keepForMs: v as number })],
    ['gc minAgeMs', 'nonNegative', (v) => gc(store, s, { ...keep, minAgeMs: v as number })],
    ['gc options', 'options', (v) => gc(store, s, keep, v as object)],
    ['gc now', 'now', (v) => gc(store, s, keep, { now: v as number })],
    ['gc limits', 'objectOption', (v) => gc(store, s, keep, { limits: v as never })],
    ...common('gc', ['onProgress', 'signal', 'storeTimeoutMs'], (o) => gc(store, s, keep, o)),
    ['verifyStream stream', 'stream', (v) => verifyStream(store, v as string)],
    ['verifyStream options', 'options', (v) => verifyStream(store, s, v as object)],
    ...common('verifyStream', [...readKeys, 'onProgress'], (o) => verifyStream(store, s, o)),
    ['listStreams store', 'store', (v) => listStreams(v as Store)],
    ['listStreams options', 'options', (v) => listStreams(store, v as object)],
    ['listStreams prefix', 'prefix', (v) => listStreams(store, { prefix: v as string })],
    ...common('listStreams', ['onProgress', 'signal', 'storeTimeoutMs'], (o) => listStreams(store, o)),
    ['forkStream from', 'stream', (v) => forkStream(store, v as string, 'fork')],
    ['forkStream to', 'stream', (v) => forkStream(store, s, v as string)],
    ['forkStream options', 'options', (v) => forkStream(store, s, 'fork', v as object)],
    ['forkStream seq', 'seq', (v) => forkStream(store, s, 'fork', { seq: v as number })],
    [
      'forkStream effectRetention',
      'objectOption',
      (v) => forkStream(store, s, 'fork', { effectRetention: v as never }),
    ],
    ...common('forkStream', ['signal', 'storeTimeoutMs', 'encryption'], (o) => forkStream(store, s, 'fork', o)),
    ['deleteStream store', 'store', (v) => deleteStream(v as Store, s)],
    ['deleteStream stream', 'stream', (v) => deleteStream(store, v as string)],
    ['deleteStream options', 'options', (v) => deleteStream(store, s, v as object)],
    ...common('deleteStream', ['onProgress', 'signal', 'storeTimeoutMs'], (o) => deleteStream(store, s, o)),
    ['diffCheckpoints seqA', 'seq', (v) => diffCheckpoints(store, s, v as number, 2)],
    ['diffCheckpoints seqB', 'seq', (v) => diffCheckpoints(store, s, 1, v as number)],
    ['diffCheckpoints options', 'options', (v) => diffCheckpoints(store, s, 1, 2, v as object)],
    ...common('diffCheckpoints', readKeys, (o) => diffCheckpoints(store, s, 1, 2, o)),
    ['open options', 'options', (v) => SnapshotEngine.open(v as never)],
    ['open store', 'store', (v) => open({ store: v })],
    ['open stream', 'stream', (v) => open({ stream: v })],
    ['open policy', 'objectOption', (v) => open({ policy: v })],
    ['open updates', 'updates', (v) => open({ updates: v })],
    ['open retention', 'retention', (v) => open({ retention: v })],
    ['open onPendingEffect', 'pending', (v) => open({ onPendingEffect: v })],
    ['open effectRetention', 'objectOption', (v) => open({ effectRetention: v })],
    ['open repair', 'boolean', (v) => open({ repair: v })],
    ...common('open', ['maxPayloadBytes', 'storeTimeoutMs', 'encryption'], open),
    ...['baseEvery', 'spanEvery', 'everySteps'].map((k): Slot => [
      `open policy.${k}`,
      'policyCount',
      (v) => open({ policy: { [k]: v } }),
    ]),
    ...['maxDeltaRatio', 'everyMs', 'maxPendingBytes'].map((k): Slot => [
      `open policy.${k}`,
      'policyAmount',
      (v) => open({ policy: { [k]: v } }),
    ]),
    ['open effectRetention.keepForMs', 'nonNegative', (v) => open({ effectRetention: { keepForMs: v } })],
    ['open effectRetention.keepLast', 'keepLast', (v) => open({ effectRetention: { keepLast: v } })],
    ['checkpoint state', 'state', (v) => engine.checkpoint(v), 'INVALID_STATE'],
    ['checkpoint options', 'checkpointOptions', (v) => engine.checkpoint({ n: 1 }, v as never)],
    ['checkpoint meta', 'state', (v) => engine.checkpoint({ n: 1 }, { meta: v }), 'INVALID_STATE'],
    ['step state', 'state', (v) => engine.step(v), 'INVALID_STATE'],
    ['step options', 'checkpointOptions', (v) => engine.step({ n: 1 }, v as never)],
    ['step meta', 'state', (v) => engine.step({ n: 1 }, { meta: v }), 'INVALID_STATE'],
    ['effect token', 'token', (v) => engine.effect(v as string, () => 1)],
    ['effect fn', 'fn', (v) => engine.effect('t', v as never)],
    ['effect options', 'options', (v) => engine.effect('t', () => 1, v as never)],
    ['effect onPending', 'pending', (v) => engine.effect('t', () => 1, { onPending: v as never })],
    ['effect state', 'state', (v) => engine.effect('t', () => 1, { state: v }), 'INVALID_STATE'],
    ['effect meta', 'state', (v) => engine.effect('t', () => 1, { meta: v }), 'INVALID_STATE'],
    ['engine gc retention', 'retention', (v) => engine.gc(v as never)],
    ['engine gc keepLast', 'policyCount', (v) => engine.gc({ ...keep, keepLast: v as number })],
  ];
}

describe('arguments: seeded malformed calls over the public API', () => {
  for (const seed of [1, 2, 3]) {
    it(`rejects every malformed call with a StatefoldError before touching the store, and changes nothing (seed ${seed})`, async () => {
      const { inner, store, calls } = await seededStore();
      const engine = await SnapshotEngine.open({
        store,
        stream: 'live',
        policy: { everySteps: 1_000_000, everyMs: Infinity, baseEvery: 2 },
      });
      await engine.checkpoint({ live: 1 });
      // The hint after that base is written in the background: let it land first.
      while ((await inner.list('s.live/hint/')).length === 0) await new Promise((r) => setImmediate(r));
      const before = await contents(inner);
      const table = slots(store, engine as SnapshotEngine);
      const random = mulberry32(seed);
      for (let i = 0; i < 1_700; i++) {
        const [name, kind, call, code = 'INVALID_ARGUMENT'] = table[Math.floor(random() * table.length)]!;
        const candidates = WEIRD.filter((make) => !valid[kind]!(make()));
        const value = candidates[Math.floor(random() * candidates.length)]!();
        const where = `seed ${seed}, call ${i}: ${name} = ${show(value)}`;
        const callsBefore = calls();
        const err = await rejection(() => call(value));
        expect(err, where).toBeInstanceOf(StatefoldError);
        expect((err as StatefoldError).code, `${where}: ${(err as Error).message}`).toBe(code);
        expect((err as Error).message, where).toMatch(/: /);
        expect(calls() - callsBefore, `${where}: store calls`).toBe(0);
      }
      expect(await contents(inner)).toEqual(before);
      // The engine is still usable, and nothing of the rejected calls was kept.
      expect((await engine.checkpoint({ live: 2 })).seq).toBe(2);
      await engine.close();
      expect((await restore(inner, 'live')).state).toEqual({ live: 2 });
      expect((await restore(inner, 'seeded')).state).toEqual({ n: 5, list: [5, 6] });
      expect((await listStreams(inner)).sort()).toEqual(['live', 'seeded']);
    });
  }
});

/** A value as text, for failure messages (String() throws on some of them). */
function show(v: unknown): string {
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  if (typeof v === 'symbol' || typeof v === 'function') return String(v);
  try {
    if (typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === null) return 'Object.create(null)';
    return JSON.stringify(v) ?? String(v);
  } catch {
    return Object.prototype.toString.call(v);
  }
}
