/**
 * The measured scenarios: stall + commit latency + bytes per checkpoint (whole loop, one checkpoint
 * per step), agent-loop throughput against the checkpoint interval (whole loop), restore time
 * against chain length (tinybench), and codec/diff micro-benchmarks (tinybench).
 */
import { loadavg } from 'node:os';
import { Worker } from 'node:worker_threads';
import { setImmediate as nextTurn } from 'node:timers/promises';
import jsonpatch from 'fast-json-patch';

const { compare } = jsonpatch;
import lz4 from 'lz4';
import { pack } from 'msgpackr';
import { Bench } from 'tinybench';
import { SnapshotEngine, restore, type Store } from 'statefold';
import { CountingStore, type StoreKind, type WriteCounts } from './stores.js';
import { STRATEGIES, type CheckpointResult, type Checkpointer, type StrategyId } from './strategies.js';
import { summarize, type Progress, type Summary } from './stats.js';
import { Agent, packedSize, type WorkloadName } from './workload.js';
import { makeWorkload } from './workloads.js';

const now = (): number => performance.now();

// ---------------------------------------------------------------------------------------------
// 1, 2, 4: stall, commit latency, bytes and requests per checkpoint

export interface StallResult {
  workload: WorkloadName;
  size: number;
  /** msgpack size of the initial state. */
  stateBytes: number;
  store: string;
  strategy: StrategyId;
  steps: number;
  stall: Summary;
  /** From the call until the event loop runs its next macrotask (the call plus the microtasks it queued). */
  loopBlock: Summary;
  commit: Summary;
  /** Stall of the checkpoints stored as deltas and as bases (statefold) apart. */
  stallByKind: Partial<Record<CheckpointResult['kind'], Summary>>;
  /** Loop blocked for the checkpoints stored as deltas and as bases (or full snapshots) apart. */
  loopBlockByKind: Partial<Record<CheckpointResult['kind'], Summary>>;
  /** Writes after the initial checkpoint, over `steps` steps (one checkpoint per step). */
  counts: WriteCounts;
  /** msgpack bytes the steps put into the state, all steps and the steps stored as deltas. */
  added: { all: number; deltas: number };
  /** Stored bytes of the steps stored as deltas (counts.bytes.delta, per checkpoint result). */
  deltaBytes: number;
  /** Checkpoints stored whole: statefold bases, or the baselines' full snapshots. */
  bases: number;
}

/** One checkpoint per step, each awaited before the next step (so the queue is idle at every call). */
export async function stallScenario(
  kind: StoreKind,
  strategy: StrategyId,
  workload: WorkloadName,
  size: number,
  change: number,
  seed: number,
  steps: number,
  progress: Progress,
): Promise<StallResult> {
  const s = STRATEGIES[strategy];
  const agent = new Agent(s.style, makeWorkload(workload, size, change, seed));
  const stateBytes = packedSize(agent.state);
  const store = new CountingStore(await kind.create(`stall-${workload}-${strategy}-${size}`));
  const cp = await s.open(store, 'agent');
  await cp.checkpoint(agent.state);
  store.reset();
  const stalls: number[] = [];
  const blocks: number[] = [];
  const commits: number[] = [];
  const byKind: Partial<Record<CheckpointResult['kind'], number[]>> = {};
  const blockByKind: Partial<Record<CheckpointResult['kind'], number[]>> = {};
  const added = { all: 0, deltas: 0 };
  let deltaBytes = 0;
  let bases = 0;
  for (let i = 1; i <= steps; i++) {
    const before = agent.addedBytes;
    const state = agent.step();
    // An agent awaits its model or tools between checkpoints: start each from a fresh macrotask.
    await nextTurn();
    const t0 = now();
    const p = cp.checkpoint(state);
    const t1 = now();
    await nextTurn();
    const t2 = now();
    const r = await p;
    const t3 = now();
    stalls.push(t1 - t0);
    blocks.push(t2 - t0);
    commits.push(t3 - t0);
    (byKind[r.kind] ??= []).push(t1 - t0);
    (blockByKind[r.kind] ??= []).push(t2 - t0);
    added.all += agent.addedBytes - before;
    if (r.kind === 'delta') {
      added.deltas += agent.addedBytes - before;
      deltaBytes += r.bytes;
    } else bases++;
    progress.tick(i, steps);
  }
  await cp.close();
  const stallByKind: StallResult['stallByKind'] = {};
  for (const [k, v] of Object.entries(byKind)) stallByKind[k as CheckpointResult['kind']] = summarize(v);
  const loopBlockByKind: StallResult['loopBlockByKind'] = {};
  for (const [k, v] of Object.entries(blockByKind)) loopBlockByKind[k as CheckpointResult['kind']] = summarize(v);
  return {
    workload,
    size,
    stateBytes,
    store: kind.name,
    strategy,
    steps,
    stall: summarize(stalls),
    loopBlock: summarize(blocks),
    commit: summarize(commits),
    stallByKind,
    loopBlockByKind,
    counts: store.counts,
    added,
    deltaBytes,
    bases,
  };
}

