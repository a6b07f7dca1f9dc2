/**
 * The parts of BENCHMARKS.md about cost against the change: the targets for states made of text,
 * what each checkpoint stores against what its step added, and what an engine keeps in memory.
 */
import type { MemoryResult } from './memory.js';
import type { StallResult } from './scenarios.js';
import { table, bytes, ms, pct } from './stats.js';
import { SHORT } from './strategies.js';

/** A target, the figure it is judged on, and why it was missed. */
export interface Verdict {
  target: string;
  source: string;
  ours: string;
  /** 'noise': the machine's run-to-run spread is wider than the target, so this run cannot tell. */
  met: boolean | 'noise' | undefined;
  why: string;
}

const label = (n: number): string => bytes(n).replace(' ', '\u00a0');

/** Stored bytes of a delta against the bytes its step added (frame overhead included). */
export function amplification(r: StallResult): number {
  return r.added.deltas > 0 ? r.deltaBytes / r.added.deltas : NaN;
}

/** Every stored byte (bases included) against every byte the steps added. */
export function overallAmplification(r: StallResult): number {
  const stored = Object.values(r.counts.bytes).reduce((a, b) => a + b, 0) - r.counts.bytes.fence;
  return r.added.all > 0 ? stored / r.added.all : NaN;
}

/** Bases (full snapshots for the baselines) per 1,000 checkpoints. */
export function basesPer1000(r: StallResult): number {
  return (r.bases * 1000) / r.steps;
}

/**
 * Why bases push the overall amplification over 1.5x, with the arithmetic: a base of B bytes every N
 * checkpoints adds B / N to each; the smallest N that would bring it under 1.5x with these deltas.
 */
function basesWhy(rows: StallResult[]): string {
  const r = rows[0]!;
  const base = r.counts.requests.base > 0 ? r.counts.bytes.base / r.counts.requests.base : 0;
  const deltas = r.steps - r.bases;
  const delta = deltas > 0 ? r.deltaBytes / deltas : 0;
  const added = r.added.all / r.steps;
  const every = r.steps / Math.max(1, r.bases);
  const need = 1.5 * added > delta ? Math.ceil((base - delta) / (1.5 * added - delta)) : Infinity;
  return `a base is the whole state, ${bytes(base)} here, ${r.bases} in ${r.steps} checkpoints (the default policy, \`baseEvery: 32\`, bounds a restore to 31 deltas): ${bytes(base / every)} per checkpoint on top of ${bytes(delta)} per delta, against ${bytes(added)} added per step. By the same figures, \`policy.baseEvery\` of ${Number.isFinite(need) ? need : 'no value'} would meet 1.5×, at the cost of restores that fold up to that many deltas (see "Restore time against chain length").`;
}

