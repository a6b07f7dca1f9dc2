/** The report's section on resuming from a fresh process (bench/fresh.ts). */
import type { ResumeResult } from './fresh.js';
import { bytes, ms, table } from './stats.js';

/** Issue 30's target: a fresh process has the state in hand within this, on SqliteStore and on FileStore. */
const TARGET_MS = 50;

export function resumeSection(results: ResumeResult[]): string[] {
  if (results.length === 0) return [];
  const r0 = results[0]!;
  return [
    '## Resume from a fresh process',
    '',
    `One agent (${r0.workload} workload, ${bytes(r0.size)} nominal, ${bytes(r0.stateBytes)} of msgpack at the end) writes ${r0.checkpoints} checkpoints through the engine (its default policy, durable stores: FileStore with fsync, SqliteStore with synchronous=FULL); then a new Node process opens the stream and takes its state, as a restarted agent does first thing: from constructing the store until \`SnapshotEngine.open\` resolved with \`engine.state\` in hand, the modules already loaded (Node's own start-up left out). ${r0.open.n} fresh processes per store, the stores alternating; median, interquartile range and range. Target (issue 30): at most ${TARGET_MS} ms on each store.`,
    '',
    table(
      ['store', 'checkpoints', 'open + state p50 ms', 'IQR ms', 'min–max ms', 'processes', `≤ ${TARGET_MS} ms`],
      results.map((r) => [
        r.store,
        String(r.checkpoints),
        ms(r.open.p50),
        `${ms(r.open.q1)}–${ms(r.open.q3)}`,
        `${ms(r.open.min)}–${ms(r.open.max)}`,
        String(r.open.n),
        r.open.p50 <= TARGET_MS ? 'yes' : '**no**',
      ]),
    ),
    '',
  ];
}
