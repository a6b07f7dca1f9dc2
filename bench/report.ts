/**
 * BENCHMARKS.md, the summary page (machine, headline, statefold against its peers, charts): written
 * from the results of one run, never by hand. Every table of the run is in the appendix (report-appendix.ts).
 */
import { SHORT, STRATEGIES, type StrategyId } from './strategies.js';
import { table, bytes, int, ms, pct, median, type Summary } from './stats.js';
import type { MicroResult, RestoreResult, StallResult, ThroughputResult, Interval } from './scenarios.js';
import type { WriteCounts } from './stores.js';
import type { MemoryResult } from './memory.js';
import type { HistoryResult } from './history.js';
import type { EncryptionResult } from './encryption.js';
import type { ManyResult } from './many.js';
import { langgraphHeadline } from './report-langgraph.js';
import type { LangGraphResult } from './langgraph.js';
import type { ResumeResult } from './fresh.js';
import type { StoresAloneResult } from './sqlite-store.js';
import { changeVerdicts, type Verdict } from './report-change.js';
import type { WorkloadName } from './workload.js';

export interface Machine {
  cpu: string;
  cores: number;
  memory: string;
  node: string;
  os: string;
  commit: string;
}

export interface RunInfo {
  mode: 'full' | 'quick' | 'smoke';
  command: string;
  startedAt: string;
  wallSeconds: number;
  change: number;
  seed: number;
  stepWorkMs: number;
  workPerMs: number;
  headlineSize: number;
  headlineWorkload: WorkloadName;
  throughputStore: string;
  durations: Record<string, number>;
  /** 1-minute load average when the run started and ended. */
  load: { start: number; end: number };
  /** Set when the report was re-rendered from a results file instead of measured. */
  renderedFrom?: string;
  s3: string;
  charts: { bytesPerHour: string; stall: string; restore: string };
}

export interface Results {
  run: RunInfo;
  machine: Machine;
  stall: StallResult[];
  throughput: ThroughputResult[];
  restore: RestoreResult[];
  micro: MicroResult[];
  memory: MemoryResult[];
  /** Absent in results written before this section existed. */
  history?: HistoryResult[];
  many?: ManyResult[];
  /** Why the many-streams runs on PostgreSQL did not run (absent when they did, or were not in the plan). */
  manySkipped?: string;
  encryption?: EncryptionResult[];
  langgraph?: LangGraphResult;
  /** Absent in results written before this section existed. */
  resume?: ResumeResult[];
  /** Absent in results written before this section existed. */
  storesAlone?: StoresAloneResult;
}

export const sizeLabel = (n: number): string => bytes(n).replace(' ', '\u00a0');
export const intervalLabel = (i: Interval | null): string =>
  i === null ? 'none' : i === 'step' ? 'every step' : i >= 1000 ? `${i / 1000} s` : `${i} ms`;
const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
export const spread = (s: Summary): string => `${ms(s.p50)} / ${ms(s.p99)}`;

/** Per-1,000-step figures of a stall run (one checkpoint per step). */
export function per1000(r: StallResult): {
  bytes: number;
  base: number;
  delta: number;
  full: number;
  requests: number;
} {
  const k = 1000 / r.steps;
  const c: WriteCounts = r.counts;
  return {
    bytes: sum(c.bytes) * k,
    base: c.bytes.base * k,
    delta: c.bytes.delta * k,
    full: c.bytes.full * k,
    requests: sum(c.requests) * k,
  };
}

export function find<T extends { workload: WorkloadName; size: number; store: string }>(
  rows: T[],
  workload: WorkloadName,
  size: number,
  store: string,
  more: (r: T) => boolean,
): T | undefined {
  return rows.find((r) => r.workload === workload && r.size === size && r.store === store && more(r));
}

