import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, listCheckpoints, restore } from 'statefold';
import { firstDifference } from '../support/same.js';
import { verified } from '../support/checkpoints.js';

/**
 * Seeded property tests: random states changed by random steps, checkpoints at random points,
 * random base cadence; restoring every seq must equal the state captured at that seq, compared
 * with a reference that keeps full copies. fast-check prints the seed and path of a failure.
 * Seed: STATEFOLD_TEST_SEED (default 1).
 */
const SEED = Number(process.env.STATEFOLD_TEST_SEED ?? 1);

type Json =
  null | boolean | number | string | Date | Float32Array | Float64Array | Uint8Array | Json[] | { [k: string]: Json };

const KEYS = ['a', 'b', 'msg', '__proto__', 'constructor', '', 'x/y', 'm~n', '~1', 'toString', 'é', '0'];

const leaf: fc.Arbitrary<Json> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer({ min: -1000, max: 1000 }),
  fc.double(),
  fc.constantFrom(-0, NaN, Infinity, -Infinity, 2 ** 53, -(2 ** 60)),
  fc.string({ maxLength: 12 }),
  fc.date({ noInvalidDate: false }),
  fc.array(fc.float({ noDefaultInfinity: false }), { maxLength: 6 }).map((a) => new Float32Array(a)),
  fc.array(fc.double(), { maxLength: 4 }).map((a) => new Float64Array(a)),
  fc.uint8Array({ maxLength: 8 }),
);

const { tree } = fc.letrec<{ tree: Json; node: Json }>((tie) => ({
  tree: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('node')),
  node: fc.oneof(
    fc.array(tie('tree'), { maxLength: 4 }),
    fc.dictionary(fc.constantFrom(...KEYS), tie('tree'), { maxKeys: 4 }).map(toPlain),
  ),
}));

/** fast-check's dictionary may build objects whose __proto__ key set a prototype: rebuild as own data. */
function toPlain(d: Record<string, Json>): { [k: string]: Json } {
  const out: { [k: string]: Json } = {};
  for (const k of Object.keys(d))
    Object.defineProperty(out, k, { value: d[k], enumerable: true, writable: true, configurable: true });
  return out;
}

/** A step: where to go (a list of choices, resolved against the current shape) and what to do there. */
interface Step {
  path: number[];
  action: 'set' | 'delete' | 'push' | 'splice' | 'leafEdit' | 'replaceRoot';
  key: string;
  value: Json;
  n: number;
  checkpoint: boolean;
}

const step: fc.Arbitrary<Step> = fc.record({
  path: fc.array(fc.nat(), { maxLength: 5 }),
  action: fc.constantFrom('set', 'set', 'delete', 'push', 'splice', 'leafEdit', 'replaceRoot'),
  key: fc.constantFrom(...KEYS),
  value: tree,
  n: fc.nat(),
  checkpoint: fc.boolean(),
});

function isContainer(v: unknown): v is Json[] | { [k: string]: Json } {
  return typeof v === 'object' && v !== null && !(v instanceof Date) && !ArrayBuffer.isView(v);
}