/** The targets for a text state: stall, loop blocked, amplification, memory. */
export function changeVerdicts(
  rows: StallResult[],
  memory: MemoryResult[],
  workload: string,
  size: number,
  store: string,
): Verdict[] {
  const at = (strategy: string): StallResult | undefined =>
    rows.find((r) => r.workload === workload && r.size === size && r.store === store && r.strategy === strategy);
  const where = `${label(size)} ${workload} workload, ${store} store`;
  const out: Verdict[] = [];
  const copy = at('sf-copy');
  const imm = at('sf-immutable');
  const blocked = (r: StallResult, kind: 'base' | 'delta'): string => {
    const s = r.stallByKind[kind];
    return s ? `${kind}s: stall p99 ${ms(s.p99)} ms` : '';
  };
  if (copy) {
    const met = copy.stall.p50 <= 1 && copy.stall.p99 <= 3;
    out.push({
      target: `stall p50 ≤ 1 ms and p99 ≤ 3 ms, \`updates: 'copy'\` (${where})`,
      source: 'statefold before this release, on a similar text state: p50 3.7 ms, p99 12 ms',
      ours: `p50 ${ms(copy.stall.p50)} ms, p99 ${ms(copy.stall.p99)} ms (n ${copy.stall.n})`,
      met,
      why: met
        ? ''
        : `copy mode walks the whole state at every checkpoint, comparing each node with its private copy (${blocked(copy, 'delta')}); p99s also carry garbage collection and preemption on this shared machine.`,
    });
  }
  if (imm) {
    const met = imm.stall.p50 <= 0.1;
    out.push({
      target: `stall p50 ≤ 0.1 ms, \`updates: 'immutable'\` (${where})`,
      source: '–',
      ours: `p50 ${ms(imm.stall.p50)} ms, p99 ${ms(imm.stall.p99)} ms (n ${imm.stall.n})`,
      met,
      why: met
        ? ''
        : `immutable mode walks only the changed paths, but each step here changes ~1% of the leaves outside the window and shifts a 60-message window: the window's array is matched by message id (a few ops), and each changed path is validated.`,
    });
  }
  const both = [copy, imm].filter((r): r is StallResult => r !== undefined);
  const withBases = both.filter((r) => r.loopBlockByKind.base !== undefined);
  if (withBases.length > 0) {
    const met = withBases.every((r) => r.loopBlockByKind.base!.p99 <= 1);
    const line = (r: StallResult): string => {
      const b = r.loopBlockByKind.base!;
      const d = r.loopBlockByKind.delta;
      return `${SHORT[r.strategy]}: bases p50 ${ms(b.p50)} ms, p99 ${ms(b.p99)} ms (n ${b.n})${d ? `; deltas p50 ${ms(d.p50)} ms, p99 ${ms(d.p99)} ms` : ''}`;
    };
    out.push({
      target: `a base blocks the event loop ≤ 1 ms at p99 (${where})`,
      source:
        'statefold before this release: p99 ~2.8 ms for a 500 KB base (encoded on the next turn, on the main thread)',
      ours: withBases.map(line).join('; '),
      met,
      why: met
        ? ''
        : `the base's capture runs in the call (the stall), its msgpack is built in slices of ≤ 0.5 ms between turns and its compression and checksum run on a worker thread; what remains on the turn after the call is the first slice plus garbage collection and preemption on this shared machine.`,
    });
  }
  if (both.length > 0) {
    const met = both.every((r) => amplification(r) <= 1.5);
    out.push({
      target: `bytes stored per delta ≤ 1.5 × the bytes its step added, frame included (${where})`,
      source: 'statefold before this release, sliding window: 69× (and 166 of 199 checkpoints were bases)',
      ours: both
        .map(
          (r) =>
            `${SHORT[r.strategy]}: ${amplification(r).toFixed(2)}× (bases ${basesPer1000(r).toFixed(0)} per 1,000 checkpoints; with bases counted, ${overallAmplification(r).toFixed(2)}×)`,
        )
        .join('; '),
      met,
      why: met ? '' : 'the operations carry JSON Pointer paths and the frame a header; small steps pay them in full.',
    });
    const overallMet = both.every((r) => overallAmplification(r) <= 1.5);
    out.push({
      target: `every byte stored ≤ 1.5 × every byte the steps added, bases included (${where})`,
      source: '–',
      ours: both
        .map(
          (r) =>
            `${SHORT[r.strategy]}: ${overallAmplification(r).toFixed(2)}× (${basesPer1000(r).toFixed(0)} bases per 1,000)`,
        )
        .join('; '),
      met: overallMet,
      why: overallMet ? '' : basesWhy(both),
    });
  }
  const mem = memory.filter((m) => m.workload === workload);
  if (mem.length > 0) {
    const met = mem.every((m) => m.engineBytes <= m.stateBytes);
    out.push({
      target: `memory an engine keeps ≤ 1 × the state (${label(mem[0]!.size)} ${workload} workload)`,
      source: '–',
      ours: mem
        .map(
          (m) =>
            `${m.mode}: ${bytes(Math.max(0, m.engineBytes))} for a state of ${bytes(m.stateBytes)} in memory (${(Math.max(0, m.engineBytes) / m.stateBytes).toFixed(2)}×)`,
        )
        .join('; '),
      met,
      why: met
        ? ''
        : mem.every((m) => m.engineBytes - m.fixedBytes <= m.stateBytes)
          ? `at this size the part every engine keeps whatever its state (${mem.map((m) => `${m.mode} ${bytes(Math.max(0, m.fixedBytes))}`).join(', ')}: the encoder's reusable buffer, the effect ledger, the queue) outweighs the state; beyond it, the engine keeps at most 1× the state (see "Memory an engine keeps").`
          : 'see "Memory an engine keeps".',
    });
  }
  return out;
}

