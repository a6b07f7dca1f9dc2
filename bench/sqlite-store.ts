/**
 * SqliteStore beside FileStore and MemoryStore, side by side in one run (rounds in rotating
 * order; medians with the spread of the rounds): through the engine at a 20 KB state, one agent
 * committing back to back (commit p50, CPU per commit) and 64 agents at once on one store
 * (commits/s, CPU per commit, writes per transaction, the latency of a read meanwhile); and the
 * disk's own SQLite limit (better-sqlite3 on this thread, WAL, synchronous=FULL, 20 KB rows,
 * 1/16/64 per transaction; and append + fdatasync of the same rows to one file, as a log would).
 * CPU is the whole process's, threads included. The bench's `stores` section (run.ts), or alone:
 *   npm run build && npx tsx bench/sqlite-store.ts [rounds]
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { FileStore, MemoryStore, SnapshotEngine, type Store } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';
import { fileURLToPath } from 'node:url';
import { summarize, type Progress, type Summary } from './stats.js';

/** How long each part runs (storesAloneScenario's `lengths` can shorten them, for a smoke run). */
let SEQUENTIAL = 300;
const AGENTS = 64;
let CONCURRENT_MS = 3000;
let DISK_MS = 1000;

export type Kind = 'memory' | 'file' | 'sqlite' | 'sqlite normal';
export const KINDS: Kind[] = ['memory', 'file', 'sqlite', 'sqlite normal'];
/** Rows per transaction (SQLite) or per fdatasync (append) of the disk's limit. */
export const BATCHES = [1, 16, 64];

let root = '';
let made = 0;
function storeOf(kind: Kind): Store {
  const where = path.join(root, `${made++}`);
  if (kind === 'memory') return new MemoryStore();
  if (kind === 'file') return new FileStore({ dir: where });
  return new SqliteStore({ path: `${where}.db`, synchronous: kind === 'sqlite' ? 'full' : 'normal' });
}
async function dispose(store: Store): Promise<void> {
  if (store instanceof SqliteStore) await store.close();
}

/** A ~20 KB agent state: messages of text, a plan, counters; each step appends a message and changes a few fields. */
interface State {
  messages: { role: string; text: string }[];
  plan: string[];
  step: number;
  tokens: number;
}
const words = Array.from({ length: 500 }, (_, i) => `w${(i * 7919) % 4099}`);
function text(seed: number, n: number): string {
  let out = '';
  for (let i = 0; i < n; i++) out += `${words[(seed * 31 + i * 17) % words.length]} `;
  return out;
}
function initial(): State {
  return {
    messages: Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', text: text(i, 70) })),
    plan: Array.from({ length: 8 }, (_, i) => text(i + 100, 6)),
    step: 0,
    tokens: 0,
  };
}
function evolve(s: State, step: number): State {
  // A sliding window: the state stays near 20 KB.
  const messages = [...s.messages.slice(1), { role: step % 2 ? 'assistant' : 'user', text: text(step, 70) }];
  const plan = [...s.plan];
  plan[step % plan.length] = text(step + 7, 6);
  return { messages, plan, step, tokens: s.tokens + 120 };
}

function cpuMs(since: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1000;
}

/** One agent committing back to back: each checkpoint's latency, and CPU per commit. */
async function sequential(kind: Kind): Promise<{ p50: number; cpuUs: number }> {
  const store = storeOf(kind);
  const engine = await SnapshotEngine.open<State>({ store, stream: 'bench/one', updates: 'immutable' });
  let s = initial();
  for (let i = 1; i <= 20; i++) await engine.checkpoint((s = evolve(s, i)));
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 21; i < 21 + SEQUENTIAL; i++) {
    s = evolve(s, i);
    const t0 = performance.now();
    await engine.checkpoint(s);
    lat.push(performance.now() - t0);
  }
  const cpu = cpuMs(cpu0);
  await engine.close();
  await dispose(store);
  return { p50: summarize(lat).p50, cpuUs: (cpu * 1000) / SEQUENTIAL };
}

/**
 * AGENTS agents on one store, each committing back to back, for CONCURRENT_MS; meanwhile one
 * reader gets a checkpoint over and over (how long a read waits while commits are being made).
 */
