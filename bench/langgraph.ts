/**
 * LangGraph savers side by side on a real LangGraph graph: a coding agent (messages + ToolNode, a
 * fake model) whose `read_file` tool returns real text from the files under node_modules, with a
 * sliding context window of WINDOW messages, so that the state stays near its nominal size. Each
 * saver runs the same graph on its own thread with `durability: 'sync'` (each step waits for its
 * checkpoint), then a new saver instance on the same storage reads the latest checkpoint and the
 * one 100 steps back, and a new saver in a fresh process reads the latest (fresh.ts). Rounds
 * repeat every saver, in a rotated order each round.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AIMessage, HumanMessage, RemoveMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, MessagesDeltaValue, START, StateGraph, StateSchema } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { MemorySaver, type BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { z } from 'zod';
import { FileStore, listCheckpoints, listStreams, MemoryStore, type Store } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { SqliteStore } from 'statefold/sqlite';
import { PostgresStore } from 'statefold/postgres';
import pg from 'pg';
import { benchTable } from './stores.js';
import { inFreshProcess, type FreshWhere } from './fresh.js';
import { summarize, type Progress, type Summary } from './stats.js';

/** Messages kept in the context window (the question, then tool calls and results). */
const WINDOW = 40;
/** Reads timed per figure. */
const READS = 15;

export type SaverId =
  | 'statefold-sqlite'
  | 'statefold-file'
  | 'statefold-memory'
  | 'statefold-postgres'
  | 'memory'
  | 'sqlite'
  | 'sqlite-full'
  | 'sqlite-full-delta'
  | 'postgres';

/**
 * The savers that run the graph with LangGraph's own delta storage (`DeltaChannel`, beta): the
 * messages channel stores each step's writes and a snapshot every 100 updates instead of the whole
 * list, and a read rebuilds it by replaying writes (`graph.getState`, not the saver's getTuple).
 */
const DELTA: ReadonlySet<SaverId> = new Set(['sqlite-full-delta']);

export interface LangGraphRun {
  saver: SaverId;
  size: number;
  /** Which round of the scenario (0 when it ran one; absent in results from before rounds). */
  round?: number;
  toolCalls: number;
  checkpoints: number;
  /** Bytes the saver's storage holds after the run (see the report for how each is counted). */
  bytes: number;
  /** StatefoldSaver on PostgresStore: the bytes of its stored objects (`bytes` is its table's size on disk). */
  objectBytes?: number;
  /** State size at the end of the run: the checkpoint's channel values as JSON. */
  stateBytes: number;
  put: Summary;
  putWrites: Summary;
  latest: Summary;
  back100: Summary;
  runMs: number;
  /**
   * A new saver in a fresh process: from constructing it (and its store) until getTuple of the
   * latest checkpoint resolved, ms. Absent where the storage lives in this process only.
   */
  freshLatest?: number;
}

export interface LangGraphResult {
  runs: LangGraphRun[];
  /** Why PostgresSaver did not run, when it did not. */
  postgresSkipped?: string;
}

/** Real text from node_modules, in a fixed order (sorted paths, every 7th file). */
export function corpus(): string[] {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'node_modules');
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((rel) => /\.(md|txt|ts|js|json)$/.test(rel) && !rel.includes(`${path.sep}.`))
    .sort()
    .filter((_, i) => i % 7 === 0);
  const texts: string[] = [];
  for (const rel of files) {
    const full = path.join(root, rel);
    try {
      if (statSync(full).isFile()) texts.push(readFileSync(full, 'utf8'));
    } catch {
      // a dangling link
    }
    if (texts.length >= 400) break;
  }
  return texts;
}

/** The text the agent's n-th file read returns: real files, joined until `bytes` long. */
function fileText(texts: string[], n: number, bytes: number): string {
  let out = '';
  for (let i = n * 3; out.length < bytes; i++) out += texts[i % texts.length]!;
  return out.slice(0, bytes);
}

