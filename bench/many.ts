/**
 * Many streams in one process: N engines, each on its own stream of one shared store, each taking
 * one step of its agent and a checkpoint every `intervalMs`, their schedules spread evenly over
 * the interval (N / interval checkpoints per second in all). Measured: checkpoints called and
 * committed per second, lateness of each call against its schedule (and whether it grows: a
 * backlog), commit latency, event-loop delay, memory per stream, and the time to open all N
 * streams again afterwards. Several processes can run it at once on one store (many-processes.ts),
 * each on streams of its own, their phases started together.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { SnapshotEngine, type Store } from 'statefold';
import type { StoreKind } from './stores.js';
import { summarize, type Progress, type Summary } from './stats.js';
import { Agent, type WorkloadName } from './workload.js';
import { makeWorkload } from './workloads.js';

export interface ManyResult {
  store: string;
  mode: 'copy' | 'immutable';
  streams: number;
  /** Nominal state size per stream (msgpack bytes). */
  size: number;
  intervalMs: number;
  /** Checkpoints per second the schedule asks for. */
  targetRate: number;
  /** Measured window (after the warm-up). */
  seconds: number;
  called: number;
  /** Commits that resolved in the window, whenever their checkpoint was called. */
  committed: number;
  failed: number;
  /** Lateness of each call against its schedule, ms; and its median in the first and last fifth of the window. */
  lateness: Summary;
  latenessFirst: number;
  latenessLast: number;
  /** From the call until the promise resolved, ms. */
  commit: Summary;
  /** Event-loop delay (perf_hooks), ms. */
  loopDelay: { p50: number; p99: number; max: number };
  /** CPU of this process (all threads) per checkpoint called, ms; the share spent in the agents' steps. */
  cpuPerCheckpoint: number;
  stepShare: number;
  /** (RSS, heap) growth from before the engines were opened to the end of the window, per stream. */
  rssPerStream: number;
  heapPerStream: number;
  /** Heap and array buffers per stream right after every engine was opened and took its first checkpoint. */
  heapOpenPerStream: number;
  /** Opening all N streams again after closing them, 64 at a time. */
  reopenSeconds: number;
  /** Checkpoints committed while closing every engine after the window (the backlog drained), and how long that took. */
  drained: number;
  drainSeconds: number;
  /** Checkpoints called (warm-up included) and not settled when the window ended. */
  backlog: number;
  /** FileStore: its `ioThreads` (undefined: the default). */
  ioThreads?: number;
  /** V8's young generation, as `node --max-semi-space-size` set it for the run (undefined: Node's default). */
  semiSpaceMb?: number;
  /**
   * What the store commits alone in this process (storeAlone): before the engines open, and again
   * after they were closed and re-opened. On a shared VM the rate fsync allows swings within
   * minutes, so the run is compared with both.
   */
  alone?: StoreAlone;
  aloneAfter?: StoreAlone;
  /**
   * A run across several processes on one store (many-processes.ts): the figures above are of all
   * of them together, and these are each process's own.
   */
  processes?: ManyResult[];
  /** Across processes: the database server's CPU per checkpoint called, ms (when its processes could be read). */
  serverCpuPerCheckpoint?: number;
  /** Raw samples, for combining processes (dropped from the results once combined). */
  samples?: ManySamples;
}

/** Each checkpoint called in the window: its lateness, and when it was called (ms from the window's start); commit latencies. */
export interface ManySamples {
  lateness: number[];
  at: number[];
  commit: number[];
}

/** What one process of a run across several does besides the scenario itself. */
export interface ManyShared {
  /** Put before stream names and the store-alone keys, so that processes on one store never share a key. */
  prefix?: string;
  /** Waits until every process has reached `phase` (store alone, window, store alone after), then starts it. */
  sync?: (phase: 'alone' | 'window' | 'alone-after') => Promise<void>;
  /** Tells the others `phase` is done, without waiting. */
  mark?: (phase: 'window-end') => void;
  /** Return the raw samples (ManySamples). */
  samples?: boolean;
}

/** Creates per second of the store alone (no engines), and the process's CPU per create. */
export interface StoreAlone {
  rate: number;
  cpuUsPerCreate: number;
  inFlight: number;
  seconds: number;
}

/**
 * The store alone: frame-sized creates on up to 4 × `inFlight` stream-like directories (made
 * first, untimed), `inFlight` at a time, for `ms`: what this store commits per second on this machine
 * with nothing else to do (for the file store, what fsync allows here).
 */
