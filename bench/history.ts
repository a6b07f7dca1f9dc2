/**
 * What reading a stream costs against the length of its history: `SnapshotEngine.open`, a restore
 * of the newest checkpoint, a restore of a checkpoint from the middle of the history, and
 * `listCheckpoints({ limit: 10, reverse: true })`, each timed and with the store requests it made
 * (LISTs, keys listed, GETs, writes) counted, on streams of 100 to 100,000 checkpoints.
 *
 * The history is built once per length on a memory store by an engine with the default policy,
 * then copied key by key into the store measured (file without fsync, S3), so the streams are real
 * engine output (bases every 32, hints, one fence) without a slow build on every store.
 */
import {
  SnapshotEngine,
  MemoryStore,
  listCheckpoints,
  restore,
  type ListOptions,
  type Store,
  type StoreOptions,
} from 'statefold';
import type { StoreKind } from './stores.js';
import { summarize, type Progress, type Summary } from './stats.js';
import { Agent, type WorkloadName } from './workload.js';
import { makeWorkload } from './workloads.js';

/** Store requests one operation made. */
export interface Requests {
  lists: number;
  keysListed: number;
  gets: number;
  writes: number;
  deletes: number;
}

export type HistoryOp = 'open' | 'restore newest' | 'restore middle' | 'list newest 10';

export interface HistoryResult {
  store: string;
  /** Checkpoints in the stream. */
  history: number;
  op: HistoryOp;
  latency: Summary;
  /** Requests of one run of the operation (the last one). */
  requests: Requests;
}

const none = (): Requests => ({ lists: 0, keysListed: 0, gets: 0, writes: 0, deletes: 0 });

/** A store wrapper that counts every request and the keys each LIST returned. */
class RequestCounter implements Store {
  requests = none();
  constructor(readonly inner: Store) {}
  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    this.requests.gets++;
    return this.inner.get(key, options);
  }
  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    this.requests.writes++;
    return this.inner.putIfAbsent(key, body, options);
  }
  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    const keys = await this.inner.list(prefix, options);
    this.requests.lists++;
    this.requests.keysListed += keys.length;
    return keys;
  }
  async delete(key: string, options?: StoreOptions): Promise<void> {
    this.requests.deletes++;
    return this.inner.delete(key, options);
  }
  // Not a request the history reads make; passed through so the wrapper is a whole Store.
  removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    return this.inner.removeLeftovers(prefix, options);
  }
}

/** Builds a stream of `history` checkpoints (one step each) on a memory store. */
async function build(
  workload: WorkloadName,
  size: number,
  history: number,
  seed: number,
  progress: Progress,
): Promise<MemoryStore> {
  const store = new MemoryStore();
  const agent = new Agent('immutable', makeWorkload(workload, size, 0.01, seed));
  const engine = await SnapshotEngine.open({ store, stream: 'agent', updates: 'immutable' });
  await engine.checkpoint(agent.state);
  for (let i = 2; i <= history; i++) {
    await engine.checkpoint(agent.step());
    progress.tick(i, history, 'checkpoints built');
  }
  await engine.close();
  return store;
}

/** Copies every key of `from` into `to`, `concurrency` at a time. */
async function copy(from: Store, to: Store, concurrency: number, progress: Progress): Promise<void> {
  const keys = await from.list('');
  let next = 0;
  let done = 0;
  const worker = async (): Promise<void> => {
    while (next < keys.length) {
      const key = keys[next++]!;
      await to.putIfAbsent(key, (await from.get(key))!);
      progress.tick(++done, keys.length, 'objects copied');
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Times each read operation `runs` times on streams of each history length, on each store kind. */
export async function historyScenario(
  kinds: { kind: StoreKind; histories: number[] }[],
  workload: WorkloadName,
  size: number,
  seed: number,
  runs: number,
  progress: Progress,
): Promise<HistoryResult[]> {
  const out: HistoryResult[] = [];
  const built = new Map<number, MemoryStore>();
  for (const { kind, histories } of kinds) {
    for (const history of histories) {
      let source = built.get(history);
      if (source === undefined) built.set(history, (source = await build(workload, size, history, seed, progress)));
      const target = await kind.create(`history-${history}`, { fsync: false });
      await copy(source, target, kind.name === 's3' ? 16 : 1, progress);
      const store = new RequestCounter(target);
      const ops: [HistoryOp, () => Promise<unknown>][] = [
        [
          'open',
          async () => {
            const engine = await SnapshotEngine.open({ store, stream: 'agent', updates: 'immutable' });
            await engine.close();
          },
        ],
        ['restore newest', () => restore(store, 'agent')],
        ['restore middle', () => restore(store, 'agent', { seq: Math.ceil(history / 2) })],
        ['list newest 10', () => listCheckpoints(store, 'agent', { limit: 10, reverse: true })],
      ];
      for (const [op, run] of ops) {
        await run(); // warm-up (and the check that it works)
        const times: number[] = [];
        for (let i = 0; i < runs; i++) {
          store.requests = none();
          const t0 = performance.now();
          await run();
          times.push(performance.now() - t0);
        }
        out.push({ store: kind.name, history, op, latency: summarize(times), requests: { ...store.requests } });
        const r = store.requests;
        progress.note(
          `${kind.name} ${history} checkpoints, ${op}: p50 ${summarize(times).p50.toFixed(2)} ms; ${r.lists} LIST (${r.keysListed} keys), ${r.gets} GET, ${r.writes} PUT`,
        );
      }
    }
  }
  return out;
}