export function agent(
  checkpointer: BaseCheckpointSaver,
  texts: string[],
  toolCalls: number,
  resultBytes: number,
  delta = false,
) {
  const readFile = tool(async ({ n }) => fileText(texts, n, resultBytes), {
    name: 'read_file',
    description: 'Reads the n-th file',
    schema: z.object({ n: z.number() }),
  });
  const model = async (state: { messages: BaseMessage[] }) => {
    const lastCall = state.messages.findLast((m) => m.id?.startsWith('call-'));
    const read = lastCall === undefined ? 0 : Number(lastCall.id!.slice('call-'.length)) + 1;
    const n = state.messages.length;
    // The window: past WINDOW messages, drop the oldest call and its result (after the question).
    const drop = n > WINDOW ? state.messages.slice(1, 3).map((m) => new RemoveMessage({ id: m.id! })) : [];
    if (read >= toolCalls) return { messages: [...drop, new AIMessage({ id: `answer`, content: `Read ${read}.` })] };
    const call = new AIMessage({
      id: `call-${read}`,
      content: `Reading file ${read}`,
      tool_calls: [{ id: `tc-${read}`, name: 'read_file', args: { n: read } }],
    });
    return { messages: [...drop, call] };
  };
  // (The same graph either way: only how the messages channel is stored differs.)
  const graph = delta
    ? (new StateGraph(new StateSchema({ messages: MessagesDeltaValue })) as unknown as StateGraph<
        typeof MessagesAnnotation
      >)
    : new StateGraph(MessagesAnnotation);
  return graph
    .addNode('model', model)
    .addNode('tools', new ToolNode([readFile]))
    .addEdge(START, 'model')
    .addConditionalEdges('model', (s) => ((s.messages.at(-1) as AIMessage)?.tool_calls?.length ? 'tools' : END))
    .addEdge('tools', 'model')
    .compile({ checkpointer });
}

/** Times every call of `method` on `saver` (until its promise settles); `seen` gets what each resolved. */
function timed(saver: BaseCheckpointSaver, method: 'put' | 'putWrites', into: number[], seen?: unknown[]): void {
  const original = (saver[method] as (...a: unknown[]) => Promise<unknown>).bind(saver);
  (saver as unknown as Record<string, unknown>)[method] = async (...args: unknown[]) => {
    const t0 = performance.now();
    const result = await original(...args);
    into.push(performance.now() - t0);
    seen?.push(result);
    return result;
  };
}

interface Backend {
  /** A saver on the backend's storage (a new one each call, on the same storage). */
  open(): Promise<BaseCheckpointSaver>;
  bytes(): Promise<number>;
  /** The stored objects' own bytes, where `bytes` counts a table on disk. */
  objectBytes?(): Promise<number>;
  close(saver: BaseCheckpointSaver): Promise<void>;
  cleanup(): Promise<void>;
  /** Where a fresh process finds the storage; undefined when it lives in this process only. */
  fresh?: FreshWhere;
}

async function storeBytes(store: Store): Promise<number> {
  let total = 0;
  for (const stream of await listStreams(store)) {
    for (const e of await listCheckpoints(store, stream)) if (!e.damaged) total += e.bytes;
  }
  return total;
}

