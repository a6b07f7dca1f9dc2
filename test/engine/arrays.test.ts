import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, restore } from 'statefold';

/**
 * Array changes as array changes: random arrays edited by random splices, shifts, pushes, moves
 * and in-place changes, in both update modes. Every restore must equal a full-copy reference, and
 * the operations a checkpoint writes are bounded by the elements the step touched:
 *
 *   ops <= 2 * (elements removed + inserted + changed) + 2 * (elements moved)
 *
 * (a change inside an element is one replace of the field; a move is a remove and an insert).
 * Seed: STATEFOLD_TEST_SEED (default 1).
 */
const SEED = Number(process.env.STATEFOLD_TEST_SEED ?? 1);

type Element = { id: number; text: string } | { text: string } | number | string;
type State = { items: Element[]; other: { n: number } };

/** One edit of the array, with how many elements it touches. */
type Edit =
  | { kind: 'splice'; at: number; remove: number; insert: number }
  | { kind: 'shift'; count: number }
  | { kind: 'push'; count: number }
  | { kind: 'unshift'; count: number }
  | { kind: 'move'; from: number; to: number }
  | { kind: 'change'; at: number };

const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ kind: fc.constant('splice' as const), at: fc.nat(60), remove: fc.nat(3), insert: fc.nat(3) }),
  fc.record({ kind: fc.constant('shift' as const), count: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('push' as const), count: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('unshift' as const), count: fc.integer({ min: 1, max: 2 }) }),
  fc.record({ kind: fc.constant('move' as const), from: fc.nat(60), to: fc.nat(60) }),
  fc.record({ kind: fc.constant('change' as const), at: fc.nat(60) }),
);

type Shape = 'with ids' | 'without ids' | 'primitives';

/** Applies `e` immutably (untouched elements keep their references); returns the array and the elements it touched. */
function apply(
  items: readonly Element[],
  e: Edit,
  make: () => Element,
  change: (x: Element) => Element,
): { items: Element[]; touched: number } {
  const out = [...items];
  switch (e.kind) {
    case 'splice': {
      const at = Math.min(e.at, out.length);
      const removed = out.splice(at, e.remove, ...Array.from({ length: e.insert }, make)).length;
      return { items: out, touched: removed + e.insert };
    }
    case 'shift':
      return { items: out.slice(Math.min(e.count, out.length)), touched: Math.min(e.count, out.length) };
    case 'push':
      return { items: [...out, ...Array.from({ length: e.count }, make)], touched: e.count };
    case 'unshift':
      return { items: [...Array.from({ length: e.count }, make), ...out], touched: e.count };
    case 'move': {
      if (out.length === 0) return { items: out, touched: 0 };
      const [x] = out.splice(e.from % out.length, 1);
      out.splice(e.to % (out.length + 1), 0, x!);
      return { items: out, touched: 2 };
    }
    case 'change': {
      if (out.length === 0) return { items: out, touched: 0 };
      const at = e.at % out.length;
      out[at] = change(out[at]!);
      return { items: out, touched: 1 };
    }
  }
}

function element(shape: Shape, n: number): Element {
  if (shape === 'primitives') return n % 2 === 0 ? n : `s${n}`;
  // Texts share a long common part, as messages do, so that a shifted element rarely equals its neighbour by accident.
  const text = `message ${n}: ${'lorem ipsum '.repeat(3)}`;
  return shape === 'with ids' ? { id: n, text } : { text };
}

function changed(shape: Shape, x: Element, n: number): Element {
  if (shape === 'primitives') return typeof x === 'number' ? x + 0.5 : `${String(x)}!`;
  return { ...(x as object), text: `changed ${n}` } as Element;
}

for (const updates of ['copy', 'immutable'] as const) {
  for (const shape of ['with ids', 'without ids', 'primitives'] as const) {
    describe(`arrays (${updates}, elements ${shape})`, () => {
      it('restores every checkpoint exactly and writes ops bounded by the elements touched', async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.integer({ min: 0, max: 40 }),
            fc.array(fc.array(edit, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 12 }),
            async (size, steps) => {
              let counter = 0;
              const make = (): Element => element(shape, ++counter);
              const store = new MemoryStore();
              const engine = await SnapshotEngine.open<State>({
                store,
                stream: 's',
                updates,
                policy: { baseEvery: 1000, maxDeltaRatio: Infinity },
              });
              let state: State = { items: Array.from({ length: size }, make), other: { n: 0 } };
              const reference: string[] = [];
              await engine.checkpoint(state);
              reference.push(JSON.stringify(state));
              for (const step of steps) {
                let items = state.items;
                let touched = 0;
                for (const e of step) {
                  const r = apply(items, e, make, (x) => changed(shape, x, ++counter));
                  items = r.items;
                  touched += r.touched;
                }
                state = { items, other: state.other };
                const info = await engine.checkpoint(state);
                reference.push(JSON.stringify(state));
                expect(info.kind).toBe('delta');
                expect(info.ops, `ops for ${JSON.stringify(step)} on ${size} elements`).toBeLessThanOrEqual(
                  2 * touched,
                );
              }
              await engine.close();
              for (let seq = 1; seq <= reference.length; seq++) {
                expect(JSON.stringify((await restore(store, 's', { seq })).state), `seq ${seq}`).toBe(
                  reference[seq - 1],
                );
              }
            },
          ),
          { seed: SEED, numRuns: 60 },
        );
      });
    });
  }
}

