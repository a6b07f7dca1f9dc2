/**
 * Many streams across processes on one store: the many-streams scenario (many.ts) in several child
 * processes at once, each on streams of its own (its own key prefix), their phases (store alone,
 * window, store alone after) started together; one result for them all, with each process's own.
 * On PostgreSQL: every process on one fresh table of the same server, dropped afterwards, and the
 * server's own CPU over the window when its processes can be read here (/proc).
 */
import { once } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { spawnManyChild, type ManyArgs, type ManyResult, type StoreAlone } from './many.js';
import { summarize } from './stats.js';
import { benchTable, dropPostgresTable, postgresQuery } from './stores.js';

/** What the caller gives: a scenario as for one process, without the store's place or the prefix. */
export type ManyAcrossArgs = Omit<ManyArgs, 'postgres' | 'shared'>;

/** The scenario on PostgresStore across `processes` processes, on a fresh table of the server at `url`. */
export async function manyStreamsOnPostgres(args: ManyAcrossArgs, processes: number, url: string): Promise<ManyResult> {
  const table = benchTable('many');
  const server = await serverCpu(url);
  try {
    return await manyStreamsAcrossProcesses(
      { ...args, store: 'postgres', postgres: { url, table } },
      processes,
      server,
    );
  } finally {
    await dropPostgresTable(url, table);
  }
}

/**
 * Runs `args.streams` streams split evenly over `processes` children; `server` (when given) reads
 * the database server's CPU time (ms), at the window's start and once every process ended it.
 */
async function manyStreamsAcrossProcesses(
  args: Omit<ManyArgs, 'shared'>,
  processes: number,
  server?: () => number,
): Promise<ManyResult> {
  const per = args.streams / processes;
  if (!Number.isInteger(per)) throw new Error(`many streams: ${args.streams} streams do not split over ${processes}`);
  const children = Array.from({ length: processes }, (_, k) =>
    spawnManyChild({ ...args, streams: per, seed: args.seed + k * per, shared: { prefix: `p${k}-` } }, 'pipe'),
  );
  const ready = new Map<number, string>();
  const ended = new Set<number>();
  let serverStart: number | undefined;
  let serverEnd: number | undefined;
  const outputs = children.map((child, k) => {
    let last = '';
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('ready ')) {
        ready.set(k, line.slice(6));
        const phases = new Set(ready.values());
        if (ready.size < processes || phases.size > 1) return;
        if (ready.get(k) === 'window') serverStart = server?.();
        ready.clear();
        for (const c of children) c.stdin!.write('go\n');
      } else if (line === 'mark window-end') {
        ended.add(k);
        if (ended.size === processes) serverEnd = server?.();
      } else if (line.trim() !== '') last = line;
    });
    return once(child, 'close').then(([code]) => {
      if (code !== 0) {
        // The others would wait for it at the next phase.
        for (const c of children) if (c !== child && c.exitCode === null) c.kill();
        throw new Error(`many streams (${args.store}, process ${k + 1} of ${processes}): child exited ${code}`);
      }
      return JSON.parse(last) as ManyResult;
    });
  });
  const parts = await Promise.all(outputs);
  const serverMs = serverStart !== undefined && serverEnd !== undefined ? serverEnd - serverStart : undefined;
  return combine(parts, serverMs);
}

