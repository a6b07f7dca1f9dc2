/**
 * What content-addressed chunks (docs/design/content-addressed-values.md, not built) would store,
 * per threshold, simulated on the coding workload with today's engine: every string of at least
 * T characters in each state is replaced by a 45-character reference (as the design's reference
 * would be), and counted once per distinct content as a chunk of its lz4 size plus 100 bytes (the
 * chunk frame's header and key, the note's estimate). Bytes only, no timing: it measures what the
 * threshold sweep of the note's section 7 starts from. Without T the ratio trigger is on, as
 * today; with T it is off (the note counts a base's chunks in its size, which a simulation that
 * swaps strings for references cannot: bases would come every few seqs). `--no-ratio` also turns it
 * off for T = Infinity, to compare like with like.
 *
 *   node bench/start.mjs bench/chunk-sim.ts [--size BYTES] [--steps N] [--thresholds T,...] [--no-ratio]
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import lz4 from 'lz4';
import { MemoryStore, SnapshotEngine, listCheckpoints } from 'statefold';
import { Agent } from './workload.js';
import { makeWorkload } from './workloads.js';

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: String(500 * 1024) },
    steps: { type: 'string', default: '320' },
    thresholds: { type: 'string', default: 'Infinity,16384,4096,2048,1024,512,256' },
    'no-ratio': { type: 'boolean', default: false },
  },
});
const size = Number(values.size);
const steps = Number(values.steps);
const thresholds = values.thresholds.split(',').map(Number);
/** A reference in the payload (tag, generation, 32-byte name), and a chunk's header and key, bytes. */
const REFERENCE = 45;
const CHUNK_OVERHEAD = 100;

/** lz4 block size of `text`, or its own size when lz4 does not make it smaller (kept raw then). */
function storedSize(text: string): number {
  const input = Buffer.from(text, 'utf8');
  const out = Buffer.alloc(lz4.encodeBound(input.length));
  const n = lz4.encodeBlock(input, out);
  return n > 0 && n < input.length ? n : input.length;
}

console.log(`coding workload, ${size} bytes, ${steps} checkpoints after the first, a checkpoint per step`);
for (const T of thresholds) {
  const agent = new Agent('immutable', makeWorkload('coding', size, 0.01, 1));
  const store = new MemoryStore();
  const ratioOff = T !== Infinity || values['no-ratio'];
  const engine = await SnapshotEngine.open({
    store,
    stream: 'sim',
    ...(ratioOff && { policy: { maxDeltaRatio: 1e9 } }),
  });
  const chunks = new Map<string, number>();
  let references = 0;
  const swap = (v: unknown): unknown => {
    if (typeof v === 'string') {
      if (v.length < T) return v;
      const name = createHash('sha256').update(v).digest('hex');
      if (!chunks.has(name)) chunks.set(name, storedSize(v) + CHUNK_OVERHEAD);
      references++;
      return `\u0000${name}`.slice(0, REFERENCE);
    }
    if (Array.isArray(v)) return v.map(swap);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, swap(x)]));
    return v;
  };
  const sum = (xs: Iterable<number>) => [...xs].reduce((a, b) => a + b, 0);
  // The first checkpoint (the initial state) is not counted: what is measured is what the steps cost.
  await engine.checkpoint(swap(agent.state) as object);
  const start = { added: agent.addedBytes, chunks: sum(chunks.values()), chunkCount: chunks.size };
  const stored = async () => (await listCheckpoints(store, 'sim')).filter((e) => !e.damaged);
  const first = sum((await stored()).map((e) => e.bytes));
  let bases = 0;
  for (let i = 0; i < steps; i++) if ((await engine.checkpoint(swap(agent.step()) as object)).kind !== 'delta') bases++;
  await engine.close();
  const entries = await stored();
  const frames = sum(entries.map((e) => e.bytes)) - first;
  const baseBytes = sum(entries.filter((e) => e.kind === 'base' && e.seq > 1).map((e) => e.bytes));
  const chunkBytes = sum(chunks.values()) - start.chunks;
  const added = agent.addedBytes - start.added;
  const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;
  console.log(
    [
      `T ${String(T).padStart(8)}${ratioOff ? '' : ' (ratio trigger on)'}`,
      `all stored / added ${((frames + chunkBytes) / added).toFixed(2)}x`,
      `frames ${kb(frames)} (bases ${kb(baseBytes)}, ${bases} bases)`,
      `chunks ${kb(chunkBytes)} (${((chunks.size - start.chunkCount) / steps).toFixed(2)} new per checkpoint)`,
      `added ${kb(added)}`,
      `references per checkpoint ${(references / (steps + 1)).toFixed(0)}`,
    ].join(', '),
  );
}
