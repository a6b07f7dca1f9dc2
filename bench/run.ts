/**
 * `npm run bench [-- --quick | --smoke] [--out DIR] [--change F] [--seed N] [--step-work-ms MS] [--from-results FILE]
 *   [--only SECTION,...] [--langgraph-sizes KB,...] [--rounds N] [--many-stores STORE,...]`
 *
 * --only runs the named sections alone (SECTIONS below), --langgraph-sizes replaces the plan's LangGraph
 * sizes (KB), --rounds the rounds of the LangGraph, resume and stores sections, --many-stores keeps the
 * many-streams runs on those stores: for measuring one thing without the whole run (its pages then
 * render only what ran).
 *
 * Runs every scenario, then writes DIR/BENCHMARKS.md, DIR/docs/benchmarks-appendix.md,
 * DIR/bench/charts/*.svg and DIR/bench/results.json (`--from-results FILE`: only re-renders them
 * from an earlier run's results). DIR defaults to the repository root for a full run, and to a new temp
 * folder for --quick and --smoke (so trying the bench leaves the checkout clean). Progress goes to stderr.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { bytesPerHourChart, renderSvg, restoreChart, stallChart } from './charts.js';
import { renderReport, intervalLabel, APPENDIX, type Machine, type Results } from './report.js';
import { renderAppendix } from './report-appendix.js';
import {
  calibrateWork,
  microScenario,
  restoreScenario,
  stallScenario,
  throughputRun,
  type Interval,
  type ThroughputResult,
} from './scenarios.js';
import { Progress, median } from './stats.js';
import { fileStores, memoryStores, s3Stores, type StoreKind } from './stores.js';
import { resumeScenario } from './fresh.js';
import { storesAloneScenario } from './sqlite-store.js';
import { historyScenario } from './history.js';
import { manyStreamsInChild } from './many.js';
import { manyStreamsOnPostgres } from './many-processes.js';
import { encryptionScenario } from './encryption.js';
import { memoryScenario } from './memory.js';
import { langgraphScenario } from './langgraph.js';
import { SHORT, type StrategyId } from './strategies.js';
import type { WorkloadName } from './workload.js';
import { WORKLOADS } from './workloads.js';

type Mode = 'full' | 'quick' | 'smoke';

/** The sections of a run, in the order they run; `--only` picks some. */
const SECTIONS = [
  'micro',
  'stall',
  'memory',
  'encryption',
  'langgraph',
  'throughput',
  'restore',
  'resume',
  'history',
  'many',
  'stores',
] as const;
type Section = (typeof SECTIONS)[number];

/** The `policy.spanEvery` the README suggests for S3 (span deltas are opt-in). */
const S3_SPAN_EVERY = 8;

