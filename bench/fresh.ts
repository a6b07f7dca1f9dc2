/**
 * Resume from a fresh process: a stream written here, then read by a new process (fresh-child.ts)
 * as a restarted agent would, first thing after it starts. The engine's own open + state of a
 * stream on SqliteStore and on FileStore, in rounds that alternate the stores; and (langgraph.ts)
 * a LangGraph thread's latest checkpoint through a new saver.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileStore, SnapshotEngine, type Store } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';
import { summarize, type Progress, type Summary } from './stats.js';
import { Agent, packedSize, type WorkloadName } from './workload.js';
import { makeWorkload } from './workloads.js';

/** Where the child finds what it reads. */
export interface FreshWhere {
  store: 'file' | 'sqlite' | 'postgres' | 'sqlite-saver' | 'postgres-saver';
  /** Directory, database file, or connection string. */
  path: string;
  /** PostgresSaver's schema, or PostgresStore's table. */
  schema?: string;
}

export type FreshTask =
  | { kind: 'engine'; where: FreshWhere; stream: string; seq: number }
  | { kind: 'langgraph'; where: FreshWhere; thread: string; checkpointId: string };

export interface FreshResult {
  /** From constructing the store (or saver) until the state is in hand, ms. */
  ms: number;
  seq?: number;
}

/** Runs one task in a new Node process (through tsx, as the bench runs) and resolves what it measured. */
export async function inFreshProcess(task: FreshTask): Promise<FreshResult> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      import.meta.resolve('tsx'),
      fileURLToPath(new URL('./fresh-child.ts', import.meta.url)),
      JSON.stringify(task),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`fresh process (${task.kind}, ${task.where.store}): exited ${code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as FreshResult;
}

export interface ResumeResult {
  store: 'file' | 'sqlite';
  workload: WorkloadName;
  /** Nominal state size (msgpack bytes), and the state's msgpack size at the last checkpoint. */
  size: number;
  stateBytes: number;
  /** Checkpoints in the stream (the engine's default policy: a base every 32, deltas between). */
  checkpoints: number;
  /** Open + state in a fresh process, one sample per round. */
  open: Summary;
}

/**
 * Writes `checkpoints` checkpoints of one agent to a FileStore and a SqliteStore (durable, the
 * defaults), then opens each stream from a fresh process `rounds` times, the stores alternating.
 */
export async function resumeScenario(
  workload: WorkloadName,
  size: number,
  checkpoints: number,
  rounds: number,
  seed: number,
  progress: Progress,
): Promise<ResumeResult[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'statefold-bench-resume-'));
  try {
    const stores: { name: 'file' | 'sqlite'; where: FreshWhere; store: Store }[] = [
      { name: 'file', where: { store: 'file', path: path.join(dir, 'files') }, store: undefined! },
      { name: 'sqlite', where: { store: 'sqlite', path: path.join(dir, 'checkpoints.db') }, store: undefined! },
    ];
    let stateBytes = 0;
    for (const s of stores) {
      s.store = s.name === 'file' ? new FileStore({ dir: s.where.path }) : new SqliteStore({ path: s.where.path });
      const agent = new Agent('immutable', makeWorkload(workload, size, 0.01, seed), false);
      const engine = await SnapshotEngine.open({ store: s.store, stream: 'agent', updates: 'immutable' });
      await engine.checkpoint(agent.state);
      for (let i = 1; i < checkpoints; i++) {
        await engine.checkpoint(agent.step());
        progress.tick(i + 1, checkpoints, `${s.name}: checkpoints written`);
      }
      await engine.close();
      if (s.store instanceof SqliteStore) await s.store.close();
      stateBytes = packedSize(agent.state);
    }
    const samples: Record<string, number[]> = { file: [], sqlite: [] };
    for (let round = 0; round < rounds; round++) {
      for (const s of round % 2 === 0 ? stores : [...stores].reverse()) {
        const r = await inFreshProcess({ kind: 'engine', where: s.where, stream: 'agent', seq: checkpoints });
        samples[s.name]!.push(r.ms);
      }
      progress.note(
        `resume round ${round + 1}/${rounds}: file ${samples.file!.at(-1)!.toFixed(1)} ms, sqlite ${samples.sqlite!.at(-1)!.toFixed(1)} ms`,
      );
    }
    return stores.map((s) => ({
      store: s.name,
      workload,
      size,
      stateBytes,
      checkpoints,
      open: summarize(samples[s.name]!),
    }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