async function backend(id: SaverId, pgUrl: string | undefined): Promise<Backend> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `statefold-lg-bench-${id}-`));
  const cleanup = async () => rmSync(dir, { recursive: true, force: true });
  switch (id) {
    case 'statefold-file':
    case 'statefold-memory': {
      const store = id === 'statefold-file' ? new FileStore({ dir }) : new MemoryStore();
      return {
        open: async () => new StatefoldSaver({ store }),
        bytes: () => storeBytes(store),
        close: (s) => (s as StatefoldSaver).close(),
        cleanup,
        ...(id === 'statefold-file' && { fresh: { store: 'file', path: dir } }),
      };
    }
    case 'statefold-sqlite': {
      // synchronous=FULL, the store's default: durable as SqliteSaver with synchronous=FULL is.
      const file = path.join(dir, 'statefold.db');
      const store = new SqliteStore({ path: file });
      return {
        open: async () => new StatefoldSaver({ store }),
        bytes: () => storeBytes(store),
        close: (s) => (s as StatefoldSaver).close(),
        cleanup: async () => {
          await store.close();
          await cleanup();
        },
        fresh: { store: 'sqlite', path: file },
      };
    }
    case 'statefold-postgres': {
      // One table of its own on the server PostgresSaver runs on; both measured the same way (on disk).
      const table = benchTable('langgraph');
      const pool = new pg.Pool({ connectionString: pgUrl! });
      const store = new PostgresStore({ pool, table });
      return {
        open: async () => new StatefoldSaver({ store }),
        bytes: async () => relationBytes(pool, `c.relname = $1 AND s.nspname = 'public'`, table),
        objectBytes: () => storeBytes(store),
        close: (s) => (s as StatefoldSaver).close(),
        cleanup: async () => {
          await store.close();
          await pool.query(`DROP TABLE ${table}`);
          await pool.end();
          await cleanup();
        },
        fresh: { store: 'postgres', path: pgUrl!, schema: table },
      };
    }
    case 'memory': {
      const saver = new MemorySaver();
      return {
        open: async () => saver,
        bytes: async () => memorySaverBytes(saver),
        close: async () => undefined,
        cleanup,
      };
    }
    case 'sqlite':
    case 'sqlite-full':
    case 'sqlite-full-delta': {
      const file = path.join(dir, 'checkpoints.db');
      return {
        open: async () => {
          const saver = SqliteSaver.fromConnString(file);
          if (id !== 'sqlite') {
            (saver as unknown as { setup(): void }).setup();
            saver.db.pragma('synchronous=FULL');
          }
          return saver;
        },
        bytes: async () =>
          ['', '-wal'].reduce((sum, ext) => sum + (statSync(file + ext, { throwIfNoEntry: false })?.size ?? 0), 0),
        close: async (s) => (s as SqliteSaver).db.close(),
        cleanup,
        // (A fresh process reads with getTuple, which does not rebuild a DeltaChannel: not timed for it.)
        ...(!DELTA.has(id) && { fresh: { store: 'sqlite-saver', path: file } }),
      };
    }
    case 'postgres': {
      const schema = `bench_${Date.now().toString(36)}`;
      const first = PostgresSaver.fromConnString(pgUrl!, { schema });
      await first.setup();
      return {
        open: async () => PostgresSaver.fromConnString(pgUrl!, { schema }),
        bytes: () => relationBytes(pool(first), 's.nspname = $1', schema),
        close: (s) => (s as PostgresSaver).end(),
        cleanup: async () => {
          await pool(first).query(`DROP SCHEMA ${schema} CASCADE`);
          await first.end();
          await cleanup();
        },
        fresh: { store: 'postgres-saver', path: pgUrl!, schema },
      };
    }
  }
}

type Queryable = { query(sql: string, args?: unknown[]): Promise<{ rows: { n: string }[] }> };

/** `pg_total_relation_size` (heap, TOAST, indexes, free-space and visibility maps) of the tables `where` picks. */
async function relationBytes(on: Queryable, where: string, arg: string): Promise<number> {
  const { rows } = await on.query(
    `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS n FROM pg_class c
     JOIN pg_namespace s ON s.oid = c.relnamespace WHERE ${where} AND c.relkind = 'r'`,
    [arg],
  );
  return Number(rows[0]!.n);
}

/** PostgresSaver's connection pool (not public API; used to measure its tables). */
function pool(saver: PostgresSaver): Queryable {
  return (saver as unknown as { pool: Queryable }).pool;
}

/** What MemorySaver holds: every serialized checkpoint, metadata and write. */
function memorySaverBytes(saver: MemorySaver): number {
  let total = 0;
  for (const byNs of Object.values(saver.storage))
    for (const byId of Object.values(byNs))
      for (const [cp, md] of Object.values(byId)) total += cp.byteLength + md.byteLength;
  for (const byKey of Object.values(saver.writes)) for (const w of Object.values(byKey)) total += w[2].byteLength;
  return total;
}

async function timedReads(fn: () => Promise<unknown>): Promise<Summary> {
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const t0 = performance.now();
    const got = await fn();
    times.push(performance.now() - t0);
    if (got === undefined) throw new Error('langgraph bench: a read found no checkpoint');
  }
  return summarize(times);
}

