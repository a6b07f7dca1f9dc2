/** The report's section on LangGraph savers side by side (bench/langgraph.ts). */
import type { LangGraphResult, LangGraphRun, SaverId } from './langgraph.js';
import { bytes, ms, table } from './stats.js';

const NAMES: Record<SaverId, string> = {
  'statefold-file': 'StatefoldSaver, FileStore',
  'statefold-memory': 'StatefoldSaver, MemoryStore',
  memory: 'MemorySaver',
  sqlite: 'SqliteSaver (default)',
  'sqlite-full': 'SqliteSaver, synchronous=FULL',
  postgres: 'PostgresSaver',
};

/** Whether a committed put survives a power loss, per saver. */
const DURABLE: Record<SaverId, string> = {
  'statefold-file': 'yes (fsync of file and directory)',
  'statefold-memory': 'no (process memory)',
  memory: 'no (process memory)',
  sqlite: 'no (WAL, synchronous=NORMAL: no fsync per commit)',
  'sqlite-full': 'yes (WAL fsync per commit)',
  postgres: 'yes (fsync, synchronous_commit on)',
};

const spread = (s: { p50: number; q1: number; q3: number }): string => `${ms(s.p50)} (${ms(s.q1)}–${ms(s.q3)})`;

export function langgraphSection(result: LangGraphResult | undefined): string[] {
  if (result === undefined || result.runs.length === 0) return [];
  const out: string[] = ['## LangGraph savers side by side', ''];
  const first = result.runs[0]!;
  out.push(
    `One real LangGraph JS graph (\`StateGraph(MessagesAnnotation)\`, a fake model node and a \`ToolNode\`), run once per saver on its own storage: the model asks for ${first.toolCalls} files one after the other, the tool returns real text from the files under node_modules, and the model keeps a context window of 40 messages (it removes the oldest call and result with \`RemoveMessage\`), so the state stays near its nominal size after the first 20 reads. \`durability: 'sync'\`: each step waits for its checkpoint. Put: from the saver's \`put\` call until its promise resolves; putWrites likewise. Reads: a new saver instance on the same storage (a new process or replica would see this; MemorySaver: the same instance), ${'getTuple'} of the latest checkpoint and of the one 100 puts back, 15 times each, median (interquartile range). Bytes: what the storage holds after the run — statefold: the sum of its stored objects; MemorySaver: every serialized checkpoint, metadata and write it keeps; SQLite: the database file and its WAL; PostgreSQL: \`pg_total_relation_size\` of its tables (TOAST compresses large values with pglz). Savers run in a different order at each size.`,
  );
  out.push('');
  out.push(
    `Durability differs: ${Object.entries(DURABLE)
      .filter(([id]) => result.runs.some((r) => r.saver === id))
      .map(([id, d]) => `${NAMES[id as SaverId]}: ${d}`)
      .join('; ')}.`,
  );
  if (result.postgresSkipped) out.push('', `PostgresSaver did not run: ${result.postgresSkipped}.`);
  for (const size of [...new Set(result.runs.map((r) => r.size))]) {
    const runs = result.runs.filter((r) => r.size === size).sort((a, b) => order(a) - order(b));
    const sf = runs.find((r) => r.saver === 'statefold-file');
    out.push('');
    out.push(`### ${bytes(size)} state (${bytes(runs[0]!.stateBytes)} of channel values as JSON at the end)`);
    out.push('');
    out.push(
      table(
        [
          'saver',
          'checkpoints',
          'bytes stored',
          'vs statefold file',
          'put p50 / p99 ms',
          'putWrites p50 ms',
          'getTuple latest ms',
          'getTuple 100 back ms',
          'run s',
        ],
        runs.map((r: LangGraphRun) => [
          NAMES[r.saver],
          String(r.checkpoints),
          bytes(r.bytes),
          sf ? `${(r.bytes / sf.bytes).toFixed(r.bytes / sf.bytes >= 10 ? 0 : 2)}×` : '–',
          `${ms(r.put.p50)} / ${ms(r.put.p99)}`,
          ms(r.putWrites.p50),
          spread(r.latest),
          spread(r.back100),
          (r.runMs / 1000).toFixed(2),
        ]),
      ),
    );
  }
  out.push('');
  out.push(...verdicts(result.runs));
  return out;
}

/**
 * The summary page's table: every saver at the run's state size nearest `size` (the headline's),
 * the same figures as the appendix's table at that size, with whether each is durable.
 */
