/** The "Restore time against chain length" section of BENCHMARKS.md, with the S3 span-delta target. */
import { bytes, int, ms, table } from './stats.js';
import type { RestoreResult } from './scenarios.js';

const sizeLabel = (n: number): string => bytes(n).replace(' ', '\u00a0');

/** The target the section judges: on S3, a 100-delta restore within this many times a 1-delta one. */
const CHAIN_RATIO_TARGET = 2.5;

export function restoreSection(rows: RestoreResult[], chart: string): string[] {
  const out: string[] = [];
  const p = (s = ''): number => out.push(s);
  p('## Restore time against chain length');
  p();
  p(
    'One stream per state size: a base and then up to the longest chain of deltas (policy baseEvery 1,000,000, maxDeltaRatio Infinity), built once in memory and copied to each store; `restore(store, stream, { seq })` of base + N deltas, timed by tinybench (list, read, verify, decompress, decode, fold). File store reads come from the page cache. On S3 the chain is written twice: without span deltas (`spanEvery` 1, the default) and with `spanEvery` 8, as the README suggests for S3 once every reader reads format version 4: every k-th delta also carries the operations of the k - 1 before it, so a restore reads the base, the span deltas and at most k - 1 deltas after the last. "Objects read" counts the checkpoints a restore reads; "chain bytes" is everything stored for the chain, span deltas included.',
  );
  p();
  const s3 = (span: number, chain: number): RestoreResult | undefined =>
    rows.find((r) => r.store === 's3' && r.spanEvery === span && r.chain === chain);
  const spans = [...new Set(rows.filter((r) => r.store === 's3').map((r) => r.spanEvery))].sort((a, b) => b - a);
  const verdicts = spans.flatMap((span) => {
    const [one, long] = [s3(span, 1), s3(span, 100)];
    if (one === undefined || long === undefined) return [];
    const ratio = long.latency.p50 / one.latency.p50;
    // The spread: the slowest and fastest ratios the two interquartile ranges allow.
    const low = long.latency.q1 / one.latency.q3;
    const high = long.latency.q3 / one.latency.q1;
    return [
      [
        `restore of a 100-delta chain within ${CHAIN_RATIO_TARGET}× of a 1-delta chain (s3, ${sizeLabel(long.size)}, spanEvery ${span})`,
        `${ms(long.latency.p50)} ms against ${ms(one.latency.p50)} ms: ${ratio.toFixed(2)}× (from the quartiles ${low.toFixed(2)}–${high.toFixed(2)}×); ${long.objects} objects read against ${one.objects}`,
        ratio <= CHAIN_RATIO_TARGET ? 'yes' : '**no**',
      ],
    ];
  });
  if (verdicts.length > 0) {
    p(table(['target', 'this run', 'met'], verdicts));
    p();
    const [plain, spanned] = [s3(1, 100), s3(spans[0]!, 100)];
    if (plain !== undefined && spanned !== undefined && spanned.spanEvery > 1)
      p(
        `What span deltas cost here: the 100-delta chain stores ${bytes(spanned.chainBytes)} against ${bytes(plain.chainBytes)} without them (${(spanned.chainBytes / plain.chainBytes).toFixed(2)}×), and its restore reads ${bytes(spanned.bytesRead)} in ${spanned.objects} objects against ${bytes(plain.bytesRead)} in ${plain.objects}.`,
      );
    p();
  }
  const rrows = rows.map((r) => [
    r.workload,
    sizeLabel(r.size),
    r.store,
    int(r.spanEvery),
    int(r.chain),
    int(r.objects),
    bytes(r.chainBytes),
    ms(r.latency.p50),
    `${ms(r.latency.q1)}–${ms(r.latency.q3)}`,
    ms(r.latency.p99),
    String(r.latency.n),
  ]);
  p(
    table(
      [
        'workload',
        'state',
        'store',
        'spanEvery',
        'deltas',
        'objects read',
        'chain bytes',
        'p50 ms',
        'IQR ms',
        'p99 ms',
        'n',
      ],
      rrows,
    ),
  );
  p();
  p(`![restore time against chain length](${chart})`);
  p();
  return out;
}
