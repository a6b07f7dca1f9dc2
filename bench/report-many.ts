/** The report's section on many streams in one process (bench/many.ts), and across processes on PostgreSQL (bench/many-processes.ts). */
import type { ManyResult, StoreAlone } from './many.js';
import { table, bytes, int, ms, pct } from './stats.js';

/** Holds: commits keep up with the schedule and lateness does not grow over the window. */
export function holds(r: ManyResult): boolean {
  const rate = r.committed / r.seconds;
  return (
    rate >= 0.98 * r.targetRate &&
    r.latenessLast <= Math.max(50, 2 * r.latenessFirst) &&
    r.failed === 0 &&
    r.backlog <= r.targetRate
  );
}

export function manySection(all: ManyResult[], skipped?: string): string[] {
  if (all.length === 0 && skipped === undefined) return [];
  // Runs across processes have a subsection of their own.
  const results = all.filter((r) => r.processes === undefined);
  const across = all.filter((r) => r.processes !== undefined);
  const out: string[] = [];
  out.push('## Many streams in one process');
  out.push('');
  out.push(
    `N engines in one process, each on its own stream of one shared store, each agent taking a step of the coding workload (states of ${all[0] === undefined ? 'one size' : bytes(all[0].size)} of real text, ~1% changed per step) and a checkpoint every 2 s, the schedules spread evenly over the interval: N / 2 checkpoints per second in all, none awaited before the next is due. After a warm-up, over the window: checkpoints called per second, and commits that resolved per second (whenever called); the backlog (called, warm-up included, and not yet settled) when the window ended, and how fast it drained while every engine was closed (for a store that falls behind, about the most it commits per second); lateness of each call against its schedule (p50 / p99, and its median in the first and the last fifth of the window: a growing backlog shows as the second far above the first); commit latency (call to resolved promise); event-loop delay (perf_hooks); this process's CPU (all threads) per checkpoint and the share of it in the agents' own steps; heap per stream after a full collection (the agents' own states left out) just after opening, when each engine has taken its first checkpoint, and at the end of the window; re-opening all N streams afterwards, 64 at a time, through a new instance of the store as a restarted process would (a new FileStore on the same directory; the memory store's objects live only in its one instance). The file store fsyncs every object and its directory; its runs measure the store alone in the same process, before any engine opens and again after the re-open: frame-sized creates on 1,024 directories made beforehand (as the streams' are), 256 in flight (what fsync allows here, and the CPU each create costs). What fsync allows on this shared VM swings within minutes, so a run's commits are compared with the mean of the two. The agents' steps do only their state changes: the byte counts other sections keep are not computed here. Unless marked, FileStore runs use its default \`ioThreads\` (16). The SQLite runs use one SqliteStore (statefold/sqlite, synchronous=FULL: the WAL fsynced at each transaction), whose writer thread puts every write that arrives together into one transaction; its store-alone runs are measured the same way as the file store's. Runs marked \`--max-semi-space-size\` give the process a larger young generation than Node's default: a checkpoint's garbage (the capture's copies, the encoding, the store call) is collected there, and with 10,000 engines' states in the old generation each scavenge costs milliseconds, so with Node's default the main thread spends about a fifth of its time on them; see docs/operations.md, production settings. The PostgreSQL run (below) splits its streams over two processes on one table.`,
  );
  out.push('');
  const verdicts: string[][] = [];
  const mem = results.filter((r) => r.store === 'memory');
  const biggest = Math.max(0, ...results.map((r) => r.streams));
  for (const r of mem.filter((x) => x.streams === biggest)) {
    verdicts.push([
      `${int(r.streams)} streams at a 2 s interval (${int(r.targetRate)}/s) hold on the memory store, \`updates: '${r.mode}'\``,
      `${int(r.committed / r.seconds)} commits/s, backlog ${int(r.backlog)} at the end; lateness p50 ${ms(r.latenessFirst)} ms in the first fifth, ${ms(r.latenessLast)} ms in the last`,
      holds(r) ? 'yes' : '**no**',
    ]);
  }
  for (const r of results.filter((x) => x.store === 'file' && x.ioThreads === undefined && x.alone)) {
    const share = r.committed / r.seconds / aloneRate(r);
    verdicts.push([
      `file store, ${int(r.streams)} streams (${int(r.targetRate)}/s asked): commits/s close to what fsync allows here (at least 2/3 of what the store alone creates per second, or all that is asked)`,
      `${int(r.committed / r.seconds)} commits/s${holds(r) ? ', all asked' : ''}; the store alone ${aloneText(r, ' µs of CPU per create')}, before → after the engines: ${pct(share)} of their mean`,
      share >= 2 / 3 || holds(r) ? 'yes' : '**no**',
    ]);
  }
  for (const r of results.filter((x) => x.store === 'sqlite')) {
    verdicts.push([
      `${int(r.streams)} streams × ${bytes(r.size)} at a 2 s interval hold ${int(r.targetRate)} checkpoints/s on one SqliteStore, lateness flat over the window (${r.semiSpaceMb === undefined ? "Node's default heap settings" : `\`node --max-semi-space-size=${r.semiSpaceMb}\``})`,
      `${int(r.committed / r.seconds)} commits/s, backlog ${int(r.backlog)} at the end; lateness p50 ${ms(r.latenessFirst)} ms in the first fifth, ${ms(r.latenessLast)} ms in the last`,
      holds(r) ? 'yes' : '**no**',
    ]);
  }
  for (const r of across) {
    verdicts.push([
      `${int(r.streams)} streams × ${bytes(r.size)} at a 2 s interval, spread over ${r.processes!.length} processes on one PostgresStore table, hold ${int(r.targetRate)} checkpoints/s in all, lateness flat over the window`,
      `${int(r.committed / r.seconds)} commits/s (${r.processes!.map((p) => int(p.committed / p.seconds)).join(' + ')}), backlog ${int(r.backlog)} at the end; lateness p50 ${ms(r.latenessFirst)} ms in the first fifth, ${ms(r.latenessLast)} ms in the last`,
      holds(r) ? 'yes' : '**no**',
    ]);
  }
  for (const r of results.filter((x) => x.streams === biggest && x.ioThreads === undefined)) {
    verdicts.push([
      `re-open of ${int(r.streams)} streams in seconds (${label(r)}, ${r.mode})`,
      `${ms(r.reopenSeconds * 1000)} ms`,
      r.reopenSeconds <= 10 ? 'yes' : '**no**',
    ]);
  }
  if (verdicts.length > 0) out.push(table(['target', 'this run', 'met'], verdicts), '');
  if (results.length > 0)
    out.push(
      table(
        [
          'store',
          'store alone /s (CPU µs per create), before → after',
          'mode',
          'streams',
          'asked /s',
          ...SCHEDULE_HEADS,
          'heap per stream, open → end',
          'RSS per stream',
          'backlog at the end',
          'drain on close /s',
          're-open s',
          'holds',
        ],
        results.map((r) => [
          label(r),
          r.alone ? aloneText(r) : '–',
          r.mode,
          int(r.streams),
          int(r.targetRate),
          ...scheduleCells(r),
          `${bytes(r.heapOpenPerStream)} → ${bytes(r.heapPerStream)}`,
          bytes(r.rssPerStream),
          int(r.backlog ?? NaN),
          r.drainSeconds ? int((r.drained ?? 0) / r.drainSeconds) : '–',
          r.reopenSeconds.toFixed(2),
          holds(r) ? 'yes' : 'no',
        ]),
      ),
    );
  if (results.length > 0)
    out.push(
      '',
      'On the memory store the stored checkpoints are part of the heap, so its per-stream heap at the end includes every checkpoint written in the run. Where a run does not hold, the engines queue what they cannot commit and the process falls further behind the schedule as the window goes on.',
      '',
    );
  const alone = results.filter((r) => r.alone !== undefined);
  if (alone.length > 0) {
    out.push(
      'Each store alone, in the same processes as the runs above (before → after the engines): frame-sized creates, 256 in flight, and the CPU of the whole process (threads included) per create.',
    );
    out.push('');
    out.push(
      table(
        ['store', 'run it was measured in', 'creates/s', 'CPU µs per create'],
        alone.map((r) => {
          const runs = aloneRuns(r);
          return [
            label(r),
            `${int(r.streams)} streams`,
            runs.map((a) => int(a.rate)).join(' → '),
            runs.map((a) => int(a.cpuUsPerCreate)).join(' → '),
          ];
        }),
      ),
    );
    out.push('');
  }
  out.push(...acrossSection(across, skipped));
  const threads = results.find((r) => r.store === 'file' && r.ioThreads === undefined && r.streams === biggest);
  const pool = results.find((r) => r.store === 'file' && r.ioThreads === 0 && r.streams === biggest);
  if (threads && pool) {
    const rate = (r: ManyResult): number => r.committed / r.seconds;
    out.push(
      `FileStore I/O threads against Node's own thread pool (\`ioThreads: 0\`), the same run otherwise: ${int(rate(threads))} against ${int(rate(pool))} commits/s (${(rate(threads) / rate(pool)).toFixed(2)}×); the store alone ${threads.alone ? int(aloneRate(threads)) : '–'} against ${pool.alone ? int(aloneRate(pool)) : '–'} creates/s (mean of before and after); re-open ${threads.reopenSeconds.toFixed(1)} s against ${pool.reopenSeconds.toFixed(1)} s. A create costs ${int(threads.alone?.cpuUsPerCreate ?? NaN)} µs of CPU here, most of it in the kernel's fsync: on 2 cores, the engines' captures and the stores' fsyncs share what there is, so the store alone is an upper bound that a process which also captures cannot reach.`,
    );
    out.push('');
  }
  return out;
}

/** The runs across processes on one PostgreSQL: each process's figures and all of them together. */
function acrossSection(across: ManyResult[], skipped: string | undefined): string[] {
  if (across.length === 0 && skipped === undefined) return [];
  const out = ['### Many streams across two processes on one PostgreSQL', ''];
  if (across.length === 0) return [...out, `These runs did not run: ${skipped}.`, ''];
  out.push(
    `The same agents and schedule, the streams split evenly over two processes (each its own Node process, streams of its own names) on one PostgresStore table of one PostgreSQL server on this machine (Debian's defaults: fsync and synchronous_commit on), a fresh table for each run, dropped afterwards. Every phase (the store alone, the window, the store alone after) starts in both processes together. Each store instance group-commits: the writes that arrive together go to the server as one statement, one transaction and one WAL flush. Per process and all together: commits against what was asked, lateness (in all: over the checkpoints of both), commit latency, the process's CPU per checkpoint, the PostgreSQL server's CPU per checkpoint over the window (all its processes, read from /proc; both processes' checkpoints), the backlog at the end; the store alone: frame-sized creates, 256 in flight in each process, before and after the engines. The server shares this machine's cores with both processes.`,
  );
  out.push('');
  const rows: string[][] = [];
  for (const r of across) {
    const n = r.processes!.length;
    const row = (label: string, x: ManyResult): string[] => [
      label,
      int(x.streams),
      x.alone ? aloneText(x) : '–',
      int(x.targetRate),
      ...scheduleCells(x),
      x.serverCpuPerCheckpoint === undefined ? '–' : x.serverCpuPerCheckpoint.toFixed(2),
      int(x.backlog),
      x.drainSeconds ? int(x.drained / x.drainSeconds) : '–',
      x.reopenSeconds.toFixed(2),
      holds(x) ? 'yes' : 'no',
    ];
    r.processes!.forEach((p, k) => rows.push(row(`process ${k + 1} of ${n}`, p)));
    rows.push(row(`**all ${n}**`, r));
  }
  out.push(
    table(
      [
        'postgres',
        'streams',
        'store alone /s (CPU µs per create), before → after',
        'asked /s',
        ...SCHEDULE_HEADS,
        'server CPU ms per checkpoint',
        'backlog at the end',
        'drain on close /s',
        're-open s',
        'holds',
      ],
      rows,
    ),
  );
  out.push('');
  return out;
}

