/** The report's section on each store alone and the disk's limits (bench/sqlite-store.ts). */
import type { StoresAloneResult } from './sqlite-store.js';
import { int, ms, table, type Summary } from './stats.js';

const range = (s: Summary, f: (v: number) => string): string =>
  s.n > 1 ? `${f(s.p50)} (${f(s.min)}–${f(s.max)})` : f(s.p50);
const NAMES: Record<string, string> = {
  memory: 'MemoryStore',
  file: 'FileStore (fsync)',
  sqlite: 'SqliteStore, synchronous=FULL',
  'sqlite normal': 'SqliteStore, synchronous=NORMAL',
};

export function storesSection(r: StoresAloneResult | undefined): string[] {
  if (r === undefined) return [];
  return [
    '## Each store alone, and the disk',
    '',
    `Through the engine at a ~20 KB state (immutable updates, a message appended and a plan step rewritten per step), each store fresh; ${r.rounds} round${r.rounds > 1 ? 's' : ''}, the stores in a rotated order per round; each figure the median of the rounds with their range (min–max). CPU is the whole process's (its threads included) divided by the commits. One agent: ${int(r.sequentialCommits)} checkpoints, each awaited before the next.`,
    '',
    table(
      ['store', 'commit p50 ms', 'CPU µs per commit'],
      r.sequential.map((x) => [NAMES[x.store]!, range(x.commitMs, ms), range(x.cpuUs, int)]),
    ),
    '',
    `${r.agents} agents on one store, each committing back to back for ${(r.concurrentMs / 1000).toFixed(1)} s, while one reader gets a checkpoint every 5 ms (how long a read waits behind the commits):`,
    '',
    table(
      ['store', 'commits/s', 'CPU µs per commit', 'writes per transaction', 'a read meanwhile, p50 ms'],
      r.concurrent.map((x) => [
        NAMES[x.store]!,
        range(x.perSec, int),
        range(x.cpuUs, int),
        x.perTx ? range(x.perTx, (v) => v.toFixed(1)) : '–',
        range(x.readMs, ms),
      ]),
    ),
    '',
    "The disk's limit on this machine, 20 KB rows on this thread: SQLite (better-sqlite3, WAL, synchronous=FULL) with that many rows per transaction, and a plain append to one file with an fdatasync after that many rows.",
    '',
    table(
      ['how', 'rows per transaction or fdatasync', 'rows/s', 'fsyncs/s', 'CPU µs per row'],
      r.disk.map((x) => [
        x.how === 'sqlite' ? 'SQLite, one connection' : 'append + fdatasync',
        String(x.per),
        range(x.rowsPerSec, int),
        range(x.txPerSec, int),
        range(x.cpuUs, int),
      ]),
    ),
    '',
  ];
}