export function renderReport(res: Results): string {
  const { run, machine } = res;
  const H = run.headlineSize;
  const W = run.headlineWorkload;
  const headStore = res.stall.some((r) => r.store === 'file') ? 'file' : 'memory';
  const out: string[] = [];
  const p = (s = ''): void => void out.push(s);

  p('# statefold benchmarks');
  p();
  p(`${generatedLine(run)} Every table of the run: [the appendix](${APPENDIX}).`);
  if (run.mode !== 'full')
    p(
      `\n**This is a ${run.mode} run: fewer steps and shorter loops than the full run; its figures are indicative only.**`,
    );
  p();
  p('## Machine');
  p();
  p(
    table(
      ['', ''],
      [
        ['CPU', machine.cpu],
        ['cores', String(machine.cores)],
        ['memory', machine.memory],
        ['Node', machine.node],
        ['OS', machine.os],
        ['statefold commit', machine.commit],
        ['load average (1 min) at start / end', `${run.load.start.toFixed(2)} / ${run.load.end.toFixed(2)}`],
      ],
    ),
  );
  p();
  p(
    'A shared machine with noisy neighbours (a load average above the core count means other processes competed for the CPU): compare figures within this run, not across runs. Preemption by neighbours shows up in p99s and in wall-clock throughput; CPU time per step (below) is far less sensitive to it.',
  );
  p();
  // ---- headline verdicts
  const verdicts: Verdict[] = [];
  const notes: string[] = [];
  verdicts.push(...changeVerdicts(res.stall, res.memory, W, H, headStore));
  const refs = res.throughput.filter((r) => r.strategy === 'none');
  const ref = median(refs.map((r) => r.stepsPerSec));
  const t2 = res.throughput.find((r) => r.strategy === 'sf-immutable' && r.interval === 2000);
  const refCpu = median(refs.map((r) => r.cpuMsPerStep));
  if (t2 && refs.length > 0) {
    const loss = 1 - t2.stepsPerSec / ref;
    const cpuLoss = 1 - refCpu / t2.cpuMsPerStep;
    const noise =
      refs.length > 1
        ? (Math.max(...refs.map((r) => r.stepsPerSec)) - Math.min(...refs.map((r) => r.stepsPerSec))) / ref
        : NaN;
    const cpuNoise =
      (Math.max(...refs.map((r) => r.cpuMsPerStep)) - Math.min(...refs.map((r) => r.cpuMsPerStep))) / refCpu;
    const inCalls = (t2.stall.mean * t2.stall.n) / t2.durationMs;
    // A target finer than the spread between identical reference runs cannot be judged here.
    const met: Verdict['met'] = cpuNoise > 0.01 ? 'noise' : cpuLoss <= 0.01;
    const why = met
      ? ''
      : `${t2.checkpoints} checkpoints in ${(t2.durationMs / 1000).toFixed(1)} s, their calls p50 ${ms(t2.stall.p50)} ms / max ${ms(t2.stall.max)} ms; CPU per step ${t2.cpuMsPerStep.toFixed(2)} ms against ${refCpu.toFixed(2)} ms without checkpoints.`;
    if (cpuNoise > 0.01) {
      notes.push(
        `The throughput target (≤ 1%) is finer than this machine's run-to-run noise: the no-checkpoint reference runs differ by ${pct(cpuNoise)} in CPU time per step and ${pct(noise)} in wall-clock throughput. The loss measured at 2 s (${pct(cpuLoss)} in CPU time) is within that noise; statefold's own share, the time spent inside checkpoint() calls, was ${pct(inCalls, 2)} of the run.`,
      );
    }
    verdicts.push({
      target: '≤ 1% throughput loss at a 2 s interval',
      source: '12% at 2 s',
      ours: `${pct(cpuLoss)} in CPU time per step (${t2.cpuMsPerStep.toFixed(2)} vs ${refCpu.toFixed(2)} ms; the reference runs spread by ${pct(cpuNoise)}); checkpoint() calls took ${pct(inCalls, 2)} of the run; wall clock ${pct(loss)} (${t2.stepsPerSec.toFixed(1)} vs ${ref.toFixed(1)} steps/s, reference runs n ${refs.length} spread ${pct(noise)})`,
      met,
      why,
    });
  }
  const im = find(res.stall, W, H, headStore, (r) => r.strategy === 'sf-immutable');
  const full = find(res.stall, W, H, headStore, (r) => r.strategy === 'sf-full');
  if (im && full) {
    const saving = 1 - per1000(im).bytes / per1000(full).bytes;
    const met = saving >= 0.9;
    const b = per1000(im);
    const why = met
      ? ''
      : `bases are ${pct(b.base / b.bytes)} of statefold's bytes (one every ≤ 32 checkpoints, or sooner when the deltas outgrow the base: maxDeltaRatio 1).`;
    verdicts.push({
      target: `≥ 90% fewer bytes than full msgpackr+lz4 snapshots (${sizeLabel(H)} ${W} workload)`,
      source: 'up to 70% storage saved',
      ours: `${pct(saving)} fewer (${bytes(b.bytes)} vs ${bytes(per1000(full).bytes)} per 1,000 steps)`,
      met,
      why,
    });
  }
  const rs =
    res.restore.find((r) => r.workload === W && r.size === H && r.store === 'file' && r.chain === 100) ??
    res.restore.find((r) => r.workload === W && r.size === H && r.chain === 100);
  if (rs) {
    const met = rs.latency.p50 <= 50;
    const why = met
      ? ''
      : `the chain is ${bytes(rs.chainBytes)} of frames to read, verify, decompress, decode and fold.`;
    verdicts.push({
      target: `restore ≤ 50 ms (${sizeLabel(H)} ${W} workload, 100-delta chain, ${rs.store} store)`,
      source: 'sub-second recovery',
      ours: `p50 ${ms(rs.latency.p50)} ms, p99 ${ms(rs.latency.p99)} ms (n ${rs.latency.n})`,
      met,
      why,
    });
  }
  p('## Headline: targets, earlier figures, and this run');
  p();
  p(
    `Judged on the headline workload (a coding agent whose tool results are real files: [workloads](${APPENDIX}#workloads)) at ${sizeLabel(H)}. Earlier figures: statefold before this release where stated, otherwise the reports that motivated statefold, for a 500 KB state: 15 ms per checkpoint at a 10 s interval; 50 ms and 12% throughput loss at 2 s; incremental checkpoints saving up to 70% of storage; sub-second recovery.`,
  );
  p();
  p(
    table(
      ['target', 'earlier figures', 'statefold, this run', 'met'],
      verdicts.map((v) => [
        v.target,
        v.source,
        v.ours,
        v.met === undefined
          ? 'n/a'
          : v.met === 'noise'
            ? 'cannot tell: within noise (see below)'
            : v.met
              ? 'yes'
              : '**no**',
      ]),
    ),
  );
  p();
  for (const n of notes) {
    p(n);
    p();
  }
  const missed = verdicts.filter((v) => v.met === false);
  if (missed.length > 0) {
    p('### Targets missed, and why');
    p();
    for (const v of missed) p(`- **${v.target}**: ${v.why}`);
    p();
  }
  const t10 = res.throughput.find((r) => r.strategy === 'sf-immutable' && r.interval === 10000);
  if (t2 || t10) {
    p(
      `Checkpoint calls inside the agent loop (${sizeLabel(H)}, ${run.throughputStore} store; compare with the reports' 15 ms at 10 s and 50 ms at 2 s): ` +
        [
          t2 && `at 2 s p50 ${ms(t2.stall.p50)} ms, max ${ms(t2.stall.max)} ms (n ${t2.stall.n})`,
          t10 && `at 10 s p50 ${ms(t10.stall.p50)} ms, max ${ms(t10.stall.max)} ms (n ${t10.stall.n})`,
        ]
          .filter(Boolean)
          .join('; ') +
        '.',
    );
    p();
  }
  for (const line of peersSection(res, W, H, headStore)) p(line);
  for (const line of langgraphHeadline(res.langgraph, H, APPENDIX)) p(line);

  p('## Charts');
  p();
  p(`![bytes per agent-hour against interval](${run.charts.bytesPerHour})`);
  p();
  p(`![stall against state size](${run.charts.stall})`);
  p();
  p(`![restore time against chain length](${run.charts.restore})`);
  p();

  p('## How to reproduce');
  p();
  p('```sh');
  p("npm ci && npm ci --prefix bench   # the library, then the bench's own dependencies (bench/package.json)");
  p(
    `npm run bench                     # full run: writes BENCHMARKS.md, ${APPENDIX}, bench/charts/*.svg, bench/results.json`,
  );
  p('npm run bench -- --quick          # fewer steps, indicative; writes to a new temp folder');
  p(
    'npm run bench -- --out /tmp/b     # write elsewhere; --change 0.05, --seed 2, --step-work-ms 20 change the workload',
  );
  p(
    'npm run bench -- --from-results bench/results.json   # re-render the pages and charts of a run, measuring nothing',
  );
  p('# S3: set STATEFOLD_S3_ENDPOINT, STATEFOLD_S3_REGION, STATEFOLD_S3_BUCKET,');
  p('#     STATEFOLD_S3_ACCESS_KEY_ID, STATEFOLD_S3_SECRET_ACCESS_KEY and the same commands add S3 rows');
  p('```');
  p();
  p(`S3 in this run: ${run.s3}.`);
  p();
  return out.join('\n');
}

