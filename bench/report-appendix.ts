/**
 * The appendix of BENCHMARKS.md (docs/benchmarks-appendix.md): every table of one run, with how
 * each figure was measured. Written from the results, never by hand.
 */
import * as path from 'node:path';
import { SHORT, STRATEGIES, type StrategyId } from './strategies.js';
import { table, bytes, int, ms, pct, median } from './stats.js';
import type { StallResult } from './scenarios.js';
import { historySection } from './report-history.js';
import { restoreSection } from './report-restore.js';
import { manySection } from './report-many.js';
import { resumeSection } from './report-resume.js';
import { storesSection } from './report-stores.js';
import { encryptionSection } from './report-encryption.js';
import { langgraphSection } from './report-langgraph.js';
import { amplificationSection, memorySection } from './report-change.js';
import { APPENDIX, find, generatedLine, intervalLabel, per1000, sizeLabel, spread, type Results } from './report.js';

export function renderAppendix(res: Results): string {
  const { run } = res;
  const H = run.headlineSize;
  const out: string[] = [];
  const p = (s = ''): void => void out.push(s);
  /** A chart's path (from the output directory) as the appendix links it. */
  const chart = (rel: string): string => path.posix.relative(path.posix.dirname(APPENDIX), rel);
  const refs = res.throughput.filter((r) => r.strategy === 'none');
  const ref = median(refs.map((r) => r.stepsPerSec));
  const refCpu = median(refs.map((r) => r.cpuMsPerStep));

  p('# statefold benchmarks: every table');
  p();
  p(
    `${generatedLine(run)} The summary: [BENCHMARKS.md](${path.posix.relative(path.posix.dirname(APPENDIX), 'BENCHMARKS.md')}).`,
  );
  if (run.mode !== 'full')
    p(
      `\n**This is a ${run.mode} run: fewer steps and shorter loops than the full run; its figures are indicative only.**`,
    );
  p();

  // ---- workload
  p('## Workloads');
  p();
  p(
    `**coding** (the headline): a coding agent whose tool results are real files. Text comes from the files under \`node_modules\` (Markdown, TypeScript, JavaScript, JSON; sorted by path, picked by a generator seeded with ${run.seed}, so the same lockfile gives the same run). The state: a sliding context window of 60 messages (the agent's \`read_file\` calls and their results, each result a file cut at about 0.45 × size / 30 bytes: ~7.5 KB at 500 KB), a 12-step plan, a workspace of open files filling the rest of the nominal size, remembered facts, counters. Per step: the agent reads one more file (two messages pushed, the two oldest shifted out of the window), and about ${pct(run.change, 0)} of the leaves outside the window are changed in place (a line of an open file replaced by a line of another file, plan notes rewritten, a status moved, facts re-scored), and the counters bumped.`,
  );
  p();
  p(
    `**embeddings**: a generated state where ~35% of the bytes are 256-dim Float32Array embeddings of retrieved documents, with messages (assistant turns with tool calls, tool results, user turns) of generated words, a plan, facts and counters. Per step: append one message (~0.6 × change × size), rewrite one plan step's notes and status (~0.3 × change × size), bump the counters: about ${pct(run.change, 0)} of the state. When the conversation reaches twice its initial ~75 messages, its older half is replaced by one summary message, so the state stays between 1× and ~1.45× its nominal size. Its words compress better than real text, and most of its change is appended, so it flatters an incremental engine; it is kept as a second workload, not as the headline.`,
  );
  p();
  p(
    'Nominal sizes are msgpack bytes of the initial state (the actual size is in brackets where it differs). Each strategy gets the update style it is meant for: in-place mutation (statefold copy mode, JSON+gzip, fjp mirror) or immutable updates with structural sharing (statefold immutable mode, full msgpackr+lz4 through statefold with baseEvery 1).',
  );
  p();
  p('Strategies:');
  p();
  for (const id of Object.keys(STRATEGIES) as StrategyId[]) p(`- **${SHORT[id]}**: ${STRATEGIES[id].label}.`);
  p();
  p(
    "The JSON+gzip baseline stringifies in the call (as people write it) and gzips on zlib's thread pool; JSON turns each Float32Array into an object of its indices, as JSON.stringify does. The fjp baseline writes a full base every 32 checkpoints, as statefold does by default.",
  );
  p();

  // ---- 1, 2, 4 per checkpoint
  p('## Stall and commit latency (one checkpoint per step)');
  p();
  p(
    "Stall: how long the `checkpoint()` call blocks the caller (for statefold: the capture; the engine defers encoding to a later turn of the event loop). Loop blocked: from the call until a `setImmediate` queued right after it runs, i.e. the call plus the main-thread work the checkpoint queued for the next turn (statefold's deferred encoding — msgpack, lz4, checksum — and for the memory store the whole commit); the agent's next step waits that long. Commit: from the call until the promise resolves (durable: fsync'd for the file store). Each step starts on a fresh macrotask (an agent awaits its model or tools between checkpoints) and each checkpoint is awaited before the next step; the first (initial) checkpoint is left out. Milliseconds, p50 / p99; n checkpoints.",
  );
  p();
  const sizes = [...new Set(res.stall.map((r) => r.size))].sort((a, b) => a - b);
  const stores = [...new Set(res.stall.map((r) => r.store))];
  const workloads = [...new Set(res.stall.map((r) => r.workload))];
  /** Stall rows in table order: workload, size, store. */
  const ordered = workloads.flatMap((w) =>
    sizes.flatMap((size) =>
      stores.flatMap((store) => res.stall.filter((x) => x.workload === w && x.size === size && x.store === store)),
    ),
  );
  const rows: string[][] = [];
  for (const r of ordered) {
    const size = r.size;
    const d = r.stallByKind.delta;
    const b = r.stallByKind.base;
    rows.push([
      r.workload,
      `${sizeLabel(size)} (${sizeLabel(r.stateBytes)})`,
      r.store,
      SHORT[r.strategy],
      spread(r.stall),
      d ? spread(d) : '–',
      b ? `${spread(b)} (n ${b.n})` : '–',
      spread(r.loopBlock),
      spread(r.commit),
      String(r.steps),
    ]);
  }
  p(
    table(
      [
        'workload',
        'state',
        'store',
        'strategy',
        'stall',
        'stall, deltas',
        'stall, bases',
        'loop blocked',
        'commit',
        'n',
      ],
      rows,
    ),
  );
  p();
  p(`![stall against state size](${chart(run.charts.stall)})`);
  p();
  for (const line of amplificationSection(ordered)) p(line);
  for (const line of memorySection(res.memory)) p(line);

  // ---- bytes per 1,000 steps
  p('## Bytes and write requests per 1,000 steps (one checkpoint per step)');
  p();
  p(
    'Counted by a wrapper around the store (every `putIfAbsent`), after the initial checkpoint. "vs full" compares with full msgpackr+lz4 snapshots (statefold, baseEvery 1) and with JSON+gzip, same state size, same store, same run.',
  );
  p();
  const brows: string[][] = [];
  for (const r of ordered) {
    const f = find(res.stall, r.workload, r.size, r.store, (x) => x.strategy === 'sf-full');
    const j = find(res.stall, r.workload, r.size, r.store, (x) => x.strategy === 'json-gzip');
    const a = per1000(r);
    const fewer = (o: StallResult | undefined): string => (o ? pct(1 - a.bytes / per1000(o).bytes) : 'n/a');
    brows.push([
      r.workload,
      sizeLabel(r.size),
      r.store,
      SHORT[r.strategy],
      bytes(a.bytes),
      a.base ? bytes(a.base) : '–',
      a.delta ? bytes(a.delta) : '–',
      int(a.requests),
      r.counts.requests.full
        ? `${r.counts.requests.full} full`
        : `${r.counts.requests.base}/${r.counts.requests.delta}`,
      r.strategy === 'sf-full' ? '–' : fewer(f),
      r.strategy === 'json-gzip' ? '–' : fewer(j),
    ]);
  }
  p(
    table(
      [
        'workload',
        'state',
        'store',
        'strategy',
        'bytes',
        'bases',
        'deltas',
        'requests',
        'objects written: bases/deltas',
        'fewer bytes than full msgpackr+lz4',
        'than JSON+gzip',
      ],
      brows,
    ),
  );
  p();

  // ---- 3 throughput
  if (res.throughput.length > 0) {
    p(`## Agent-loop throughput against the checkpoint interval (${sizeLabel(H)}, ${run.throughputStore} store)`);
    p();
    p(
      `Each step does ${run.stepWorkMs} ms of fixed CPU work (${int(run.workPerMs * run.stepWorkMs)} rounds of an LCG, calibrated at start), changes the state, checkpoints when the interval has passed (not awaited), and yields to the event loop. Throughput is steps over the run's time, which includes waiting for the last checkpoint to be durable. Loss is against the median of ${refs.length} no-checkpoint reference runs interleaved with the others (${refs.map((r) => r.stepsPerSec.toFixed(1)).join(', ')} steps/s). Per-second windows give the spread. Wall-clock throughput moves with whatever else the shared machine runs; CPU time per step (this process, all threads: user + system) does not, so the loss in CPU time is the figure the target is judged on; its noise floor is the spread of the reference runs\' CPU per step. "In checkpoint() calls" is the share of the run spent inside the calls (capture and, with an idle queue, encoding): a lower bound of the loss that neighbours barely move (it leaves out garbage collection and the thread-pool side of writes).`,
    );
    p();
    const trows = res.throughput.map((r) => [
      r.strategy === 'none' ? 'none (reference)' : SHORT[r.strategy],
      intervalLabel(r.interval),
      `${(r.durationMs / 1000).toFixed(1)} s`,
      r.stepsPerSec.toFixed(1),
      `${r.windows.p50.toFixed(1)} [${r.windows.q1.toFixed(1)}–${r.windows.q3.toFixed(1)}] (n ${r.windows.n})`,
      r.strategy === 'none' ? '–' : pct(1 - r.stepsPerSec / ref),
      r.cpuMsPerStep.toFixed(2),
      r.strategy === 'none' ? '–' : pct(1 - refCpu / r.cpuMsPerStep),
      r.checkpoints ? pct((r.stall.mean * r.stall.n) / r.durationMs, 2) : '–',
      r.load.toFixed(1),
      String(r.checkpoints),
      r.checkpoints ? `${ms(r.stall.p50)} / ${ms(r.stall.max)}` : '–',
      r.strategy === 'none' ? '–' : bytes(r.bytesPerHour),
      r.strategy === 'none' ? '–' : int(r.requestsPerHour),
    ]);
    p(
      table(
        [
          'strategy',
          'interval',
          'run',
          'steps/s',
          'per-second windows p50 [IQR]',
          'loss (wall clock)',
          'CPU ms per step',
          'loss (CPU time)',
          'in checkpoint() calls',
          'load',
          'checkpoints',
          'call p50 / max, ms',
          'bytes per agent-hour',
          'write requests per agent-hour',
        ],
        trows,
      ),
    );
    p();
    p(
      `Bytes per agent-hour are the bytes written during the run scaled to an hour, at this loop's rate of ~${ref.toFixed(0)} steps/s; a real agent whose steps wait seconds on a model changes less per second and writes proportionally less. Where a baseline was not run at an interval, the chart derives its line from its measured bytes per checkpoint × checkpoints per hour (dashed).`,
    );
    p();
    p(`![bytes per agent-hour against interval](${chart(run.charts.bytesPerHour)})`);
    p();
  }

  // ---- 5 restore
  for (const line of restoreSection(res.restore, chart(run.charts.restore))) p(line);
  for (const line of resumeSection(res.resume ?? [])) p(line);
  for (const line of historySection(res.history ?? [])) p(line);
  for (const line of manySection(res.many ?? [], res.manySkipped)) p(line);
  for (const line of storesSection(res.storesAlone)) p(line);
  for (const line of encryptionSection(res.encryption ?? [])) p(line);
  for (const line of langgraphSection(res.langgraph)) p(line);

  // ---- micro
  if (res.micro.length > 0) {
    p('## What the pieces cost (tinybench micro-benchmarks)');
    p();
    p(
      'On the state after one step of change. "fjp compare vs deep-cloned mirror" is the hand-rolled diff (without the clone that must follow it); "immutable update" compares two structurally shared states.',
    );
    p();
    const cols = [...new Map(res.micro.map((r) => [`${r.workload} ${r.size}`, r])).values()];
    const tasks = [...new Set(res.micro.map((r) => r.task))];
    p(
      table(
        ['task (ms, p50 [IQR], n)', ...cols.map((c) => `${c.workload} ${sizeLabel(c.size)}`)],
        tasks.map((t) => [
          t,
          ...cols.map((c) => {
            const r = res.micro.find((x) => x.workload === c.workload && x.size === c.size && x.task === t);
            return r ? `${ms(r.latency.p50)} [${ms(r.latency.q1)}–${ms(r.latency.q3)}] (${r.latency.n})` : '–';
          }),
        ]),
      ),
    );
    p();
  }
  p('## Notes');
  p();
  p(
    `- Mode ${run.mode}; change per step ${pct(run.change, 1)}; loop durations: ${Object.entries(run.durations)
      .map(([k, v]) => `${k} ${v / 1000} s`)
      .join(', ')}.`,
  );
  p('- Raw results: `bench/results.json` (same run). Charts: Vega-Lite specs rendered to SVG by vega in Node.');
  p(
    '- `npm test` makes no timing assertions: test/bench/bench-smoke.test.ts runs this benchmark at tiny sizes (`--smoke`) into a temp directory and checks the structure of its output.',
  );
  p();
  return out.join('\n');
}