/** Deep copy that keeps every type and -0 (the reference of what was captured). */
function copy<T>(v: T): T {
  if (v instanceof Date) return new Date(v.getTime()) as T;
  if (ArrayBuffer.isView(v)) return (v as unknown as Float32Array).slice() as T;
  if (Array.isArray(v)) return v.map(copy) as T;
  if (isContainer(v)) {
    const out: Record<string, Json> = {};
    for (const k of Object.keys(v))
      Object.defineProperty(out, k, {
        value: copy((v as Record<string, Json>)[k]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out as T;
  }
  return v;
}

function setKey(obj: Record<string, Json>, key: string, value: Json): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Applies a step to `root` in place (copy mode) and returns the new root. */
function mutate(root: Json, s: Step): Json {
  if (s.action === 'replaceRoot') return copy(s.value);
  // Walk down to a container chosen by the path.
  let node: Json = root;
  for (const choice of s.path) {
    if (!isContainer(node)) break;
    const keys = Array.isArray(node) ? node.map((_, i) => i) : Object.keys(node);
    const children = keys.filter((k) => isContainer((node as Record<string, Json>)[k as string]));
    if (children.length === 0) break;
    node = (node as Record<string, Json>)[children[choice % children.length] as string]!;
  }
  if (!isContainer(node)) return root;
  if (s.action === 'leafEdit') {
    const values = Array.isArray(node) ? node : Object.values(node);
    const target = values.find((v) => v instanceof Date || ArrayBuffer.isView(v));
    if (target instanceof Date) target.setTime(target.getTime() + 1 + s.n);
    else if (target && (target as Uint8Array).length > 0)
      (target as Uint8Array)[s.n % (target as Uint8Array).length] = (s.n % 200) + 1;
    return root;
  }
  if (Array.isArray(node)) {
    if (s.action === 'push') node.push(copy(s.value));
    else if (s.action === 'splice') node.splice(s.n % (node.length + 1), s.n % 3, ...(s.n % 2 ? [copy(s.value)] : []));
    else if (s.action === 'delete') node.pop();
    else if (node.length > 0) node[s.n % node.length] = copy(s.value);
    else node.push(copy(s.value));
  } else {
    if (s.action === 'delete') delete node[s.key];
    else setKey(node, s.key, copy(s.value));
  }
  return root;
}

/** Applies a step immutably: copies every container on the path, shares the rest. */
function update(root: Json, s: Step): Json {
  // Reuse mutate on a path-copied root: copy containers along the chosen path first.
  if (s.action === 'replaceRoot') return copy(s.value);
  const shallow = (v: Json): Json =>
    Array.isArray(v) ? [...v] : isContainer(v) ? toPlain(v as Record<string, Json>) : v;
  const newRoot = shallow(root);
  let node: Json = newRoot;
  for (const choice of s.path) {
    if (!isContainer(node)) break;
    const keys = Array.isArray(node) ? node.map((_, i) => i) : Object.keys(node);
    const children = keys.filter((k) => isContainer((node as Record<string, Json>)[k as string]));
    if (children.length === 0) break;
    const k = children[choice % children.length] as string;
    const child = shallow((node as Record<string, Json>)[k]!);
    if (Array.isArray(node)) (node as Json[])[k as unknown as number] = child;
    else setKey(node as Record<string, Json>, k, child);
    node = child;
  }
  if (s.action === 'leafEdit') {
    // Half the time replace the leaf properly; half the time edit it in place (still must be seen).
    if (!isContainer(node)) return newRoot;
    const entries = Array.isArray(node) ? node.map((v, i) => [i, v] as const) : Object.entries(node);
    const found = entries.find(([, v]) => v instanceof Date || ArrayBuffer.isView(v));
    if (!found) return newRoot;
    const [k, target] = found;
    const replacement = s.n % 2 ? copy(target) : target;
    if (replacement instanceof Date) replacement.setTime(replacement.getTime() + 1 + s.n);
    else if ((replacement as Uint8Array).length > 0)
      (replacement as Uint8Array)[s.n % (replacement as Uint8Array).length] = (s.n % 200) + 1;
    if (Array.isArray(node)) node[k as number] = replacement;
    else setKey(node as Record<string, Json>, k as string, replacement);
    return newRoot;
  }
  // Containers on the path are fresh copies, so mutate can work on them without touching shared ones.
  return mutateAt(newRoot, node, s);
}

function mutateAt(root: Json, node: Json, s: Step): Json {
  if (!isContainer(node)) return root;
  const fresh = (v: Json): Json => copy(v);
  if (Array.isArray(node)) {
    if (s.action === 'push') node.push(fresh(s.value));
    else if (s.action === 'splice') node.splice(s.n % (node.length + 1), s.n % 3, ...(s.n % 2 ? [fresh(s.value)] : []));
    else if (s.action === 'delete') node.pop();
    else if (node.length > 0) node[s.n % node.length] = fresh(s.value);
    else node.push(fresh(s.value));
  } else if (s.action === 'delete') delete (node as Record<string, Json>)[s.key];
  else setKey(node as Record<string, Json>, s.key, fresh(s.value));
  return root;
}

async function runScenario(
  updates: 'copy' | 'immutable',
  initial: Json,
  steps: Step[],
  baseEvery: number,
  maxDeltaRatio: number,
): Promise<void> {
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open({ store, stream: 'prop', updates, policy: { baseEvery, maxDeltaRatio } });
  const expected = new Map<number, Json>();
  let state = copy(initial);
  const infos = [];
  infos.push(engine.checkpoint(state));
  expected.set(1, copy(state));
  let seq = 1;
  for (const s of steps) {
    state = updates === 'copy' ? mutate(state, s) : update(state, s);
    if (s.checkpoint) {
      infos.push(engine.checkpoint(state, { meta: { seq: seq + 1 } }));
      expected.set(++seq, copy(state));
    }
  }
  const done = await Promise.all(infos);
  expect(done.map((i) => i.seq)).toEqual(Array.from({ length: seq }, (_, i) => i + 1));
  await engine.close();
  for (const [s, want] of expected) {
    const got = await restore(store, 'prop', { seq: s });
    expect(firstDifference(got.state, want), `seq ${s}`).toBeUndefined();
  }
  const list = verified(await listCheckpoints(store, 'prop'));
  expect(list.map((c) => c.seq)).toEqual([...expected.keys()]);
  // Every chain is at most baseEvery long.
  for (const c of list) expect(c.seq - c.base).toBeLessThan(baseEvery);
  // A reopened engine continues from the last state.
  const again = await SnapshotEngine.open({ store, stream: 'prop', updates });
  expect(again.seq).toBe(seq);
  expect(firstDifference(again.state, expected.get(seq))).toBeUndefined();
  await again.close();
}

for (const updates of ['copy', 'immutable'] as const) {
  describe(`property (${updates} updates): every seq restores to the state captured at that seq`, () => {
    it('holds for random states, random steps and random base cadence', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(tree, fc.dictionary(fc.constantFrom(...KEYS), tree).map(toPlain)),
          fc.array(step, { maxLength: 40 }),
          fc.integer({ min: 1, max: 6 }),
          fc.constantFrom(0.25, 1, Infinity),
          async (initial, steps, baseEvery, ratio) => runScenario(updates, initial, steps, baseEvery, ratio),
        ),
        { numRuns: 300, seed: SEED },
      );
    }, 120_000);
  });
}