/** One result of all processes: sums, figures per checkpoint over all of them, per stream over all streams. */
function combine(parts: ManyResult[], serverMs: number | undefined): ManyResult {
  const sum = (f: (r: ManyResult) => number): number => parts.reduce((n, r) => n + f(r), 0);
  const max = (f: (r: ManyResult) => number): number => Math.max(...parts.map(f));
  const streams = sum((r) => r.streams);
  const called = sum((r) => r.called);
  const cpuMs = (r: ManyResult): number => r.cpuPerCheckpoint * r.called;
  const cpu = sum(cpuMs);
  const perStream = (f: (r: ManyResult) => number): number => sum((r) => f(r) * r.streams) / streams;
  const samples = parts.map((r) => r.samples!);
  const lateness = samples.flatMap((s) => s.lateness);
  const at = samples.flatMap((s) => s.at);
  const windowMs = parts[0]!.seconds * 1000;
  const lateIn = (from: number, to: number): number =>
    summarize(lateness.filter((_, j) => at[j]! >= from && at[j]! < to)).p50;
  const alone = combineAlone(parts.map((r) => r.alone));
  const aloneAfter = combineAlone(parts.map((r) => r.aloneAfter));
  return {
    store: parts[0]!.store,
    mode: parts[0]!.mode,
    streams,
    size: parts[0]!.size,
    intervalMs: parts[0]!.intervalMs,
    targetRate: sum((r) => r.targetRate),
    seconds: parts[0]!.seconds,
    called,
    committed: sum((r) => r.committed),
    failed: sum((r) => r.failed),
    lateness: summarize(lateness),
    latenessFirst: lateIn(0, windowMs / 5),
    latenessLast: lateIn(windowMs - windowMs / 5, windowMs),
    commit: summarize(samples.flatMap((s) => s.commit)),
    loopDelay: { p50: max((r) => r.loopDelay.p50), p99: max((r) => r.loopDelay.p99), max: max((r) => r.loopDelay.max) },
    cpuPerCheckpoint: called > 0 ? cpu / called : NaN,
    stepShare: cpu > 0 ? sum((r) => r.stepShare * cpuMs(r)) / cpu : NaN,
    rssPerStream: perStream((r) => r.rssPerStream),
    heapPerStream: perStream((r) => r.heapPerStream),
    heapOpenPerStream: perStream((r) => r.heapOpenPerStream),
    reopenSeconds: max((r) => r.reopenSeconds),
    drained: sum((r) => r.drained),
    drainSeconds: max((r) => r.drainSeconds),
    backlog: sum((r) => r.backlog),
    ...(alone !== undefined && { alone }),
    ...(aloneAfter !== undefined && { aloneAfter }),
    processes: parts.map(({ samples: _, ...r }) => r),
    ...(serverMs !== undefined && called > 0 && { serverCpuPerCheckpoint: serverMs / called }),
  };
}

/** The store alone in every process at once: creates per second summed, CPU per create over all creates. */
function combineAlone(runs: (StoreAlone | undefined)[]): StoreAlone | undefined {
  if (runs.length === 0 || runs.some((a) => a === undefined)) return undefined;
  const all = runs as StoreAlone[];
  const creates = (a: StoreAlone): number => a.rate * a.seconds;
  const total = all.reduce((n, a) => n + creates(a), 0);
  return {
    rate: all.reduce((n, a) => n + a.rate, 0),
    cpuUsPerCreate: all.reduce((n, a) => n + a.cpuUsPerCreate * creates(a), 0) / total,
    inFlight: all.reduce((n, a) => n + a.inFlight, 0),
    seconds: Math.max(...all.map((a) => a.seconds)),
  };
}

/**
 * A reader of the CPU time (ms) the PostgreSQL server at `url` has used: its postmaster (found by
 * the postmaster.pid of its data directory), with the children it reaped, and its live children.
 * Undefined when the server's processes are not readable here (another machine, another container).
 */
async function serverCpu(url: string): Promise<(() => number) | undefined> {
  try {
    const [row] = await postgresQuery(url, 'SHOW data_directory');
    const dir = String(row?.data_directory);
    const postmaster = Number(readFileSync(path.join(dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const ticks = 100; // USER_HZ on Linux
    // The fields after the command name: stat's 3rd (state) first, so ppid is [1], utime [11], stime [12], cutime [13], cstime [14].
    const fields = (pid: string): string[] => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    };
    const read = (): number => {
      let t = 0;
      for (const pid of readdirSync('/proc')) {
        if (!/^\d+$/.test(pid)) continue;
        try {
          const f = fields(pid);
          const own = Number(f[11]) + Number(f[12]);
          if (Number(pid) === postmaster) t += own + Number(f[13]) + Number(f[14]);
          else if (Number(f[1]) === postmaster) t += own;
        } catch {
          // A process that ended while /proc was read.
        }
      }
      return (t / ticks) * 1000;
    };
    read();
    return read;
  } catch {
    return undefined;
  }
}
