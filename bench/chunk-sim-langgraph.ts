/**
 * chunk-sim.ts's simulation on the LangGraph bench graph (bench/langgraph.ts): StatefoldSaver on a
 * MemoryStore, the graph run as the bench runs it, with a serializer that swaps every string of at
 * least T characters in what LangGraph serializes (channel values, pending writes) for a
 * 45-character reference and counts each distinct content once as a chunk (lz4 size + 100 bytes).
 * Bytes only. Stored objects (frames, hints, index objects) plus chunks, against T = Infinity.
 *
 * `--no-ratio` turns the base ratio trigger off (the design counts a base's chunks in its size for
 * it, which this cannot).
 *
 *   node bench/start.mjs bench/chunk-sim-langgraph.ts [--size BYTES] [--thresholds T,...] [--no-ratio]
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { HumanMessage } from '@langchain/core/messages';
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import lz4 from 'lz4';
import { MemoryStore, listCheckpoints, listStreams } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { agent, corpus } from './langgraph.js';

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '50000' },
    thresholds: { type: 'string', default: 'Infinity,4096,2048,1024,512' },
    'no-ratio': { type: 'boolean', default: false },
  },
});
const size = Number(values.size);
/** As the bench: 55 tool calls, each result size / 20 bytes of real text. */
const TOOL_CALLS = 55;
const RESULT_BYTES = Math.round(size / 20);

function storedSize(text: string): number {
  const input = Buffer.from(text, 'utf8');
  const out = Buffer.alloc(lz4.encodeBound(input.length));
  const n = lz4.encodeBlock(input, out);
  return n > 0 && n < input.length ? n : input.length;
}

/**
 * Swaps every string of at least `min` characters in what LangGraph's serializer writes for a
 * reference, counting each distinct content once in `chunks`. Patched onto JsonPlusSerializer's
 * prototype (this process only), not a subclass: the saver serializes a message list item by item,
 * and so diffs it message by message, only under JsonPlusSerializer itself (codec.ts,
 * dumpsItemwise); a subclass would store each list whole and measure something else.
 */
const chunks = new Map<string, number>();
let min = Infinity;
const dumpsTyped = JsonPlusSerializer.prototype.dumpsTyped;
JsonPlusSerializer.prototype.dumpsTyped = async function (obj: unknown): Promise<[string, Uint8Array]> {
  const [type, bytes] = await dumpsTyped.call(this, obj);
  if (type !== 'json' || min === Infinity) return [type, bytes];
  const swap = (v: unknown): unknown => {
    if (typeof v === 'string') {
      if (v.length < min) return v;
      const name = createHash('sha256').update(v).digest('hex');
      if (!chunks.has(name)) chunks.set(name, storedSize(v) + 100);
      return `\u0000${name}`.slice(0, 45);
    }
    if (Array.isArray(v)) return v.map(swap);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, swap(x)]));
    return v;
  };
  return [type, new TextEncoder().encode(JSON.stringify(swap(JSON.parse(new TextDecoder().decode(bytes)))))];
};

const texts = corpus();
console.log(`LangGraph bench graph, ${size} B state, ${TOOL_CALLS} tool calls of ${RESULT_BYTES} B`);
for (const t of values.thresholds.split(',').map(Number)) {
  min = t;
  chunks.clear();
  const store = new MemoryStore();
  const saver = new StatefoldSaver({ store, ...(values['no-ratio'] && { policy: { maxDeltaRatio: 1e9 } }) });
  const graph = agent(saver, texts, TOOL_CALLS, RESULT_BYTES);
  await graph.invoke(
    { messages: [new HumanMessage({ id: 'question', content: 'Read the files.' })] },
    { configurable: { thread_id: 'sim' }, recursionLimit: 4 * TOOL_CALLS + 10, durability: 'sync' },
  );
  await saver.close();
  let frames = 0;
  let checkpoints = 0;
  for (const stream of await listStreams(store))
    for (const e of await listCheckpoints(store, stream))
      if (!e.damaged) {
        frames += e.bytes;
        checkpoints++;
      }
  const chunkBytes = [...chunks.values()].reduce((a, b) => a + b, 0);
  const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;
  console.log(
    `T ${String(min).padStart(8)}: frames ${kb(frames)} (${checkpoints} checkpoints) + chunks ${kb(chunkBytes)} (${chunks.size}) = ${kb(frames + chunkBytes)}`,
  );
}