/** The store alone's runs that ran: before the engines, and after them. */
/** The columns both many-streams tables give each run: how it kept to its schedule, and at what CPU. */
const SCHEDULE_HEADS = [
  'called /s',
  'committed /s',
  'lateness p50 / p99 ms',
  'lateness first → last fifth',
  'commit p50 / p99 ms',
  'loop delay p99 / max ms',
  'CPU ms per checkpoint (in steps)',
];

function scheduleCells(r: ManyResult): string[] {
  return [
    int(r.called / r.seconds),
    int(r.committed / r.seconds),
    `${ms(r.lateness.p50)} / ${ms(r.lateness.p99)}`,
    `${ms(r.latenessFirst)} → ${ms(r.latenessLast)}`,
    `${ms(r.commit.p50)} / ${ms(r.commit.p99)}`,
    `${ms(r.loopDelay.p99)} / ${ms(r.loopDelay.max)}`,
    `${r.cpuPerCheckpoint.toFixed(2)} (${pct(r.stepShare)})`,
  ];
}

function aloneRuns(r: ManyResult): StoreAlone[] {
  return [r.alone, r.aloneAfter].filter((a) => a !== undefined);
}

/** The store alone's creates per second: the mean of its runs before and after the engines (when both ran). */
function aloneRate(r: ManyResult): number {
  const runs = aloneRuns(r);
  return runs.reduce((sum, a) => sum + a.rate, 0) / runs.length;
}

/** The store alone's runs, before → after the engines: creates per second, and (unit) CPU µs per create. */
function aloneText(r: ManyResult, unit = ''): string {
  const runs = aloneRuns(r);
  return `${runs.map((a) => int(a.rate)).join(' → ')}${unit && '/s'} (${runs.map((a) => int(a.cpuUsPerCreate)).join(' → ')}${unit})`;
}

/** A run's store as its rows name it: with its FileStore ioThreads or its young generation, when set. */
function label(r: ManyResult): string {
  const parts: string[] = [r.store];
  if (r.ioThreads !== undefined) parts.push(`ioThreads ${r.ioThreads}`);
  if (r.semiSpaceMb !== undefined) parts.push(`--max-semi-space-size=${r.semiSpaceMb}`);
  return parts.join(', ');
}
