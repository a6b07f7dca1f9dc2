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
  return out;
}

function order(r: LangGraphRun): number {
  return Object.keys(NAMES).indexOf(r.saver);
}