export function langgraphHeadline(result: LangGraphResult | undefined, size: number, appendix: string): string[] {
  if (result === undefined || result.runs.length === 0) return [];
  const sizes = [...new Set(result.runs.map((r) => r.size))];
  const at = sizes.reduce((a, b) => (Math.abs(b - size) < Math.abs(a - size) ? b : a));
  const runs = result.runs.filter((r) => r.size === at).sort((a, b) => order(a) - order(b));
  const sf = runs.find((r) => r.saver === 'statefold-file');
  const others = sizes.filter((s) => s !== at).map((s) => bytes(s));
  return [
    `## statefold against LangGraph's savers (${bytes(at)} state)`,
    '',
    `One real LangGraph graph run once per saver, each step waiting for its checkpoint (how: [appendix](${appendix}#langgraph-savers-side-by-side)${others.length > 0 ? `, which also has ${others.join(' and ')} states` : ''}). Milliseconds; reads from a new saver on the same storage, p50 of 15.${result.postgresSkipped ? ` PostgresSaver did not run: ${result.postgresSkipped}.` : ''}`,
    '',
    table(
      [
        'saver',
        'durable',
        'bytes stored',
        'vs statefold file',
        'put p50 / p99',
        'getTuple latest',
        'getTuple 100 back',
      ],
      runs.map((r) => [
        NAMES[r.saver],
        DURABLE[r.saver],
        bytes(r.bytes),
        sf ? `${(r.bytes / sf.bytes).toFixed(r.bytes / sf.bytes >= 10 ? 0 : 2)}×` : '–',
        `${ms(r.put.p50)} / ${ms(r.put.p99)}`,
        ms(r.latest.p50),
        ms(r.back100.p50),
      ]),
    ),
    '',
  ];
}

/** Ratios of StatefoldSaver on the file store against the durable savers, and where it is slower, why. */
function verdicts(runs: LangGraphRun[]): string[] {
  const out: string[] = ['### What it comes to', ''];
  const slower: string[] = [];
  const rows: string[][] = [];
  for (const size of [...new Set(runs.map((r) => r.size))]) {
    const at = (id: SaverId) => runs.find((r) => r.size === size && r.saver === id);
    const sf = at('statefold-file');
    if (sf === undefined) continue;
    const others = runs.filter((r) => r.size === size && !r.saver.startsWith('statefold'));
    const stored = others.map((r) => r.bytes / sf.bytes);
    const cells = [`${bytes(size)}`, `${Math.min(...stored).toFixed(1)}–${Math.max(...stored).toFixed(0)}×`];
    for (const id of ['sqlite-full', 'postgres'] as const) {
      const o = at(id);
      const put = o ? sf.put.p50 / o.put.p50 : NaN;
      const latest = o ? sf.latest.p50 / o.latest.p50 : NaN;
      const back = o ? sf.back100.p50 / o.back100.p50 : NaN;
      cells.push(o ? `${put.toFixed(2)}× / ${latest.toFixed(2)}× / ${back.toFixed(2)}×` : '–');
      const name = NAMES[id];
      if (put > 1.1) slower.push(`put at ${bytes(size)}: ${put.toFixed(1)}× ${name}'s`);
      if (latest > 1.1) slower.push(`latest read at ${bytes(size)}: ${latest.toFixed(1)}× ${name}'s`);
      if (back > 1.1) slower.push(`read 100 back at ${bytes(size)}: ${back.toFixed(1)}× ${name}'s`);
    }
    rows.push(cells);
  }
  out.push(
    table(
      [
        'state',
        'the others store, vs statefold (file)',
        'statefold (file) / SqliteSaver FULL: put / latest / 100 back (p50)',
        'statefold (file) / PostgresSaver: put / latest / 100 back (p50)',
      ],
      rows,
    ),
  );
  out.push('');
  if (slower.length > 0) {
    out.push(
      `Where StatefoldSaver on the file store is slower in this run: ${slower.join('; ')}. Why: each \`put\` and each \`putWrites\` is a durable commit of its own, and a FileStore commit writes a temp file, fsyncs it, links it into place and fsyncs the directory (two fsyncs; SQLite in WAL mode with synchronous=FULL appends to one file and fsyncs once), after capturing and encoding the change on the main thread; a read from a new saver lists the thread's newest chain (hint, listing, newest object: three store calls before the first read of data), an older checkpoint's seq is found first by a binary search over the metas (about log2 of the thread's seqs in reads), then the base and its deltas are read and folded, then hands each channel value to LangGraph's serde as JSON text (stringified from the stored plain value, parsed again). What closes it: group commit of fsyncs across the writes in flight in one FileStore (one directory fsync for many commits), batching a step's \`putWrites\` into its next \`put\` (LangGraph fires them back to back), and reviving the stored plain value without the text round trip. At larger states the fixed costs fade and the bytes written dominate, which is where deltas win.`,
    );
  } else {
    out.push(
      'StatefoldSaver on the file store was within 10% of the durable savers or faster on every figure in this run.',
    );
  }
  out.push('');
  return out;
}

function order(r: LangGraphRun): number {
  return Object.keys(NAMES).indexOf(r.saver);
}
