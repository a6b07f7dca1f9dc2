/**
 * What an engine keeps in memory: the heap (and array buffers) held with an engine open on an agent's
 * state, less the same without it, after full garbage collections, against the memory of the state itself
 * (measured as what a deep copy of the state takes).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SnapshotEngine, type Store } from 'statefold';
import { median } from './stats.js';
import type { StoreKind } from './stores.js';
import { Agent, type WorkloadName } from './workload.js';
import { makeWorkload } from './workloads.js';

export interface MemoryResult {
  workload: WorkloadName;
  size: number;
  mode: 'copy' | 'immutable';
  /** Heap + array buffers the agent's state takes. */
  stateBytes: number;
  /** Heap + array buffers held while the engine is open, less the same after it is closed and dropped. */
  engineBytes: number;
  /** The same for an engine on a near-empty state: what any engine keeps, whatever its state. */
  fixedBytes: number;
}

/** A full collection (gc exposed at run time, as --expose-gc would). */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  return () => {
    gc();
    gc();
  };
}

function used(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

export async function memoryScenario(
  kind: StoreKind,
  workload: WorkloadName,
  size: number,
  change: number,
  seed: number,
  steps: number,
): Promise<MemoryResult[]> {
  const gc = collector();
  const out: MemoryResult[] = [];
  for (const mode of ['copy', 'immutable'] as const) {
    const agent = new Agent(mode === 'copy' ? 'mutable' : 'immutable', makeWorkload(workload, size, change, seed));
    for (let i = 0; i < 5; i++) agent.step();
    // The state's own memory: what a deep copy of it takes (the workload's caches of file text and
    // of the corpus listing are not the state's, so a before/after of building the agent would overstate it).
    gc();
    const before = used();
    let copy: unknown = structuredClone(agent.state);
    gc();
    const stateBytes = used() - before;
    copy = undefined;
    void copy;
    const store = await kind.create(`memory-${workload}-${mode}`, { fsync: false });
    // The heap moves between collections: the median of three engines, each on its own stream.
    const engineBytes: number[] = [];
    const fixedBytes: number[] = [];
    for (let r = 0; r < 3; r++) {
      engineBytes.push(await held(store, mode, agent.state, () => agent.step(), steps, gc));
      let n = 0;
      fixedBytes.push(await held(store, mode, { n }, () => ({ n: ++n }), steps, gc));
    }
    out.push({ workload, size, mode, stateBytes, engineBytes: median(engineBytes), fixedBytes: median(fixedBytes) });
  }
  return out;
}

/** Memory held by an engine open on `first` after `steps` more checkpoints, less the same once it is closed. */
async function held(
  store: Store,
  mode: 'copy' | 'immutable',
  first: object,
  step: () => object,
  steps: number,
  gc: () => void,
): Promise<number> {
  let engine: SnapshotEngine | undefined = await SnapshotEngine.open({
    store,
    stream: `agent-${Math.random().toString(36).slice(2)}`,
    updates: mode,
  });
  await engine.checkpoint(first);
  for (let i = 0; i < steps; i++) await engine.checkpoint(step());
  gc();
  const withEngine = used();
  await engine.close();
  engine = undefined;
  // Let the close's last callbacks (the encoder worker's replies, timers) run before collecting.
  await new Promise((r) => setTimeout(r, 20));
  gc();
  return withEngine - used();
}