async function concurrent(kind: Kind): Promise<{ perSec: number; cpuUs: number; perTx: number; readMs: number }> {
  const store = storeOf(kind);
  const engines = await Promise.all(
    Array.from({ length: AGENTS }, (_, i) =>
      SnapshotEngine.open<State>({ store, stream: `bench/${i}`, updates: 'immutable' }),
    ),
  );
  const states = engines.map(() => initial());
  for (const [i, e] of engines.entries()) await e.checkpoint(states[i]!);
  const before = store instanceof SqliteStore ? store.stats() : undefined;
  let commits = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + CONCURRENT_MS;
  const readKey = (await store.list('')).find((k) => k.includes('/log/'))!;
  const reads: number[] = [];
  const reader = (async () => {
    while (performance.now() < end) {
      const r0 = performance.now();
      await store.get(readKey);
      reads.push(performance.now() - r0);
      // Paced, so that the reads add little to the CPU counted per commit.
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  await Promise.all(
    engines.map(async (e, i) => {
      for (let step = 1; performance.now() < end; step++) {
        await e.checkpoint((states[i] = evolve(states[i]!, step)));
        commits++;
      }
    }),
  );
  await reader;
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuMs(cpu0);
  let perTx = NaN;
  if (store instanceof SqliteStore && before !== undefined) {
    const after = store.stats();
    perTx = (after.writes - before.writes) / (after.transactions - before.transactions);
  }
  await Promise.all(engines.map((e) => e.close()));
  await dispose(store);
  return { perSec: commits / seconds, cpuUs: (cpu * 1000) / commits, perTx, readMs: summarize(reads).p50 };
}

type Db = {
  pragma(s: string): unknown;
  exec(s: string): void;
  prepare(s: string): { run(...p: unknown[]): unknown };
  close(): void;
};
const Database = createRequire(import.meta.url)('better-sqlite3') as new (file: string) => Db;

/** The disk's SQLite limit: 20 KB inserts, `per` to a transaction, on this thread, for about a second. */
function diskLimit(per: number): { rowsPerSec: number; txPerSec: number; cpuUsPerRow: number } {
  const db = new Database(path.join(root, `raw-${made++}.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE o (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, body BLOB NOT NULL)');
  const insert = db.prepare('INSERT INTO o (key, body) VALUES (?, ?)');
  const body = Buffer.alloc(20 * 1024, 7);
  let rows = 0;
  let tx = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < DISK_MS) {
    db.exec('BEGIN IMMEDIATE');
    for (let j = 0; j < per; j++) insert.run(`k/${rows++}`, body);
    db.exec('COMMIT');
    tx++;
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuMs(cpu0);
  db.close();
  return { rowsPerSec: rows / seconds, txPerSec: tx / seconds, cpuUsPerRow: (cpu * 1000) / rows };
}

/** The disk's limit without SQLite: 20 KB rows appended to one file, an fdatasync after every `per`. */
function appendLimit(per: number): { rowsPerSec: number; txPerSec: number; cpuUsPerRow: number } {
  const fd = openSync(path.join(root, `append-${made++}.log`), 'a');
  const body = Buffer.alloc(20 * 1024, 7);
  let rows = 0;
  let tx = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < DISK_MS) {
    for (let j = 0; j < per; j++, rows++) writeSync(fd, body);
    fdatasyncSync(fd);
    tx++;
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuMs(cpu0);
  closeSync(fd);
  return { rowsPerSec: rows / seconds, txPerSec: tx / seconds, cpuUsPerRow: (cpu * 1000) / rows };
}

/** Each store alone and the disk's limits: one sample per round of every figure, summarized over the rounds. */
export interface StoresAloneResult {
  rounds: number;
  /** One agent, SEQUENTIAL checkpoints back to back: commit p50 ms, CPU µs per commit. */
  sequential: { store: Kind; commitMs: Summary; cpuUs: Summary }[];
  /** AGENTS agents on one store for CONCURRENT_MS: commits/s, CPU µs per commit, writes per transaction, a read's p50 ms meanwhile. */
  concurrent: { store: Kind; perSec: Summary; cpuUs: Summary; perTx?: Summary; readMs: Summary }[];
  /** 20 KB rows: per transaction (SQLite) or per fdatasync (append). */
  disk: { how: 'sqlite' | 'append'; per: number; rowsPerSec: Summary; txPerSec: Summary; cpuUs: Summary }[];
  agents: number;
  sequentialCommits: number;
  concurrentMs: number;
}

export async function storesAloneScenario(
  rounds: number,
  progress?: Progress,
  lengths?: { sequential: number; concurrentMs: number; diskMs: number },
): Promise<StoresAloneResult> {
  if (lengths) ({ sequential: SEQUENTIAL, concurrentMs: CONCURRENT_MS, diskMs: DISK_MS } = lengths);
  root = mkdtempSync(path.join(tmpdir(), 'statefold-bench-sqlite-'));
  try {
    const seq: Record<string, { p50: number[]; cpu: number[] }> = {};
    const conc: Record<string, { perSec: number[]; cpu: number[]; perTx: number[]; readMs: number[] }> = {};
    const disk: Record<string, { rows: number[]; tx: number[]; cpu: number[] }> = {};
    for (let round = 0; round < rounds; round++) {
      const order = KINDS.map((_, i) => KINDS[(i + round) % KINDS.length]!);
      for (const kind of order) {
        const r = await sequential(kind);
        (seq[kind] ??= { p50: [], cpu: [] }).p50.push(r.p50);
        seq[kind].cpu.push(r.cpuUs);
      }
      for (const kind of order) {
        const r = await concurrent(kind);
        const c = (conc[kind] ??= { perSec: [], cpu: [], perTx: [], readMs: [] });
        c.readMs.push(r.readMs);
        c.perSec.push(r.perSec);
        c.cpu.push(r.cpuUs);
        c.perTx.push(r.perTx);
      }
      for (const how of round % 2 === 0 ? (['sqlite', 'append'] as const) : (['append', 'sqlite'] as const))
        for (const per of BATCHES) {
          const r = how === 'sqlite' ? diskLimit(per) : appendLimit(per);
          const d = (disk[`${how} ${per}`] ??= { rows: [], tx: [], cpu: [] });
          d.rows.push(r.rowsPerSec);
          d.tx.push(r.txPerSec);
          d.cpu.push(r.cpuUsPerRow);
        }
      progress?.note(`stores alone: round ${round + 1}/${rounds} done`);
    }
    return {
      rounds,
      agents: AGENTS,
      sequentialCommits: SEQUENTIAL,
      concurrentMs: CONCURRENT_MS,
      sequential: KINDS.map((store) => ({
        store,
        commitMs: summarize(seq[store]!.p50),
        cpuUs: summarize(seq[store]!.cpu),
      })),
      concurrent: KINDS.map((store) => ({
        store,
        perSec: summarize(conc[store]!.perSec),
        cpuUs: summarize(conc[store]!.cpu),
        ...(store.startsWith('sqlite') && { perTx: summarize(conc[store]!.perTx) }),
        readMs: summarize(conc[store]!.readMs),
      })),
      disk: (['sqlite', 'append'] as const).flatMap((how) =>
        BATCHES.map((per) => {
          const d = disk[`${how} ${per}`]!;
          return { how, per, rowsPerSec: summarize(d.rows), txPerSec: summarize(d.tx), cpuUs: summarize(d.cpu) };
        }),
      ),
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const fmt = (v: Summary, digits: number): string =>
  `${v.p50.toFixed(digits)} (${v.min.toFixed(digits)}-${v.max.toFixed(digits)})`;

/** Alone (not imported by run.ts): prints the tables. */
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const ROUNDS = Number(process.argv[2] ?? 5);
  const r = await storesAloneScenario(ROUNDS);
  console.log(`\nOne agent, 20 KB state, ${SEQUENTIAL} checkpoints back to back; median of ${ROUNDS} rounds (min-max)`);
  console.log('| store | commit p50 ms | CPU per commit us |\n| :-- | --: | --: |');
  for (const x of r.sequential) console.log(`| ${x.store} | ${fmt(x.commitMs, 3)} | ${fmt(x.cpuUs, 0)} |`);
  console.log(`\n${AGENTS} agents on one store, back to back for ${CONCURRENT_MS} ms`);
  console.log(
    '| store | commits/s | CPU per commit us | writes per transaction | a read meanwhile, p50 ms |\n| :-- | --: | --: | --: | --: |',
  );
  for (const x of r.concurrent)
    console.log(
      `| ${x.store} | ${fmt(x.perSec, 0)} | ${fmt(x.cpuUs, 0)} | ${x.perTx ? fmt(x.perTx, 1) : '-'} | ${fmt(x.readMs, 3)} |`,
    );
  console.log(
    '\nThe disk: 20 KB rows; SQLite (better-sqlite3 on one thread, WAL, synchronous=FULL) or append + fdatasync',
  );
  console.log(
    '| how | rows per transaction or fdatasync | rows/s | transactions/s | CPU per row us |\n| :-- | --: | --: | --: | --: |',
  );
  for (const x of r.disk)
    console.log(`| ${x.how} | ${x.per} | ${fmt(x.rowsPerSec, 0)} | ${fmt(x.txPerSec, 0)} | ${fmt(x.cpuUs, 0)} |`);
}