// ---------------------------------------------------------------------------------------------
// 3, 4: agent-loop throughput and bytes per agent-hour against the interval

let sink = 0;
/** Fixed CPU work: `n` rounds of an LCG (the result feeds a sink so it cannot be optimised away). */
function work(n: number): void {
  let x = sink | 1;
  for (let i = 0; i < n; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
  sink = x;
}

/** Rounds of `work` per millisecond on this machine (the fastest of several tries). */
export function calibrateWork(): number {
  let best = Infinity;
  const n = 2_000_000;
  for (let i = 0; i < 7; i++) {
    const t = now();
    work(n);
    best = Math.min(best, now() - t);
  }
  return n / best;
}

export type Interval = 'step' | number;

export interface ThroughputResult {
  workload: WorkloadName;
  strategy: StrategyId | 'none';
  interval: Interval | null;
  store: string;
  size: number;
  durationMs: number;
  steps: number;
  stepsPerSec: number;
  /** Process CPU time (user + system, all threads) per step, ms. */
  cpuMsPerStep: number;
  /** 1-minute load average at the end of the run. */
  load: number;
  /** Steps per second in 1-second windows of the run. */
  windows: Summary;
  checkpoints: number;
  /** checkpoint() call durations during the run. */
  stall: Summary;
  /** Writes during the run (the initial checkpoint excluded). */
  counts: WriteCounts;
  /** Bytes written during the run, scaled to one hour. */
  bytesPerHour: number;
  requestsPerHour: number;
}

/**
 * An agent loop: per step, `stepWork` rounds of fixed CPU work, one state change, a checkpoint
 * when the interval has passed (not awaited: the loop goes on while it commits), then a yield to
 * the event loop (an agent awaits its model or tools there). The run's time includes waiting for
 * every checkpoint to be durable at the end.
 */
export async function throughputRun(
  kind: StoreKind,
  strategy: StrategyId | 'none',
  interval: Interval | null,
  workload: WorkloadName,
  size: number,
  change: number,
  seed: number,
  durationMs: number,
  stepWork: number,
  progress: Progress,
): Promise<ThroughputResult> {
  const s = strategy === 'none' ? undefined : STRATEGIES[strategy];
  const agent = new Agent(s?.style ?? 'immutable', makeWorkload(workload, size, change, seed));
  const store = new CountingStore(await kind.create(`tput-${strategy}-${String(interval)}`));
  let cp: Checkpointer | undefined;
  if (s) {
    cp = await s.open(store, 'agent');
    await cp.checkpoint(agent.state);
    store.reset();
  }
  const stalls: number[] = [];
  const pending: Promise<unknown>[] = [];
  const windows: number[] = [];
  let steps = 0;
  let windowSteps = 0;
  const cpu0 = process.cpuUsage();
  const start = now();
  let windowStart = start;
  let last = start;
  let t = start;
  while (t - start < durationMs) {
    work(stepWork);
    const state = agent.step();
    steps++;
    windowSteps++;
    t = now();
    if (cp && (interval === 'step' || t - last >= (interval as number))) {
      last = t;
      pending.push(cp.checkpoint(state));
      const t1 = now();
      stalls.push(t1 - t);
      t = t1;
    }
    if (t - windowStart >= 1000) {
      windows.push((windowSteps * 1000) / (t - windowStart));
      windowStart = t;
      windowSteps = 0;
    }
    progress.tick(Math.round(t - start), durationMs, 'ms');
    await nextTurn();
    t = now();
  }
  await Promise.all(pending);
  const end = now();
  const cpu = process.cpuUsage(cpu0);
  await cp?.close();
  const elapsed = end - start;
  const total = (c: Record<string, number>): number => Object.values(c).reduce((a, b) => a + b, 0);
  return {
    workload,
    strategy,
    interval,
    store: kind.name,
    size,
    durationMs: elapsed,
    steps,
    stepsPerSec: (steps * 1000) / elapsed,
    cpuMsPerStep: (cpu.user + cpu.system) / 1000 / steps,
    load: loadavg()[0]!,
    windows: summarize(windows),
    checkpoints: stalls.length,
    stall: summarize(stalls),
    counts: store.counts,
    bytesPerHour: (total(store.counts.bytes) * 3_600_000) / elapsed,
    requestsPerHour: (total(store.counts.requests) * 3_600_000) / elapsed,
  };
}

// ---------------------------------------------------------------------------------------------
// 5: restore time against chain length

export interface RestoreResult {
  workload: WorkloadName;
  size: number;
  store: string;
  chain: number;
  /** The policy's spanEvery the chain was written with (1: no span deltas). */
  spanEvery: number;
  /** Stored bytes of the chain (base + every delta up to the seq restored). */
  chainBytes: number;
  /** Checkpoint objects the restore reads and folds: base, span deltas, the deltas after the last. */
  objects: number;
  /** Their stored bytes. */
  bytesRead: number;
  latency: Summary;
}

/**
 * Builds one stream with a base and `maxChain` deltas (policy baseEvery huge, maxDeltaRatio
 * Infinity, spanEvery as given) in memory, copies it into each store, and times `restore` of
 * seq 1 + chain for each chain length with tinybench.
 */
export async function restoreScenario(
  kinds: StoreKind[],
  workload: WorkloadName,
  size: number,
  change: number,
  seed: number,
  chains: number[],
  bench: { time: number; iterations: number },
  progress: Progress,
  spanEvery = 1,
): Promise<RestoreResult[]> {
  const maxChain = Math.max(...chains);
  const built = new CountingStore(await kinds[0]!.create('restore-build'));
  const agent = new Agent('immutable', makeWorkload(workload, size, change, seed));
  const engine = await SnapshotEngine.open({
    store: built,
    stream: 'agent',
    updates: 'immutable',
    policy: { baseEvery: 1_000_000, maxDeltaRatio: Infinity, spanEvery },
  });
  const sizes: number[] = [];
  sizes.push((await engine.checkpoint(agent.state)).bytes);
  for (let i = 1; i <= maxChain; i++) {
    const info = await engine.checkpoint(agent.step());
    if (info.kind !== 'delta') throw new Error(`restore chain: seq ${info.seq} is a ${info.kind}, expected a delta`);
    sizes.push(info.bytes);
    progress.tick(i, maxChain, 'deltas built');
  }
  await engine.close();
  const keys = await built.list('');
  const results: RestoreResult[] = [];
  for (const kind of kinds) {
    let store: Store = built;
    if (kind !== kinds[0]) {
      // Written without fsync (same bytes, much faster to set up); restores read them back alike.
      store = await kind.create('restore', { fsync: false });
      for (const key of keys) await store.putIfAbsent(key, (await built.get(key))!);
    }
    for (const chain of chains) {
      const seq = 1 + chain;
      const check = await restore(store, 'agent', { seq });
      if (check.seq !== seq || check.kind !== 'delta')
        throw new Error(`restore: got seq ${check.seq} (${check.kind}), expected delta ${seq}`);
      const b = new Bench({
        time: bench.time,
        iterations: bench.iterations,
        warmupIterations: 2,
        warmupTime: 0,
        retainSamples: true,
      });
      b.add('restore', async () => {
        await restore(store, 'agent', { seq });
      });
      await b.run();
      const r = b.tasks[0]!.result;
      if (r.state !== 'completed')
        throw new Error(`restore bench ${kind.name} ${chain}: ${r.state}${'error' in r ? ` ${String(r.error)}` : ''}`);
      // What the restore folds (restore/chain.ts): the base, every spanEvery-th delta, then the rest.
      const read = [0];
      for (let i = 1; i <= chain; i++) if (i % spanEvery === 0 || i > chain - (chain % spanEvery)) read.push(i);
      results.push({
        workload,
        size,
        store: kind.name,
        chain,
        spanEvery,
        chainBytes: sizes.slice(0, seq).reduce((a, b2) => a + b2, 0),
        objects: read.length,
        bytesRead: read.reduce((n, i) => n + sizes[i]!, 0),
        latency: fromTinybench(r.latency),
      });
      progress.note(
        `restore ${kind.name} chain ${chain}${spanEvery > 1 ? ` spanEvery ${spanEvery}` : ''}: p50 ${r.latency.p50.toFixed(2)} ms (n ${r.latency.samplesCount})`,
      );
    }
  }
  return results;
}

function fromTinybench(l: {
  samplesCount: number;
  p50: number;
  p99: number;
  p75: number;
  min: number;
  max: number;
  mean: number;
  samples?: readonly number[] | undefined;
}): Summary {
  if (l.samples && l.samples.length > 0) return summarize(l.samples);
  return { n: l.samplesCount, p50: l.p50, p99: l.p99, q1: NaN, q3: l.p75, min: l.min, max: l.max, mean: l.mean };
}

// ---------------------------------------------------------------------------------------------
// Micro-benchmarks: what each piece of a checkpoint costs at each state size (tinybench)

export interface MicroResult {
  workload: WorkloadName;
  size: number;
  task: string;
  latency: Summary;
}

export async function microScenario(
  workload: WorkloadName,
  size: number,
  change: number,
  seed: number,
  bench: { time: number; iterations: number },
): Promise<MicroResult[]> {
  const w = makeWorkload(workload, size, change, seed);
  const mutable = w.initial();
  const mirror = structuredClone(mutable);
  const w2 = makeWorkload(workload, size, change, seed);
  const base = w2.initial();
  w.next().inPlace(mutable);
  const next = w2.next().immutable(base);
  const packed = pack(mutable);
  const out = Buffer.allocUnsafe(lz4.encodeBound(packed.byteLength));
  const { gzipSync } = await import('node:zlib');
  const worker = new Worker('require("node:worker_threads").parentPort.on("message", () => {})', { eval: true });
  const b = new Bench({ time: bench.time, iterations: bench.iterations, warmupIterations: 2, retainSamples: true });
  b.add('JSON.stringify', () => {
    JSON.stringify(mutable);
  });
  b.add('JSON.stringify + gzip', () => {
    gzipSync(JSON.stringify(mutable));
  });
  b.add('msgpackr pack', () => {
    pack(mutable);
  });
  b.add('lz4 encodeBlock (of the msgpack)', () => {
    lz4.encodeBlock(packed, out);
  });
  // Two ways to keep a large base's compression off the caller's loop: lz4 in 64 KB slices (a turn
  // between slices; each slice blocks this long), or one hand-over to a worker thread (what statefold does).
  const slice = packed.subarray(0, Math.min(packed.byteLength, 64 * 1024));
  b.add('lz4 encodeBlock of one 64 KB slice', () => {
    lz4.encodeBlock(slice, out);
  });
  b.add('hand the msgpack to a worker thread (copy + transfer)', () => {
    const own = new Uint8Array(packed.byteLength);
    own.set(packed);
    worker.postMessage(own, [own.buffer]);
  });
  b.add('structuredClone (a mirror copy)', () => {
    structuredClone(mutable);
  });
  b.add('fjp compare vs deep-cloned mirror', () => {
    compare(mirror, mutable);
  });
  b.add('fjp compare, immutable update', () => {
    compare(base, next);
  });
  await b.run();
  await worker.terminate();
  return b.tasks.map((t) => {
    const r = t.result;
    if (r.state !== 'completed') throw new Error(`micro ${t.name}: ${r.state}`);
    return { workload, size, task: t.name, latency: fromTinybench(r.latency) };
  });
}