/** One saver, one state size: the run, then reads from a new saver instance. */
export async function langgraphRun(
  id: SaverId,
  size: number,
  toolCalls: number,
  pgUrl: string | undefined,
  round = 0,
): Promise<LangGraphRun> {
  const texts = corpus();
  const b = await backend(id, pgUrl);
  try {
    const saver = await b.open();
    const puts: number[] = [];
    const writes: number[] = [];
    const putConfigs: { configurable: { checkpoint_id: string } }[] = [];
    timed(saver, 'put', puts, putConfigs);
    timed(saver, 'putWrites', writes);
    const resultBytes = Math.round(size / (WINDOW / 2));
    const graph = agent(saver, texts, toolCalls, resultBytes, DELTA.has(id));
    const config = { configurable: { thread_id: `bench-${id}` }, recursionLimit: 4 * toolCalls + 10 };
    const t0 = performance.now();
    await graph.invoke(
      { messages: [new HumanMessage({ id: 'question', content: 'Read the files.' })] },
      {
        ...config,
        durability: 'sync',
      },
    );
    const runMs = performance.now() - t0;
    const ids = putConfigs.map((c) => c.configurable.checkpoint_id);
    const values = DELTA.has(id)
      ? (await graph.getState(config)).values
      : (await saver.getTuple(config))!.checkpoint.channel_values;
    const stateBytes = Buffer.byteLength(JSON.stringify(values));
    if (saver !== (await b.open())) await b.close(saver);
    const reader = await b.open();
    const back = {
      configurable: { thread_id: `bench-${id}`, checkpoint_ns: '', checkpoint_id: ids[ids.length - 101]! },
    };
    // With a DeltaChannel the checkpoint lacks the messages: the graph rebuilds them from the writes.
    const delta = DELTA.has(id) ? agent(reader, texts, toolCalls, resultBytes, true) : undefined;
    const read = (c: typeof config | typeof back) =>
      delta ? delta.getState(c).then((s) => (s.values.messages === undefined ? undefined : s)) : reader.getTuple(c);
    const latest = await timedReads(() => read(config));
    const back100 = await timedReads(() => read(back));
    const bytes = await b.bytes();
    const objectBytes = await b.objectBytes?.();
    if (id !== 'memory') await b.close(reader);
    const freshLatest =
      b.fresh &&
      (
        await inFreshProcess({
          kind: 'langgraph',
          where: b.fresh,
          thread: `bench-${id}`,
          checkpointId: ids[ids.length - 1]!,
        })
      ).ms;
    return {
      saver: id,
      size,
      round,
      toolCalls,
      checkpoints: ids.length,
      bytes,
      ...(objectBytes !== undefined && { objectBytes }),
      stateBytes,
      put: summarize(puts),
      putWrites: summarize(writes),
      latest,
      back100,
      runMs,
      ...(freshLatest !== undefined && { freshLatest }),
    };
  } finally {
    await b.cleanup();
  }
}

/**
 * Every saver at every size, `rounds(size)` times: in each round every size, savers in an order
 * rotated each time; after one unrecorded run of each saver when `warmup`.
 */
export async function langgraphScenario(
  sizes: number[],
  toolCalls: number,
  progress: Progress,
  rounds: (size: number) => number = () => 1,
  warmup = false,
): Promise<LangGraphResult> {
  const pgUrl = process.env.STATEFOLD_PG_URL;
  const savers: SaverId[] = [
    'statefold-sqlite',
    'statefold-file',
    'statefold-memory',
    'memory',
    'sqlite',
    'sqlite-full',
    'sqlite-full-delta',
  ];
  if (pgUrl) savers.push('statefold-postgres', 'postgres');
  const runs: LangGraphRun[] = [];
  if (warmup && sizes.length > 0) {
    // Unrecorded: without it the first size's first rounds pay for loading and JIT-compiling the graph and every saver.
    for (const id of savers) {
      progress.note(`langgraph: ${id}, ${Math.round(sizes[0]! / 1000)} KB, warm-up (not recorded)`);
      await langgraphRun(id, sizes[0]!, toolCalls, pgUrl);
    }
  }
  // Sizes interleaved within each round, so that the load on a shared machine drifts over every size alike.
  const most = Math.max(...sizes.map(rounds));
  for (let round = 0, turn = 0; round < most; round++) {
    for (const size of sizes) {
      if (round >= rounds(size)) continue;
      const order = [...savers.slice(turn % savers.length), ...savers.slice(0, turn % savers.length)];
      turn++;
      for (const id of order) {
        progress.note(
          `langgraph: ${id}, ${Math.round(size / 1000)} KB, ${toolCalls} tool calls, round ${round + 1}/${rounds(size)}`,
        );
        runs.push(await langgraphRun(id, size, toolCalls, pgUrl, round));
      }
    }
  }
  return pgUrl
    ? { runs }
    : { runs, postgresSkipped: 'STATEFOLD_PG_URL was not set (start one with bench/postgres.sh)' };
}