/** The section on stored bytes against added bytes, per workload, size, store and strategy. */
export function amplificationSection(rows: StallResult[]): string[] {
  const out: string[] = [];
  out.push('## What each checkpoint stores against what its step added');
  out.push('');
  out.push(
    'Added: the msgpack bytes a step put into the state (the new messages; each new value; for a line edited in an open file, the line). Stored: the bytes written for the checkpoint, frame header and checksum included, and for statefold the small hint written after each base. Amplification, deltas: bytes of the checkpoints stored as deltas against what their steps added; with bases: every byte written against every byte added (bases are full snapshots, written every ≤ 32 checkpoints by default, sooner when the deltas outgrow the base). For the full-snapshot baselines every checkpoint is a full one. Same steps, same store as the stall table above.',
  );
  out.push('');
  out.push(
    table(
      [
        'workload',
        'state',
        'store',
        'strategy',
        'added per step',
        'stored per checkpoint',
        'amplification, deltas',
        'amplification, with bases',
        'bases per 1,000',
      ],
      rows.map((r) => {
        const stored = Object.values(r.counts.bytes).reduce((a, b) => a + b, 0) - r.counts.bytes.fence;
        const amp = amplification(r);
        return [
          r.workload,
          label(r.size),
          r.store,
          SHORT[r.strategy],
          bytes(r.added.all / r.steps),
          bytes(stored / r.steps),
          Number.isNaN(amp) ? '–' : `${amp.toFixed(2)}×`,
          `${overallAmplification(r).toFixed(2)}×`,
          basesPer1000(r).toFixed(0),
        ];
      }),
    ),
  );
  out.push('');
  return out;
}

/** The section on what an engine keeps in memory. */
export function memorySection(memory: MemoryResult[]): string[] {
  if (memory.length === 0) return [];
  return [
    '## Memory an engine keeps',
    '',
    "Heap and array buffers held with one engine open on the agent's state (after a few checkpoints), less the same after the engine is closed and dropped, both after full garbage collections; against the memory of the state itself (what a deep copy of it takes). The last column is the same measure for an engine on a near-empty state: the part every engine keeps whatever its state. `updates: 'copy'` keeps a private frozen copy of the state's objects and arrays, sharing the strings (JavaScript strings are immutable) and copying typed arrays and Dates; `updates: 'immutable'` keeps a reference to the last captured state, which shares every unchanged node with the caller's, plus a copy of each typed array and Date until its checkpoint is encoded. Both also keep the effect ledger, and each queued checkpoint until it is committed. Encoding a base allocates its msgpack and compressed bytes until the write completes.",
    '',
    table(
      ['workload', 'state', 'mode', 'state in memory', 'kept by the engine', 'ratio', 'kept on a near-empty state'],
      memory.map((m) => [
        m.workload,
        label(m.size),
        m.mode,
        bytes(m.stateBytes),
        bytes(Math.max(0, m.engineBytes)),
        `${(Math.max(0, m.engineBytes) / m.stateBytes).toFixed(2)}×`,
        bytes(Math.max(0, m.fixedBytes)),
      ]),
    ),
    '',
  ];
}