async function storeAlone(
  store: Store,
  label: string,
  streams: number,
  ms: number,
  inFlight = 256,
): Promise<StoreAlone> {
  const body = new Uint8Array(700).fill(7);
  // Directories made first, untimed: making one costs fsyncs of its parents, which the engines'
  // streams paid when they opened, not on each commit.
  const dirs = Math.min(streams, 4 * inFlight);
  await inBatches(dirs, inFlight, (n) => store.putIfAbsent(aloneKey(label, n, dirs), body).then(() => undefined));
  let created = 0;
  let next = dirs;
  const end = performance.now() + ms;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        const n = next++;
        await store.putIfAbsent(aloneKey(label, n, dirs), body);
        created++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { rate: created / seconds, cpuUsPerCreate: (cpu.user + cpu.system) / created, inFlight, seconds };
}

/** The n-th create's key: directory n mod `dirs`, and in it the next seq, as a stream's log has them. */
function aloneKey(label: string, n: number, dirs: number): string {
  return `${label}/s${n % dirs}/${Math.floor(n / dirs)
    .toString(16)
    .padStart(16, '0')}`;
}

/** Runs the many-streams scenario on one store kind. */
export async function manyStreamsScenario(
  kind: StoreKind,
  mode: 'copy' | 'immutable',
  workload: WorkloadName,
  streams: number,
  size: number,
  intervalMs: number,
  warmupMs: number,
  windowMs: number,
  seed: number,
  progress: Progress,
  aloneMs = 0,
  shared: ManyShared = {},
): Promise<ManyResult> {
  const { prefix = '', sync = async () => undefined } = shared;
  const store: Store = await kind.create(`many-${mode}`);
  if (aloneMs > 0) await sync('alone');
  const alone = aloneMs > 0 ? await storeAlone(store, `${prefix}alone`, streams, aloneMs) : undefined;
  const agents: Agent[] = [];
  for (let i = 0; i < streams; i++) {
    agents.push(
      new Agent(mode === 'copy' ? 'mutable' : 'immutable', makeWorkload(workload, size, 0.01, seed + i), false),
    );
    progress.tick(i + 1, streams, 'agents built');
  }
  global.gc?.();
  const mem0 = process.memoryUsage();
  const engines: SnapshotEngine[] = new Array(streams);
  await inBatches(streams, 64, async (i) => {
    engines[i] = await SnapshotEngine.open({ store, stream: `${prefix}agent-${i}`, updates: mode });
    await engines[i]!.checkpoint(agents[i]!.state);
    progress.tick(i + 1, streams, 'streams opened');
  });

  // Heap figures are what stays reachable: measured after a full collection (--expose-gc).
  global.gc?.();
  const memOpen = process.memoryUsage();
  await sync('window');
  const lateness: number[] = [];
  const latenessAt: number[] = [];
  const commits: number[] = [];
  let called = 0;
  let committed = 0;
  let drained = 0;
  let issued = 0;
  let resolved = 0;
  let phase: 'warm-up' | 'window' | 'drain' | 'done' = 'warm-up';
  let failed = 0;
  let stepMs = 0;
  const delay = monitorEventLoopDelay({ resolution: 5 });
  const start = performance.now() + 50;
  const measureFrom = start + warmupMs;
  const end = measureFrom + windowMs;
  // Stream i's k-th checkpoint is due at start + (i / streams + k) * intervalMs.
  const due = Float64Array.from({ length: streams }, (_, i) => start + (i / streams) * intervalMs);
  let cpu0 = process.cpuUsage();
  let measuring = false;
  for (;;) {
    const now = performance.now();
    if (now >= end) break;
    if (!measuring && now >= measureFrom) {
      measuring = true;
      phase = 'window';
      cpu0 = process.cpuUsage();
      stepMs = 0;
      delay.enable();
    }
    for (let i = 0; i < streams; i++) {
      if (due[i]! > now) continue;
      const late = performance.now() - due[i]!;
      due[i]! += intervalMs;
      const t0 = performance.now();
      const state = agents[i]!.step();
      const t1 = performance.now();
      const p = engines[i]!.checkpoint(state);
      const inWindow = measuring;
      issued++;
      // Commits are counted when they resolve: in the window whenever they were called, then in the drain.
      p.then(
        () => {
          resolved++;
          if (phase === 'window') committed++;
          else if (phase === 'drain') drained++;
          if (inWindow) commits.push(performance.now() - t1);
        },
        () => {
          resolved++;
          if (inWindow) failed++;
        },
      );
      if (!inWindow) continue;
      stepMs += t1 - t0;
      called++;
      lateness.push(late);
      latenessAt.push(t0);
    }
    // Let commits, timers and I/O run between rounds, as any server's event loop would.
    await sleep(1);
  }
  delay.disable();
  phase = 'drain';
  shared.mark?.('window-end');
  const cpu = process.cpuUsage(cpu0);
  const seconds = windowMs / 1000;
  global.gc?.();
  const mem1 = process.memoryUsage();
  progress.note(
    `${kind.name} ${mode}: ${(called / seconds).toFixed(0)} calls/s, ${(committed / seconds).toFixed(0)} commits/s in the window (target ${((streams / intervalMs) * 1000).toFixed(0)}/s)`,
  );
  const backlog = issued - resolved;
  const d0 = performance.now();
  await Promise.all(engines.map((e) => e.close().catch(() => undefined)));
  const drainSeconds = (performance.now() - d0) / 1000;
  phase = 'done';
  engines.length = 0;
  // As a restarted process would: a new instance of the store (its own directories unknown to it).
  const restarted = kind.reopen?.(store) ?? store;
  const t0 = performance.now();
  await inBatches(streams, 64, async (i) => {
    const e = await SnapshotEngine.open({ store: restarted, stream: `${prefix}agent-${i}`, updates: mode });
    await e.close();
  });
  const reopenSeconds = (performance.now() - t0) / 1000;
  if (aloneMs > 0) await sync('alone-after');
  const aloneAfter = aloneMs > 0 ? await storeAlone(restarted, `${prefix}alone-after`, streams, aloneMs) : undefined;
  const fifth = windowMs / 5;
  const lateIn = (from: number, to: number): number =>
    summarize(lateness.filter((_, j) => latenessAt[j]! >= from && latenessAt[j]! < to)).p50;
  return {
    store: kind.name,
    mode,
    streams,
    size,
    intervalMs,
    targetRate: (streams / intervalMs) * 1000,
    seconds,
    called,
    committed,
    failed,
    lateness: summarize(lateness),
    latenessFirst: lateIn(measureFrom, measureFrom + fifth),
    latenessLast: lateIn(end - fifth, end),
    commit: summarize(commits),
    loopDelay: { p50: delay.percentile(50) / 1e6, p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 },
    cpuPerCheckpoint: called > 0 ? (cpu.user + cpu.system) / 1000 / called : NaN,
    stepShare: called > 0 ? stepMs / ((cpu.user + cpu.system) / 1000) : NaN,
    rssPerStream: (mem1.rss - mem0.rss) / streams,
    heapPerStream: (mem1.heapUsed + mem1.arrayBuffers - mem0.heapUsed - mem0.arrayBuffers) / streams,
    heapOpenPerStream: (memOpen.heapUsed + memOpen.arrayBuffers - mem0.heapUsed - mem0.arrayBuffers) / streams,
    reopenSeconds,
    drained,
    drainSeconds,
    backlog,
    ...(alone !== undefined && { alone }),
    ...(aloneAfter !== undefined && { aloneAfter }),
    ...(shared.samples && {
      samples: { lateness, at: latenessAt.map((t) => t - measureFrom), commit: commits },
    }),
  };
}