interface Plan {
  /** State sizes per workload for the stall, bytes and restore runs (the headline workload first). */
  sizes: Record<WorkloadName, number[]>;
  stallSteps: (size: number, strategy: StrategyId) => number;
  strategies: StrategyId[];
  throughput: {
    size: number;
    /** Strategies run at every interval. */
    everyInterval: StrategyId[];
    /** Strategies run at some intervals only (besides the baseline interval). */
    someIntervals?: { strategy: StrategyId; intervals: Interval[] }[];
    /** Strategies run at the baseline interval only. */
    atBaselineInterval: StrategyId[];
    baselineInterval: number;
    intervals: Interval[];
    duration: (interval: Interval | null) => number;
    references: number;
  };
  restore: { chains: (size: number) => number[]; time: number; iterations: number };
  micro: { time: number; iterations: number };
  s3: { size: number; steps: number; strategies: StrategyId[]; chains: number[] };
  /** Checkpoints taken before measuring what an engine keeps in memory. */
  memorySteps: number;
  /** History lengths (checkpoints) read on the file and S3 stores, and timed runs per operation. */
  history: { file: number[]; s3: number[]; runs: number; size: number };
  /** Encryption's cost on the headline workload (file store): steps per stall run, rounds, restore chain and samples. */
  encryption: { steps: number; rounds: number; chain: number; restores: number };
  /** Many streams in one process: runs (store, update mode), streams, state size, warm-up and window. */
  many: {
    /** Runs; `streams` and `ioThreads` (FileStore) override the plan's for one run. */
    runs: {
      store: 'memory' | 'file' | 'sqlite' | 'postgres';
      mode: 'copy' | 'immutable';
      windowMs?: number;
      streams?: number;
      ioThreads?: number;
      /** `node --max-semi-space-size` (MB) for the run's process: V8's young generation, where a checkpoint's garbage goes. */
      semiSpaceMb?: number;
      /** PostgresStore runs: the streams split over this many processes on one table (only when STATEFOLD_PG_URL is set). */
      processes?: number;
    }[];
    streams: number;
    size: number;
    warmupMs: number;
    windowMs: number;
    /** File runs: how long the store alone is measured first (what fsync allows here). */
    aloneMs: number;
  };
  /**
   * LangGraph savers side by side: state sizes, tool calls per run (over 50, for a read 100 puts
   * back), and rounds at each size (every saver once per round).
   */
  langgraph: { sizes: number[]; toolCalls: number; rounds: (size: number) => number };
  /** Resume from a fresh process: the engine's open + state of a stream of `checkpoints`, `rounds` times per store. */
  resume: { size: number; checkpoints: number; rounds: number };
  /** Each store alone and the disk's limits (sqlite-store.ts): rounds, and how long each part runs. */
  stores: { rounds: number; sequential: number; concurrentMs: number; diskMs: number };
}