/** statefold's two modes against the other ways to checkpoint the same state, at the headline size. */
function peersSection(res: Results, W: WorkloadName, H: number, store: string): string[] {
  const rows = (Object.keys(STRATEGIES) as StrategyId[])
    .map((id) => find(res.stall, W, H, store, (r) => r.strategy === id))
    .filter((r): r is StallResult => r !== undefined);
  if (rows.length === 0) return [];
  const full = rows.find((r) => r.strategy === 'sf-full');
  const json = rows.find((r) => r.strategy === 'json-gzip');
  const fewer = (r: StallResult, o: StallResult | undefined): string =>
    o === undefined || o === r ? '–' : pct(1 - per1000(r).bytes / per1000(o).bytes);
  return [
    `## statefold against the other ways to checkpoint (${W} ${sizeLabel(H)}, ${store} store, one checkpoint per step)`,
    '',
    `The same state and steps through each strategy (the workloads and strategies: [appendix](${APPENDIX}#workloads)). Milliseconds p50 / p99: stall is how long \`checkpoint()\` blocks the caller, loop blocked adds the main-thread work it queues, commit is until the checkpoint is durable.`,
    '',
    table(
      [
        'strategy',
        'stall',
        'loop blocked',
        'commit',
        'bytes per 1,000 steps',
        'fewer bytes than full msgpackr+lz4',
        'than JSON+gzip',
      ],
      rows.map((r) => [
        SHORT[r.strategy],
        spread(r.stall),
        spread(r.loopBlock),
        spread(r.commit),
        bytes(per1000(r).bytes),
        fewer(r, full),
        fewer(r, json),
      ]),
    ),
    '',
  ];
}

/** Where the appendix goes, from the directory BENCHMARKS.md is written to. */
export const APPENDIX = 'docs/benchmarks-appendix.md';

/** What every page of the report says first: which run and which command wrote it. */
export function generatedLine(run: RunInfo): string {
  return `Generated by \`${run.command}\` (${run.mode} mode) on ${run.startedAt}, in ${Math.round(run.wallSeconds)} s${run.renderedFrom ? `; text and charts re-rendered from that run's ${run.renderedFrom} by \`npm run bench -- --from-results ${run.renderedFrom}\`` : ''}. Do not edit: rerun the command.`;
}