/** Runs `f(i)` for i in [0, n), `width` at a time. */
async function inBatches(n: number, width: number, f: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await f(next++);
    }),
  );
}

/** What a child run of the scenario is given. */
export interface ManyArgs {
  store: 'memory' | 'file' | 'sqlite' | 'postgres';
  mode: 'copy' | 'immutable';
  workload: WorkloadName;
  streams: number;
  size: number;
  intervalMs: number;
  warmupMs: number;
  windowMs: number;
  seed: number;
  /** FileStore `ioThreads` (undefined: the default). */
  ioThreads?: number;
  /** `node --max-semi-space-size` for the run's process, in MB (undefined: Node's default). */
  semiSpaceMb?: number;
  /** How long the store alone is measured before the engines open; 0: not measured. */
  aloneMs: number;
  /** PostgresStore: the server (connection string) and the table. */
  postgres?: { url: string; table: string };
  /** One process of a run across several (many-processes.ts): its key prefix; its phases wait for the others'. */
  shared?: { prefix: string };
}

/** Runs the scenario in a child process (many-child.ts) and resolves its result; its progress goes to stderr. */
export async function manyStreamsInChild(args: ManyArgs): Promise<ManyResult> {
  const child = spawnManyChild(args, 'ignore');
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`many streams (${args.store}, ${args.mode}): child exited ${code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as ManyResult;
}

/** A child process running one many-streams scenario (many-child.ts); its stdin as asked, stdout piped. */
export function spawnManyChild(args: ManyArgs, stdin: 'ignore' | 'pipe'): ChildProcess {
  return spawn(
    process.execPath,
    [
      '--expose-gc',
      ...(args.semiSpaceMb === undefined ? [] : [`--max-semi-space-size=${args.semiSpaceMb}`]),
      // tsx from the bench's own node_modules: the child's working directory may be anywhere.
      '--import',
      import.meta.resolve('tsx'),
      fileURLToPath(new URL('./many-child.ts', import.meta.url)),
      JSON.stringify(args),
    ],
    { stdio: [stdin, 'pipe', 'inherit'] },
  );
}