const K = 1000;
const PLANS: Record<Mode, Plan> = {
  full: {
    sizes: { coding: [50 * K, 500 * K, 5000 * K], embeddings: [500 * K] },
    stallSteps: (size, s) => (s === 'json-gzip' ? (size >= 5000 * K ? 30 : 250) : size >= 5000 * K ? 150 : 1000),
    strategies: ['sf-immutable', 'sf-copy', 'sf-full', 'json-gzip', 'fjp-mirror'],
    throughput: {
      size: 500 * K,
      everyInterval: ['sf-immutable', 'sf-copy'],
      atBaselineInterval: ['sf-full', 'json-gzip', 'fjp-mirror'],
      baselineInterval: 2000,
      intervals: ['step', 100, 500, 2000, 10000],
      duration: (i) => (i === 10000 ? 60_000 : i === 2000 ? 20_000 : 15_000),
      references: 3,
    },
    restore: { chains: () => [1, 10, 100, 1000], time: 1000, iterations: 10 },
    micro: { time: 500, iterations: 10 },
    s3: { size: 500 * K, steps: 200, strategies: ['sf-immutable', 'sf-full', 'json-gzip'], chains: [1, 10, 100] },
    memorySteps: 40,
    encryption: { steps: 300, rounds: 3, chain: 31, restores: 40 },
    history: { file: [100, 10_000, 100_000], s3: [100, 5_000], runs: 10, size: 5 * K },
    many: {
      runs: [
        { store: 'memory', mode: 'copy' },
        { store: 'memory', mode: 'immutable' },
        // The file store falls behind at this rate; a shorter window keeps the drain on close short.
        { store: 'file', mode: 'copy', windowMs: 8000 },
        // Writes on Node's own thread pool, as before write threads: the same run, side by side.
        { store: 'file', mode: 'copy', windowMs: 8000, ioThreads: 0 },
        // A rate the file store can hold here (2,000/s).
        { store: 'file', mode: 'copy', windowMs: 8000, streams: 4_000 },
        // One SqliteStore: its group commit at 5,000 and 10,000 checkpoints/s.
        { store: 'sqlite', mode: 'copy' },
        { store: 'sqlite', mode: 'copy', streams: 20_000 },
        // The same with a larger young generation (operations.md, production settings): scavenges
        // of the checkpoints' garbage, not the store, are what the main thread runs out of here.
        { store: 'sqlite', mode: 'copy', semiSpaceMb: 64 },
        { store: 'sqlite', mode: 'copy', streams: 20_000, semiSpaceMb: 64 },
        // Two processes on one PostgreSQL table, 5,000 streams each.
        { store: 'postgres', mode: 'copy', processes: 2 },
      ],
      streams: 10_000,
      size: 20 * K,
      warmupMs: 4000,
      windowMs: 20_000,
      aloneMs: 5000,
    },
    langgraph: {
      sizes: [10 * K, 50 * K, 500 * K, 5000 * K],
      toolCalls: 55,
      rounds: (size) => (size <= 50 * K ? 5 : 1),
    },
    resume: { size: 100 * K, checkpoints: 200, rounds: 9 },
    stores: { rounds: 5, sequential: 300, concurrentMs: 3000, diskMs: 1000 },
  },
  quick: {
    sizes: { coding: [50 * K, 500 * K, 5000 * K], embeddings: [500 * K] },
    stallSteps: (size, s) => (s === 'json-gzip' ? (size >= 5000 * K ? 5 : 30) : size >= 5000 * K ? 12 : 100),
    strategies: ['sf-immutable', 'sf-copy', 'sf-full', 'json-gzip', 'fjp-mirror'],
    throughput: {
      size: 500 * K,
      everyInterval: ['sf-immutable'],
      someIntervals: [{ strategy: 'sf-copy', intervals: ['step', 2000] }],
      atBaselineInterval: ['sf-full', 'json-gzip'],
      baselineInterval: 2000,
      intervals: ['step', 100, 500, 2000, 10000],
      duration: (i) => (i === 10000 ? 10_500 : i === 2000 ? 4_500 : 1_500),
      references: 2,
    },
    restore: { chains: (size) => (size >= 5000 * K ? [1, 10, 100] : [1, 10, 100, 1000]), time: 100, iterations: 5 },
    micro: { time: 50, iterations: 5 },
    s3: { size: 500 * K, steps: 30, strategies: ['sf-immutable', 'sf-full', 'json-gzip'], chains: [1, 10] },
    memorySteps: 10,
    encryption: { steps: 60, rounds: 2, chain: 31, restores: 10 },
    history: { file: [100, 10_000], s3: [100, 1_000], runs: 3, size: 5 * K },
    many: {
      runs: [
        { store: 'memory', mode: 'copy' },
        { store: 'file', mode: 'copy' },
        { store: 'sqlite', mode: 'copy' },
        { store: 'postgres', mode: 'copy', processes: 2, streams: 1_000 },
      ],
      streams: 2_000,
      size: 20 * K,
      warmupMs: 1000,
      windowMs: 4000,
      aloneMs: 2000,
    },
    langgraph: { sizes: [10 * K, 50 * K, 500 * K], toolCalls: 55, rounds: () => 1 },
    resume: { size: 100 * K, checkpoints: 200, rounds: 3 },
    stores: { rounds: 2, sequential: 100, concurrentMs: 1000, diskMs: 300 },
  },
  smoke: {
    sizes: { coding: [5 * K, 20 * K], embeddings: [20 * K] },
    stallSteps: () => 8,
    strategies: ['sf-immutable', 'sf-copy', 'sf-full', 'json-gzip', 'fjp-mirror'],
    throughput: {
      size: 20 * K,
      everyInterval: ['sf-immutable', 'sf-copy'],
      atBaselineInterval: ['sf-full', 'json-gzip'],
      baselineInterval: 2000,
      intervals: ['step', 100, 500, 2000, 10000],
      duration: () => 150,
      references: 1,
    },
    restore: { chains: () => [1, 10], time: 10, iterations: 3 },
    micro: { time: 5, iterations: 3 },
    s3: { size: 5 * K, steps: 5, strategies: ['sf-immutable', 'json-gzip'], chains: [1] },
    memorySteps: 3,
    encryption: { steps: 8, rounds: 1, chain: 3, restores: 3 },
    history: { file: [100, 300], s3: [100], runs: 2, size: 5 * K },
    many: {
      runs: [
        { store: 'memory', mode: 'copy' },
        { store: 'file', mode: 'copy' },
        { store: 'sqlite', mode: 'copy' },
        { store: 'postgres', mode: 'copy', processes: 2 },
      ],
      streams: 100,
      size: 5 * K,
      warmupMs: 200,
      windowMs: 800,
      aloneMs: 200,
    },
    langgraph: { sizes: [20 * K], toolCalls: 51, rounds: () => 1 },
    resume: { size: 5 * K, checkpoints: 20, rounds: 1 },
    stores: { rounds: 1, sequential: 10, concurrentMs: 100, diskMs: 30 },
  },
};

