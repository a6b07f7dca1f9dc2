/**
 * What encryption costs: the headline workload checkpointed by statefold in copy mode with and
 * without `encryption`, in alternating order over several rounds of one run (stall, loop blocked,
 * commit latency, bytes per frame), and restore of the same chain sealed and plain, interleaved.
 */
import { SnapshotEngine, restore, type Encryption } from 'statefold';
import { stallScenario, type StallResult } from './scenarios.js';
import { summarize, type Progress, type Summary } from './stats.js';
import type { StoreKind } from './stores.js';
import { BENCH_ENCRYPTION } from './strategies.js';
import { Agent, type WorkloadName } from './workload.js';
import { makeWorkload } from './workloads.js';

export interface EncryptionResult {
  workload: WorkloadName;
  size: number;
  store: string;
  /** Stall runs, plain and sealed, one pair per round (the order alternates between rounds). */
  rounds: { plain: StallResult; sealed: StallResult }[];
  /** Restore of the newest checkpoint (a base and `chain` deltas), plain and sealed, interleaved. */
  restore: { chain: number; plain: Summary; sealed: Summary };
  /** Stored bytes of that chain, plain and sealed, and its number of frames. */
  chainBytes: { plain: number; sealed: number; frames: number };
}

/** Runs `rounds` pairs of stall runs and the interleaved restores. */
export async function encryptionScenario(
  kind: StoreKind,
  workload: WorkloadName,
  size: number,
  change: number,
  seed: number,
  plan: { steps: number; rounds: number; chain: number; restores: number },
  progress: Progress,
): Promise<EncryptionResult> {
  const rounds: EncryptionResult['rounds'] = [];
  for (let r = 0; r < plan.rounds; r++) {
    const order = r % 2 === 0 ? (['sf-copy', 'sf-copy-enc'] as const) : (['sf-copy-enc', 'sf-copy'] as const);
    const got: Partial<Record<(typeof order)[number], StallResult>> = {};
    for (const strategy of order) {
      progress.note(`round ${r + 1} of ${plan.rounds}: ${strategy === 'sf-copy' ? 'plain' : 'encrypted'}`);
      got[strategy] = await stallScenario(kind, strategy, workload, size, change, seed, plan.steps, progress);
    }
    rounds.push({ plain: got['sf-copy']!, sealed: got['sf-copy-enc']! });
  }
  // One chain each, same workload, seed and stream id (in stores of their own): they differ only by sealing.
  const stores = {
    plain: await kind.create(`encryption-restore-plain-${workload}-${size}`),
    sealed: await kind.create(`encryption-restore-sealed-${workload}-${size}`),
  };
  const chainBytes = { plain: 0, sealed: 0, frames: plan.chain + 1 };
  for (const [which, encryption] of [
    ['plain', undefined],
    ['sealed', BENCH_ENCRYPTION],
  ] as const) {
    const agent = new Agent('mutable', makeWorkload(workload, size, change, seed));
    const engine = await SnapshotEngine.open({
      store: stores[which],
      stream: 'agent',
      policy: { baseEvery: 1_000_000, maxDeltaRatio: Infinity },
      ...(encryption && { encryption }),
    });
    for (let i = 0; i <= plan.chain; i++) {
      const info = await engine.checkpoint(i === 0 ? agent.state : agent.step());
      chainBytes[which] += info.bytes;
    }
    await engine.close();
  }
  const samples = { plain: [] as number[], sealed: [] as number[] };
  const read = async (which: 'plain' | 'sealed', encryption: Encryption | undefined): Promise<void> => {
    const t0 = performance.now();
    await restore(stores[which], 'agent', encryption ? { encryption } : {});
    samples[which].push(performance.now() - t0);
  };
  await read('plain', undefined); // warm-up: page cache, code paths
  await read('sealed', BENCH_ENCRYPTION);
  samples.plain.length = 0;
  samples.sealed.length = 0;
  for (let i = 0; i < plan.restores; i++) {
    if (i % 2 === 0) {
      await read('plain', undefined);
      await read('sealed', BENCH_ENCRYPTION);
    } else {
      await read('sealed', BENCH_ENCRYPTION);
      await read('plain', undefined);
    }
    progress.tick(i + 1, plan.restores);
  }
  return {
    workload,
    size,
    store: kind.name,
    rounds,
    restore: { chain: plan.chain, plain: summarize(samples.plain), sealed: summarize(samples.sealed) },
    chainBytes,
  };
}
