import { spawnSync } from 'node:child_process';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, restore } from 'statefold';
// Internals, from the build the tests run against: the sliced encoder and the frame worker have no public entry.
import { assembleFrame } from '../../dist/engine/format/assemble.js';
import { OFFLOAD_MIN_BYTES, assembleFrameAsync } from '../../dist/engine/format/offload.js';
import { encodeValueInSlices } from '../../dist/engine/format/sliced.js';
import { encodeValue } from '../../dist/engine/format/values.js';
import { firstDifference } from '../support/same.js';
import { tempDir } from '../support/stores.js';

/**
 * Large bases are encoded in slices (yielding to the event loop) and assembled on a worker thread.
 * Neither may change a stored byte: the sliced encoding must equal the one-piece encoding, and a
 * frame built on the worker must equal the frame built on the calling thread.
 */
const SEED = Number(process.env.STATEFOLD_TEST_SEED ?? 1);

const KEYS = ['a', 'b', 'msg', '__proto__', 'constructor', '', 'x/y', 'é', '0', 'content', 'id'];
type V = unknown;
// Strings long enough that containers pass the 16 KB runs the encoder splits at, and every kind of leaf the codec tags.
const leaf: fc.Arbitrary<V> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.double(),
  fc.constantFrom(-0, NaN, 2 ** 53, 'a\ud800b'),
  fc.string({ maxLength: 8 }),
  fc.nat({ max: 40_000 }).map((n) => 'x'.repeat(n)),
  fc.date({ noInvalidDate: false }),
  fc.array(fc.float(), { maxLength: 4 }).map((a) => new Float32Array(a)),
);
const { tree } = fc.letrec<{ tree: V; node: V }>((tie) => ({
  tree: fc.oneof({ depthSize: 'small' }, leaf, tie('node')),
  node: fc.oneof(
    fc.array(tie('tree'), { maxLength: 40 }),
    fc.array(fc.tuple(fc.constantFrom(...KEYS), tie('tree')), { maxLength: 20 }).map((entries) => {
      const obj: Record<string, V> = {};
      for (const [k, v] of entries)
        Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
      return obj;
    }),
  ),
}));

describe('encoding in slices', () => {
  it('gives the same bytes as encoding in one piece, for any value (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(tree, async (v) => {
        const whole = Buffer.from(encodeValue(v));
        const sliced = Buffer.from(await encodeValueInSlices(v));
        expect(sliced.equals(whole)).toBe(true);
      }),
      { seed: SEED, numRuns: 150 },
    );
  });

  it('splits big containers, maps with 16 and 65,536 entries and arrays of every header size', async () => {
    const wide: Record<string, string> = {};
    for (let i = 0; i < 70_000; i++) wide[`k${i}`] = 'v'.repeat(i % 50);
    for (const v of [
      wide,
      Array.from({ length: 70_000 }, (_, i) => ({ i, text: 'word '.repeat(i % 20) })),
      { big: 'y'.repeat(100_000), list: Array.from({ length: 15 }, () => 'z'.repeat(3000)), n: 1 },
      [Array.from({ length: 16 }, () => 'q'.repeat(2000)), new Float64Array(5000)],
    ]) {
      expect(Buffer.from(await encodeValueInSlices(v)).equals(Buffer.from(encodeValue(v)))).toBe(true);
    }
  });

  it('lets the event loop run while it encodes a large value', async () => {
    const state = Array.from({ length: 20_000 }, (_, i) => ({ id: i, body: 'lorem ipsum '.repeat(40) }));
    let turns = 0;
    let encoding = true;
    const ticker = (async () => {
      while (encoding) {
        await nextTurn();
        turns++;
      }
    })();
    const bytes = await encodeValueInSlices(state);
    encoding = false;
    await ticker;
    // About 10 MB: far more than one 0.5 ms slice on any machine, so other turns ran in between.
    expect(bytes.byteLength).toBeGreaterThan(9_000_000);
    expect(turns).toBeGreaterThan(1);
  });
});

describe('the frame worker', () => {
  it('builds the same frame as the calling thread, for payloads above and below the offload size', async () => {
    const head = encodeValue({ s: 'stream', q: 1 });
    for (const size of [10, OFFLOAD_MIN_BYTES - 1, OFFLOAD_MIN_BYTES, 3_000_000]) {
      const raw = Buffer.alloc(size);
      for (let i = 0; i < size; i++) raw[i] = (i * 7) % 13 === 0 ? i & 0xff : 65;
      const frames = await Promise.all([1, 2, 3].map(() => assembleFrameAsync(1, 1, head, raw)));
      for (const frame of frames)
        expect(Buffer.from(frame).equals(Buffer.from(assembleFrame(1, 1, head, raw)))).toBe(true);
    }
  });

  it('leaves the caller its payload intact (the worker gets a copy)', async () => {
    const raw = Buffer.alloc(OFFLOAD_MIN_BYTES * 2, 7);
    await assembleFrameAsync(1, 1, encodeValue({}), raw);
    expect(raw.byteLength).toBe(OFFLOAD_MIN_BYTES * 2);
    expect(raw.every((b) => b === 7)).toBe(true);
  });

  it('restores large bases written by many engines at once', async () => {
    const store = new MemoryStore();
    const states = [0, 1, 2, 3, 4, 5].map((n) => ({
      n,
      docs: Array.from({ length: 400 }, (_, i) => ({ i, text: `doc ${n}/${i} `.repeat(60) })),
      embedding: new Float32Array(20_000).map((_, i) => Math.sin(i + n)),
    }));
    const engines = await Promise.all(states.map((_, n) => SnapshotEngine.open({ store, stream: `s${n}` })));
    const infos = await Promise.all(engines.map((e, n) => e.checkpoint(states[n])));
    for (const info of infos) expect(info.bytes).toBeGreaterThan(OFFLOAD_MIN_BYTES);
    await Promise.all(engines.map((e) => e.close()));
    for (let n = 0; n < states.length; n++)
      expect(firstDifference((await restore(store, `s${n}`)).state, states[n])).toBeUndefined();
  });

  it('does not keep a process alive, and a process that awaits a large checkpoint waits for it', async () => {
    const dir = await tempDir();
    const index = fileURLToPath(new URL('../../dist/engine/index.js', import.meta.url));
    const script = `
      import { FileStore, SnapshotEngine, restore } from ${JSON.stringify(index)};
      const store = new FileStore({ dir: ${JSON.stringify(dir)} });
      const engine = await SnapshotEngine.open({ store, stream: 'a' });
      const state = { text: Array.from({ length: 2000 }, (_, i) => 'line ' + i), samples: new Float64Array(20000).map((_, i) => Math.sin(i)) };
      // Not closed on purpose: the top-level await alone must keep the process running until the base is stored.
      const info = await engine.checkpoint(state);
      const back = await restore(store, 'a');
      console.log(JSON.stringify({ kind: info.kind, bytes: info.bytes, same: back.state.samples.every((x, i) => x === state.samples[i]) && back.state.text.join() === state.text.join() }));
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const out = JSON.parse(child.stdout.trim()) as { kind: string; bytes: number; same: boolean };
    expect(out).toMatchObject({ kind: 'base', same: true });
    expect(out.bytes).toBeGreaterThan(OFFLOAD_MIN_BYTES);
  });
});