function machine(root: string): Machine {
  const cpus = os.cpus();
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    const dirty = execFileSync(
      'git',
      ['status', '--porcelain', '--untracked-files=no', '--', 'engine', 'storage-adapters'],
      { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    ).trim();
    if (dirty) commit += ' + uncommitted changes in engine/ or storage-adapters/';
  } catch {
    // not a git checkout
  }
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    commit,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      smoke: { type: 'boolean', default: false },
      out: { type: 'string' },
      change: { type: 'string', default: '0.01' },
      seed: { type: 'string', default: '1' },
      'step-work-ms': { type: 'string', default: '10' },
      'from-results': { type: 'string' },
      only: { type: 'string' },
      'langgraph-sizes': { type: 'string' },
      rounds: { type: 'string' },
      'many-stores': { type: 'string' },
    },
    allowPositionals: false,
  });
  if (values['from-results'] !== undefined) {
    // Re-renders the text and charts of an earlier run from its raw results (no measuring).
    const file = values['from-results'];
    const results = JSON.parse(readFileSync(file, 'utf8')) as Results;
    results.run.renderedFrom = path.relative(path.resolve(values.out ?? '.'), path.resolve(file)) || file;
    await writeOutputs(
      results,
      path.resolve(values.out ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')),
    );
    return;
  }
  const mode: Mode =
    values.smoke || process.env.STATEFOLD_BENCH_SMOKE === '1' ? 'smoke' : values.quick ? 'quick' : 'full';
  const plan = narrowed(PLANS[mode], values);
  const only = values.only?.split(',').map((x) => x.trim());
  for (const x of only ?? [])
    if (!(SECTIONS as readonly string[]).includes(x))
      throw new Error(`bench: --only takes sections among ${SECTIONS.join(', ')} (got ${x})`);
  const want = (section: Section): boolean => only === undefined || only.includes(section);
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  // Only a full run writes into the repository by default; quick and smoke runs go to a temp folder unless --out says otherwise.
  const outDir = path.resolve(
    values.out ?? (mode === 'full' ? root : mkdtempSync(path.join(os.tmpdir(), `statefold-bench-${mode}-`))),
  );
  const change = Number(values.change);
  const seed = Number(values.seed);
  const stepWorkMs = Number(values['step-work-ms']);
  if (!(change > 0 && change <= 1) || !Number.isInteger(seed) || !(stepWorkMs >= 0))
    throw new Error('bench: --change must be in (0, 1], --seed an integer, --step-work-ms >= 0');
  const argv = process.argv.slice(2);
  const command = `npm run bench${argv.length ? ` -- ${argv.join(' ')}` : ''}`;
  const started = new Date();
  const t0 = performance.now();

  const runId = `${started.toISOString().replace(/[-:.TZ]/g, '')}-${process.pid}`;
  const kinds: StoreKind[] = [memoryStores(), fileStores()];
  const s3 = await s3Stores(runId);
  const s3Note =
    typeof s3 === 'string'
      ? `skipped (${s3})`
      : `yes (${process.env.STATEFOLD_S3_ENDPOINT}, bucket ${process.env.STATEFOLD_S3_BUCKET})`;

  const tp = plan.throughput;
  const throughputRuns: { strategy: StrategyId | 'none'; interval: Interval | null }[] = [];
  const refAt = new Set<number>();
  const mains: { strategy: StrategyId; interval: Interval }[] = [];
  for (const s of tp.everyInterval) for (const i of tp.intervals) mains.push({ strategy: s, interval: i });
  for (const { strategy, intervals } of tp.someIntervals ?? [])
    for (const i of intervals) mains.push({ strategy, interval: i });
  for (const s of tp.atBaselineInterval) mains.push({ strategy: s, interval: tp.baselineInterval });
  // Reference (no checkpoint) runs spread evenly through the sequence, so drift hits both.
  for (let r = 0; r < tp.references; r++)
    refAt.add(Math.round((r * mains.length) / Math.max(1, tp.references - 1 || 1)));
  for (let i = 0; i <= mains.length; i++) {
    if (refAt.has(i)) throughputRuns.push({ strategy: 'none', interval: null });
    if (i < mains.length) throughputRuns.push(mains[i]!);
  }
  while (throughputRuns.filter((r) => r.strategy === 'none').length < tp.references)
    throughputRuns.push({ strategy: 'none', interval: null });

  const headline: WorkloadName = WORKLOADS[0]!;
  const stallSets = WORKLOADS.flatMap((w) => plan.sizes[w].map((size) => ({ workload: w, size })));
  const stallRuns =
    stallSets.length * kinds.length * plan.strategies.length + (typeof s3 === 'string' ? 0 : plan.s3.strategies.length);
  const counted: Record<Section, number> = {
    micro: stallSets.length,
    stall: stallRuns,
    memory: WORKLOADS.length,
    encryption: 1,
    langgraph: 1,
    throughput: throughputRuns.length,
    restore: plan.sizes[headline].length + (typeof s3 === 'string' ? 0 : 2) /* s3, without and with span deltas */,
    resume: 1,
    history: 1,
    many: plan.many.runs.length,
    stores: 1,
  };
  const total = SECTIONS.filter(want).reduce((n, section) => n + counted[section], 0);
  const progress = new Progress(total);
  process.stderr.write(`statefold bench: ${mode} mode, ${total} scenarios; output to ${outDir}\n`);
  if (typeof s3 === 'string') process.stderr.write(`S3 skipped: ${s3}\n`);

  const results: Results = {
    run: {
      mode,
      command,
      startedAt: started.toISOString().replace(/\.\d+Z$/, 'Z'),
      wallSeconds: 0,
      change,
      seed,
      stepWorkMs,
      workPerMs: 0,
      headlineSize: 500 * K,
      headlineWorkload: headline,
      throughputStore: 'file',
      load: { start: os.loadavg()[0]!, end: NaN },
      durations: {},
      s3: s3Note,
      charts: {
        bytesPerHour: 'bench/charts/bytes-per-agent-hour.svg',
        stall: 'bench/charts/stall-vs-state-size.svg',
        restore: 'bench/charts/restore-vs-chain-length.svg',
      },
    },
    machine: machine(root),
    stall: [],
    throughput: [],
    restore: [],
    micro: [],
    memory: [],
    history: [],
    many: [],
    encryption: [],
    resume: [],
  };
  if (mode === 'smoke') results.run.headlineSize = 20 * K;
  const fileKind = kinds.find((k) => k.name === 'file')!;

  try {
    for (const { workload, size } of want('micro') ? stallSets : []) {
      progress.begin(`micro-benchmarks (tinybench), ${workload} ${size / K} KB`);
      results.micro.push(...(await microScenario(workload, size, change, seed, plan.micro)));
    }
    for (const { workload, size } of want('stall') ? stallSets : []) {
      for (const kind of kinds) {
        for (const strategy of plan.strategies) {
          const steps = plan.stallSteps(size, strategy);
          progress.begin(
            `stall + commit + bytes: ${workload} ${size / K} KB, ${kind.name} store, ${SHORT[strategy]}, ${steps} steps`,
          );
          results.stall.push(await stallScenario(kind, strategy, workload, size, change, seed, steps, progress));
        }
      }
    }
    if (typeof s3 !== 'string' && want('stall')) {
      for (const strategy of plan.s3.strategies) {
        progress.begin(
          `stall + commit + bytes: ${headline} ${plan.s3.size / K} KB, s3 store, ${SHORT[strategy]}, ${plan.s3.steps} steps`,
        );
        results.stall.push(
          await stallScenario(s3, strategy, headline, plan.s3.size, change, seed, plan.s3.steps, progress),
        );
      }
    }
    for (const workload of want('memory') ? WORKLOADS : []) {
      progress.begin(`memory kept by an engine: ${workload} ${results.run.headlineSize / K} KB`);
      results.memory.push(
        ...(await memoryScenario(fileKind, workload, results.run.headlineSize, change, seed, plan.memorySteps)),
      );
    }
    if (want('encryption')) {
      const e = plan.encryption;
      const H = results.run.headlineSize;
      progress.begin(
        `encryption: ${headline} ${H / K} KB, file store, copy mode, plain and encrypted, ${e.rounds} rounds of ${e.steps} steps, restore of ${e.chain} deltas`,
      );
      results.encryption!.push(await encryptionScenario(fileKind, headline, H, change, seed, e, progress));
    }
    if (want('langgraph')) {
      const lg = plan.langgraph;
      progress.begin(
        `LangGraph savers: ${lg.sizes.map((s) => `${s / K} KB (${lg.rounds(s)} rounds)`).join(', ')}, ${lg.toolCalls} tool calls each${process.env.STATEFOLD_PG_URL ? '' : ' (PostgresSaver skipped: STATEFOLD_PG_URL is not set)'}`,
      );
      results.langgraph = await langgraphScenario(lg.sizes, lg.toolCalls, progress, lg.rounds, mode !== 'smoke');
    }

    const workPerMs = calibrateWork();
    results.run.workPerMs = workPerMs;
    const stepWork = Math.round(workPerMs * stepWorkMs);
    if (mode !== 'smoke' && want('throughput')) {
      // Unrecorded warm-up, so the first recorded run does not pay for JIT compilation.
      progress.note('throughput warm-up (not recorded)');
      await throughputRun(fileKind, 'none', null, headline, tp.size, change, seed, 1500, stepWork, progress);
      await throughputRun(fileKind, 'sf-immutable', 'step', headline, tp.size, change, seed, 1500, stepWork, progress);
    }
    for (const r of want('throughput') ? throughputRuns : []) {
      const d = tp.duration(r.interval);
      results.run.durations[r.interval === null ? 'reference' : intervalLabel(r.interval)] = d;
      progress.begin(
        `throughput: ${headline} ${tp.size / K} KB, file store, ${r.strategy === 'none' ? 'no checkpoints' : SHORT[r.strategy]}, interval ${intervalLabel(r.interval)}, ${d / 1000} s`,
      );
      const res: ThroughputResult = await throughputRun(
        fileKind,
        r.strategy,
        r.interval,
        headline,
        tp.size,
        change,
        seed,
        d,
        stepWork,
        progress,
      );
      progress.note(`${res.stepsPerSec.toFixed(1)} steps/s, ${res.checkpoints} checkpoints`);
      results.throughput.push(res);
    }

    for (const size of want('restore') ? plan.sizes[headline] : []) {
      const chains = plan.restore.chains(size);
      progress.begin(`restore: ${headline} ${size / K} KB, chains ${chains.join(', ')}, memory + file stores`);
      results.restore.push(
        ...(await restoreScenario(kinds, headline, size, change, seed, chains, plan.restore, progress)),
      );
    }
    if (typeof s3 !== 'string' && want('restore')) {
      // Without span deltas (the default), and with the spanEvery the README suggests for S3.
      for (const spanEvery of [1, S3_SPAN_EVERY]) {
        progress.begin(
          `restore: ${headline} ${plan.s3.size / K} KB, chains ${plan.s3.chains.join(', ')}, s3 store, spanEvery ${spanEvery}`,
        );
        const r = await restoreScenario(
          [memoryStores(), s3],
          headline,
          plan.s3.size,
          change,
          seed,
          plan.s3.chains,
          plan.restore,
          progress,
          spanEvery,
        );
        results.restore.push(...r.filter((x) => x.store === 's3'));
      }
    }
    if (want('resume')) {
      const r = plan.resume;
      progress.begin(
        `resume from a fresh process: ${headline} ${r.size / K} KB, ${r.checkpoints} checkpoints, file and sqlite stores, ${r.rounds} rounds`,
      );
      results.resume = await resumeScenario(headline, r.size, r.checkpoints, r.rounds, seed, progress);
    }
    if (want('history')) {
      const histories = [{ kind: fileKind, histories: plan.history.file }];
      if (typeof s3 !== 'string') histories.push({ kind: s3, histories: plan.history.s3 });
      progress.begin(
        `reading against history length: ${histories.map((h) => `${h.kind.name} ${h.histories.join(', ')}`).join('; ')} checkpoints`,
      );
      results.history = (results.history ?? []).concat(
        await historyScenario(histories, headline, plan.history.size, seed, plan.history.runs, progress),
      );
    }
    for (const { store, mode, windowMs, streams, ioThreads, processes, semiSpaceMb } of want('many')
      ? plan.many.runs
      : []) {
      const m = plan.many;
      const n = streams ?? m.streams;
      const pgUrl = process.env.STATEFOLD_PG_URL;
      progress.begin(
        `many streams: ${n} engines, ${m.size / K} KB each, every 2 s, ${store} store${ioThreads === undefined ? '' : ` (ioThreads ${ioThreads})`}${semiSpaceMb === undefined ? '' : ` (--max-semi-space-size=${semiSpaceMb})`}${processes === undefined ? '' : `, ${processes} processes`}, ${mode}${store === 'postgres' && !pgUrl ? ' (skipped: STATEFOLD_PG_URL is not set)' : ''}`,
      );
      const args = {
        store,
        mode,
        workload: headline,
        streams: n,
        ...(ioThreads !== undefined && { ioThreads }),
        ...(semiSpaceMb !== undefined && { semiSpaceMb }),
        aloneMs: store === 'memory' ? 0 : m.aloneMs,
        size: m.size,
        intervalMs: 2000,
        warmupMs: m.warmupMs,
        windowMs: windowMs ?? m.windowMs,
        seed,
      };
      if (store !== 'postgres') results.many = (results.many ?? []).concat(await manyStreamsInChild(args));
      else if (!pgUrl) results.manySkipped = 'STATEFOLD_PG_URL was not set (start one with bench/postgres.sh)';
      else results.many = (results.many ?? []).concat(await manyStreamsOnPostgres(args, processes ?? 1, pgUrl));
    }
    if (want('stores')) {
      const { rounds, ...lengths } = plan.stores;
      progress.begin(`each store alone (memory, file, sqlite FULL and NORMAL) and the disk's limits, ${rounds} rounds`);
      results.storesAlone = await storesAloneScenario(rounds, progress, lengths);
    }
  } finally {
    for (const k of kinds) await k.cleanup();
    if (typeof s3 !== 'string') await s3.cleanup();
  }
  results.run.wallSeconds = (performance.now() - t0) / 1000;
  results.run.load.end = os.loadavg()[0]!;

  await writeOutputs(results, outDir);
  process.stderr.write(
    `statefold bench: done in ${Math.round(results.run.wallSeconds)} s; wrote ${path.join(outDir, 'BENCHMARKS.md')}\n`,
  );
}