describe('arrays: a sliding context window', () => {
  for (const updates of ['copy', 'immutable'] as const) {
    it(`stores one remove and one add per step when the oldest message drops and the newest arrives (${updates})`, async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open<{ messages: { role: string; text: string }[] }>({
        store,
        stream: 'w',
        updates,
        // Bases only on count, far apart: this is about the deltas.
        policy: { baseEvery: 1000, maxDeltaRatio: Infinity },
      });
      let messages = Array.from({ length: 60 }, (_, i) => ({
        role: i % 2 ? 'assistant' : 'user',
        text: `turn ${i}: ${'x'.repeat(200)}`,
      }));
      await engine.checkpoint({ messages });
      let added = 0;
      for (let step = 60; step < 100; step++) {
        const next = { role: step % 2 ? 'assistant' : 'user', text: `turn ${step}: ${'y'.repeat(200)}` };
        messages = [...messages.slice(1), next];
        const info = await engine.checkpoint({ messages });
        expect(info.kind, `step ${step}`).toBe('delta');
        expect(info.ops, `step ${step}`).toBe(2);
        added = JSON.stringify(next).length;
        // The delta holds the new message and little else: not the 59 that shifted.
        expect(info.bytes, `step ${step}`).toBeLessThan(added + 200);
      }
      await engine.close();
      expect((await restore(store, 'w')).state).toEqual({ messages });
    });
  }
});

describe('arrays: cost stays linear in depth', () => {
  for (const updates of ['copy', 'immutable'] as const) {
    it(`reads a changed leaf under 20 nested arrays a bounded number of times (${updates})`, async () => {
      // Each read of the leaf's getter is one visit; comparing each array level several times
      // over, recursively, would read it 3^20 times.
      let reads = 0;
      const leaf = (value: number): object => ({
        get n(): number {
          reads++;
          return value;
        },
      });
      const nest = (inner: unknown): unknown => {
        let v = inner;
        for (let i = 0; i < 20; i++) v = [v, 'x'];
        return v;
      };
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open({ store, stream: 'deep', updates });
      await engine.checkpoint({ t: nest(leaf(0)) });
      reads = 0;
      const info = await engine.checkpoint({ t: nest(leaf(1)) });
      expect(info.ops).toBe(1);
      // A few reads per level (prefix, suffix, matching, then the diff one level down), not 3^20.
      expect(reads).toBeLessThanOrEqual(5 * 20);
      await engine.close();
    });
  }
});

describe('arrays: copy mode takes an unchanged kept element as captured, and only that', () => {
  it('stores every in-place change inside elements the window slides past (-0, undefined, Date, bytes, nested)', async () => {
    type Msg = { id: number; body: { n: number; tags: string[]; at: Date; raw: Uint8Array; note?: string } };
    const make = (id: number): Msg => ({
      id,
      body: { n: 0, tags: ['a', 'b'], at: new Date(1_000 * id), raw: Uint8Array.of(id, 1, 2), note: `m${id}` },
    });
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open<{ messages: Msg[] }>({
      store,
      stream: 'kept',
      policy: { baseEvery: 1000, maxDeltaRatio: Infinity },
    });
    const state = { messages: Array.from({ length: 12 }, (_, i) => make(i)) };
    await engine.checkpoint(state);
    // Each step slides the window by one and changes one element it keeps, in place, one way each.
    const changes: ((m: Msg) => void)[] = [
      (m) => (m.body.n = -0),
      (m) => (m.body.note = undefined),
      (m) => m.body.at.setTime(m.body.at.getTime() + 1),
      (m) => (m.body.raw[1] = 99),
      (m) => m.body.tags.push('c'),
      (m) => (m.body.tags[0] = 'z'),
    ];
    const expected: { n: number; note: string | undefined; at: number; raw: number[]; tags: string[] }[][] = [];
    for (let step = 0; step < changes.length; step++) {
      state.messages.shift();
      state.messages.push(make(100 + step));
      changes[step]!(state.messages[5]!);
      const info = await engine.checkpoint(state);
      expect(info.kind, `step ${step}`).toBe('delta');
      expected.push(
        state.messages.map((m) => ({
          n: m.body.n,
          note: m.body.note,
          at: m.body.at.getTime(),
          raw: [...m.body.raw],
          tags: [...m.body.tags],
        })),
      );
    }
    await engine.close();
    for (let step = 0; step < changes.length; step++) {
      const restored = (await restore<{ messages: Msg[] }>(store, 'kept', { seq: step + 2 })).state;
      const got = restored.messages.map((m) => ({
        n: m.body.n,
        note: m.body.note,
        at: m.body.at.getTime(),
        raw: [...m.body.raw],
        tags: [...m.body.tags],
      }));
      expect(got, `seq ${step + 2}`).toEqual(expected[step]);
      // -0 survives as -0 (toEqual alone would not tell it from 0).
      expect(
        got.map((m) => Object.is(m.n, -0)),
        `seq ${step + 2}`,
      ).toEqual(expected[step]!.map((m) => Object.is(m.n, -0)));
    }
  });
});
