import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, isStatefoldError, listCheckpoints, restore, type Policy } from 'statefold';
import { encodeValue } from '../../engine/format/values.js';

// policy.budget: a ceiling on the state's size (msgpack, before compression) and on one stored
// checkpoint, checked before anything is written.

const text = (n: number, seed: string) => Array.from({ length: n }, (_, i) => `${seed} ${i}\n`).join('');
const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (e: unknown) => (isStatefoldError(e) ? e.code : e),
  );

describe('policy.budget', () => {
  it("'reject' fails the checkpoint over maxStateBytes, naming what grew, writes nothing, and the next one is a base", async () => {
    const store = new MemoryStore();
    const max = 20_000;
    const engine = await SnapshotEngine.open({
      store,
      stream: 's',
      policy: { budget: { maxStateBytes: max, onExceed: 'reject' } },
    });
    const state = { notes: [] as string[], files: {} as Record<string, string> };
    state.files['a.ts'] = text(400, 'a'); // ~3 KB
    await engine.checkpoint(state);
    state.notes.push('small');
    await engine.checkpoint(state);
    const keys = (await store.list('')).sort();
    state.files['big.log'] = text(2_000, 'log line'); // over
    const err = await engine.checkpoint(state).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUDGET_EXCEEDED', stream: 's', seq: 3 });
    const message = (err as Error).message;
    expect(message).toContain(
      `the state is ${encodeValue(state).byteLength} bytes, over policy.budget.maxStateBytes ${max}`,
    );
    expect(message).toMatch(/grew most since the previous checkpoint: \/files\/big\.log \(\d+ B\)/);
    expect(message).toMatch(/largest: \/files \(\d+ B\), \/files\/big\.log/);
    expect((await store.list('')).sort()).toEqual(keys);
    expect(engine.seq).toBe(2);
    // Still over: rejected again. Back under: committed, as a base (the chain does not lean on what failed).
    state.notes.push('more');
    expect(await codeOf(engine.checkpoint(state))).toBe('BUDGET_EXCEEDED');
    delete state.files['big.log'];
    const info = await engine.checkpoint(state);
    expect(info).toMatchObject({ seq: 3, kind: 'base' });
    await engine.close();
    expect((await restore(store, 's')).state).toEqual(state);
  });

  it("'reject' over maxCheckpointBytes: a large delta fails, smaller ones commit", async () => {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store,
      stream: 's',
      policy: { budget: { maxCheckpointBytes: 2_000, onExceed: 'reject' } },
    });
    const state = { log: [] as string[] };
    await engine.checkpoint(state);
    state.log.push(text(50, 'a'));
    expect((await engine.checkpoint(state)).bytes).toBeLessThanOrEqual(2_000);
    // Random bytes do not compress: a delta of ~6 KB stored.
    state.log.push(randomBytes(4_500).toString('base64'));
    const err = await engine.checkpoint(state).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUDGET_EXCEEDED', seq: 3 });
    expect((err as Error).message).toMatch(
      /the checkpoint is \d+ bytes, over policy\.budget\.maxCheckpointBytes 2000; grew most since the previous checkpoint: \/log\/1 /,
    );
    await engine.close();
    expect((await listCheckpoints(store, 's')).map((e) => e.seq)).toEqual([1, 2]);
  });

  it("'warn' commits, and tells onWarning once until back under the ceiling; by default a process warning", async () => {
    const store = new MemoryStore();
    const warnings: { seq: number; limit: string; bytes: number }[] = [];
    const engine = await SnapshotEngine.open({
      store,
      stream: 's',
      policy: { budget: { maxStateBytes: 10_000, onExceed: 'warn', onWarning: (w) => warnings.push(w) } },
    });
    const state = { blob: '' };
    const sizes = [100, 20_000, 30_000, 100, 20_000];
    for (const n of sizes) {
      state.blob = 'x'.repeat(n);
      await engine.checkpoint(state);
    }
    expect(warnings.map((w) => [w.seq, w.limit, w.bytes])).toEqual([
      [2, 'maxStateBytes', encodeValue({ blob: 'x'.repeat(20_000) }).byteLength],
      [5, 'maxStateBytes', encodeValue({ blob: 'x'.repeat(20_000) }).byteLength],
    ]);
    expect(engine.seq).toBe(5);
    await engine.close();

    const seen: Error[] = [];
    const listener = (w: Error) => seen.push(w);
    process.on('warning', listener);
    try {
      const other = await SnapshotEngine.open({
        store,
        stream: 't',
        policy: { budget: { maxStateBytes: 10_000, onExceed: 'warn' } },
      });
      await other.checkpoint({ blob: 'y'.repeat(20_000) });
      await other.close();
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', listener);
    }
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ code: 'STATEFOLD_BUDGET' });
    expect(seen[0]!.message).toMatch(
      /^stream "t" seq 1: the state is \d+ bytes, over policy\.budget\.maxStateBytes 10000/,
    );
  });

  it('never misses a state over maxStateBytes, whatever the operations (random states, exact sizes)', async () => {
    // Lone surrogates (a string stored as UTF-16), appends (to strings of 32+ units: append
    // operations), and keys that make an object be stored as entries (__proto__, a lone surrogate).
    const text = fc.string({ unit: 'binary', maxLength: 60 });
    const value = fc.oneof(text, fc.integer(), fc.constant(null));
    const step = fc.record({
      key: fc.constantFrom('a', '__proto__', 'k\ud800'),
      op: fc.constantFrom('set', 'drop', 'append', 'append', 'append'),
      value,
      suffix: text,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 400, max: 1_600 }),
        async (steps, max) => {
          const engine = await SnapshotEngine.open({
            store: new MemoryStore(),
            stream: 's',
            policy: { budget: { maxStateBytes: max, onExceed: 'reject' } },
          });
          const state: Record<string, unknown> = Object.create(null);
          const list: unknown[] = [];
          state.list = list;
          for (const s of steps) {
            if (s.op === 'drop') delete state[s.key];
            else if (s.op === 'set') state[s.key] = s.value;
            else state[s.key] = `${typeof state[s.key] === 'string' ? state[s.key] : 'x'.repeat(400)}${s.suffix}`;
            list.push(s.value);
            if (list.length > 5) list.shift();
            const over = encodeValue(state).byteLength > max;
            expect(await codeOf(engine.checkpoint(state))).toBe(over ? 'BUDGET_EXCEEDED' : 'ok');
          }
          await engine.close();
        },
      ),
      { numRuns: 100 },
    );
  });

  it('catches a streamed string cut mid-character: stored as UTF-16 from then on, twice the bytes', async () => {
    const engine = await SnapshotEngine.open({
      store: new MemoryStore(),
      stream: 's',
      policy: { budget: { maxStateBytes: 150_000, onExceed: 'reject' } },
    });
    const state = { text: 'a'.repeat(100_000) };
    await engine.checkpoint(state);
    state.text += '\ud83d'; // half of an emoji: the string is no longer well-formed
    expect(await codeOf(engine.checkpoint(state))).toBe('BUDGET_EXCEEDED');
    state.text += '\ude00'; // the other half
    expect(await codeOf(engine.checkpoint(state))).toBe('ok');
    await engine.close();
  });

  it('catches a key that makes its object be stored as entries: a byte more for every key', async () => {
    const engine = await SnapshotEngine.open({
      store: new MemoryStore(),
      stream: 's',
      policy: { budget: { maxStateBytes: 0, onExceed: 'reject' } as never },
    }).catch(() => undefined);
    expect(engine).toBeUndefined(); // (0 is no ceiling: refused)
    const wide: Record<string, unknown> = Object.create(null);
    for (let i = 0; i < 5_000; i++) wide[`k${i}`] = i % 100;
    const size = encodeValue({ wide }).byteLength;
    const guarded = await SnapshotEngine.open({
      store: new MemoryStore(),
      stream: 's',
      policy: { budget: { maxStateBytes: size + 1_000, onExceed: 'reject' } },
    });
    const state = { wide };
    await guarded.checkpoint(state);
    wide['__proto__'] = 1; // an own key: the object is stored as [key, value] entries from now on
    expect(encodeValue(state).byteLength).toBeGreaterThan(size + 1_000);
    expect(await codeOf(guarded.checkpoint(state))).toBe('BUDGET_EXCEEDED');
    await guarded.close();
  });

  it('rejects a malformed budget INVALID_ARGUMENT, naming the option', async () => {
    const open = (budget: unknown) =>
      SnapshotEngine.open({ store: new MemoryStore(), stream: 's', policy: { budget } as Policy }).then(
        () => 'opened',
        (e: unknown) => (isStatefoldError(e, 'INVALID_ARGUMENT') ? e.message : e),
      );
    expect(await open({ maxStateBytes: 10 })).toMatch(/policy\.budget\.onExceed: undefined is not 'warn' or 'reject'/);
    expect(await open({ onExceed: 'warn' })).toMatch(/policy\.budget: sets no ceiling/);
    expect(await open({ maxStateBytes: -1, onExceed: 'warn' })).toMatch(
      /policy\.budget\.maxStateBytes: -1 is not a positive whole number/,
    );
    expect(await open({ maxCheckpointBytes: 1.5, onExceed: 'reject' })).toMatch(/maxCheckpointBytes: 1\.5/);
    expect(await open({ maxStateBytes: 10, onExceed: 'warn', onWarning: 'log' })).toMatch(
      /onWarning: .* is not a function/,
    );
    expect(await open({ maxStateBytes: 10, onExceed: 'warn', maxBytes: 3 })).toMatch(
      /policy\.budget\.maxBytes: unknown option/,
    );
    expect(await open(null)).toMatch(/policy\.budget: must be an object/);
  });
});