/** The plan with the command line's --langgraph-sizes, --rounds and --many-stores applied. */
function narrowed(plan: Plan, values: { 'langgraph-sizes'?: string; rounds?: string; 'many-stores'?: string }): Plan {
  const lg = { ...plan.langgraph };
  if (values['langgraph-sizes'] !== undefined)
    lg.sizes = values['langgraph-sizes'].split(',').map((kb) => Number(kb) * K);
  if (values.rounds !== undefined) {
    const rounds = Number(values.rounds);
    lg.rounds = () => rounds;
  }
  const rounds = values.rounds === undefined ? undefined : Number(values.rounds);
  const resume = { ...plan.resume, rounds: rounds ?? plan.resume.rounds };
  const stores = { ...plan.stores, rounds: rounds ?? plan.stores.rounds };
  const manyStores = values['many-stores']?.split(',');
  const many = {
    ...plan.many,
    runs: plan.many.runs.filter((r) => manyStores === undefined || manyStores.includes(r.store)),
  };
  if (
    lg.sizes.some((size) => !(size > 0)) ||
    !(lg.rounds(lg.sizes[0] ?? 0) >= 1) ||
    !Number.isInteger(resume.rounds) ||
    resume.rounds < 1
  )
    throw new Error('bench: --langgraph-sizes takes sizes in KB, --rounds a whole number of 1 or more');
  return { ...plan, langgraph: lg, resume, many, stores };
}

/** Writes the charts, bench/results.json, BENCHMARKS.md and its appendix of a run into `outDir`. */
async function writeOutputs(results: Results, outDir: string): Promise<void> {
  // Charts
  const chartsDir = path.join(outDir, 'bench', 'charts');
  mkdirSync(chartsDir, { recursive: true });
  const H = results.run.headlineSize;
  const W = results.run.headlineWorkload;
  const tp = PLANS[results.run.mode].throughput;
  const refs = results.throughput.filter((r) => r.strategy === 'none');
  const refRate = median(refs.map((r) => r.stepsPerSec));
  const hourRows: { interval: string; order: number; strategy: string; bytesPerHour: number; source: string }[] = [];
  const order = (i: Interval): number => (i === 'step' ? 0 : i);
  for (const r of results.throughput) {
    if (r.strategy === 'none' || r.interval === null) continue;
    if (r.strategy !== 'sf-immutable' && r.strategy !== 'sf-copy') continue;
    hourRows.push({
      interval: intervalLabel(r.interval),
      order: order(r.interval),
      strategy: SHORT[r.strategy],
      bytesPerHour: r.bytesPerHour,
      source: 'measured in the agent loop',
    });
  }
  // Full-snapshot baselines write the same bytes per checkpoint at any interval: measured per checkpoint, times checkpoints per hour.
  for (const id of ['sf-full', 'json-gzip'] as StrategyId[]) {
    const s = results.stall.find(
      (x) => x.workload === W && x.size === tp.size && x.store === 'file' && x.strategy === id,
    );
    if (!s) continue;
    const perCheckpoint = Object.values(s.counts.bytes).reduce((a, b) => a + b, 0) / s.steps;
    for (const i of tp.intervals) {
      const perHour = i === 'step' ? refRate * 3600 : 3_600_000 / i;
      hourRows.push({
        interval: intervalLabel(i),
        order: order(i),
        strategy: SHORT[id],
        bytesPerHour: perCheckpoint * perHour,
        source: 'bytes per checkpoint × checkpoints per hour',
      });
    }
  }
  const stallRows = results.stall
    .filter((r) => r.store === 'file' && r.workload === W)
    .flatMap((r) => [
      { size: r.stateBytes, strategy: SHORT[r.strategy], stat: 'p50', ms: Math.max(r.stall.p50, 1e-3) },
      { size: r.stateBytes, strategy: SHORT[r.strategy], stat: 'p99', ms: Math.max(r.stall.p99, 1e-3) },
    ]);
  const restoreRows = results.restore.map((r) => ({
    chain: r.chain,
    series: `${r.workload} ${r.size / K} KB, ${r.store}${r.spanEvery > 1 ? `, spanEvery ${r.spanEvery}` : ''}`,
    ms: Math.max(r.latency.p50, 1e-3),
  }));
  const charts: [string, Promise<string>][] = [
    [
      results.run.charts.bytesPerHour,
      renderSvg(
        bytesPerHourChart(
          hourRows,
          `Bytes written per agent-hour, ${H / K} KB ${W} state, ~${refRate.toFixed(0)} steps/s`,
        ),
      ),
    ],
    [
      results.run.charts.stall,
      renderSvg(
        stallChart(
          stallRows,
          `checkpoint() stall against state size (${W} workload, file store, one checkpoint per step)`,
        ),
      ),
    ],
    [results.run.charts.restore, renderSvg(restoreChart(restoreRows, 'Restore time against delta-chain length'))],
  ];
  for (const [rel, svg] of charts) writeFileSync(path.join(outDir, rel), await svg);
  if (results.run.renderedFrom === undefined)
    writeFileSync(path.join(outDir, 'bench', 'results.json'), JSON.stringify(results, null, 1) + '\n');
  writeFileSync(path.join(outDir, 'BENCHMARKS.md'), renderReport(results));
  mkdirSync(path.dirname(path.join(outDir, APPENDIX)), { recursive: true });
  writeFileSync(path.join(outDir, APPENDIX), renderAppendix(results));
}

main().catch((err: unknown) => {
  process.stderr.write(`statefold bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
