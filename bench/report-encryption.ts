/** The report's section on what encryption costs (bench/encryption.ts). */
import { pack } from 'msgpackr';
import type { EncryptionResult } from './encryption.js';
import type { StallResult } from './scenarios.js';
import { bytes, median, ms, table } from './stats.js';

const KB = (n: number): string => bytes(n);
/** Bytes the key id adds to a frame header: the msgpack of `k` and the id \`bench\`. */
const keyField = pack({ k: 'bench' }).byteLength - pack({}).byteLength;

/** Sealed against plain, per round: the ratio of a figure, as "median (min–max over rounds)". */
function ratios(r: EncryptionResult, figure: (s: StallResult) => number): { median: number; text: string } {
  const each = r.rounds.map((x) => figure(x.sealed) / figure(x.plain)).filter(Number.isFinite);
  const m = median(each);
  const text =
    each.length > 1
      ? `${m.toFixed(2)}× (rounds ${Math.min(...each).toFixed(2)}–${Math.max(...each).toFixed(2)})`
      : `${m.toFixed(2)}×`;
  return { median: m, text };
}

/** Mean stored bytes per delta and per base of a stall run. */
function perFrame(s: StallResult): { delta: number; base: number } {
  const deltas = s.steps - s.bases;
  return {
    delta: deltas > 0 ? s.counts.bytes.delta / deltas : NaN,
    base: s.bases > 0 ? s.counts.bytes.base / s.bases : NaN,
  };
}

/** The section: targets, then each round's figures side by side. */
export function encryptionSection(results: EncryptionResult[]): string[] {
  if (results.length === 0) return [];
  const out: string[] = [];
  out.push('## Encryption: what it costs');
  out.push('');
  out.push(
    "statefold in `updates: 'copy'` mode with and without `encryption` (AES-256-GCM, one random 32-byte key under the id `bench`) on the headline workload, one checkpoint per step, in alternating order over several rounds of this run (a round runs both, the next round the other one first). Sealing runs where compression runs, after `checkpoint()` has returned: on the frame worker for payloads of 64 KB or more, else on the main thread in the commit. Ratios are encrypted / plain, the median over rounds with the lowest and highest round. Restore: the newest checkpoint of a base and its deltas, plain and sealed streams of the same workload, timed alternately.",
  );
  out.push('');
  for (const r of results) {
    const stall = ratios(r, (s) => s.stall.p50);
    const stall99 = ratios(r, (s) => s.stall.p99);
    const commit = ratios(r, (s) => s.commit.p50);
    const first = r.rounds[0]!;
    const extraDelta = perFrame(first.sealed).delta - perFrame(first.plain).delta;
    const extraBase = perFrame(first.sealed).base - perFrame(first.plain).base;
    const restoreRatio = r.restore.sealed.p50 / r.restore.plain.p50;
    const blocked = (s: StallResult): number => s.loopBlockByKind.base?.p99 ?? NaN;
    const verdicts: string[][] = [
      [
        `stall unchanged by encryption (${r.workload} ${KB(r.size)}, ${r.store} store)`,
        `p50 ${stall.text}, p99 ${stall99.text}; plain p50 ${ms(median(r.rounds.map((x) => x.plain.stall.p50)))} ms, encrypted ${ms(median(r.rounds.map((x) => x.sealed.stall.p50)))} ms`,
        stall.median <= 1.1 ? 'yes' : '**no**',
      ],
      [
        `bytes: + 28 per frame (nonce and tag), plus the key id's header field (${keyField} B for \`bench\`)`,
        `+${extraDelta.toFixed(0)} B per delta${Number.isFinite(extraBase) ? `, +${extraBase.toFixed(0)} B per base` : ''} (mean, same steps); the restored chain: ${KB(r.chainBytes.plain)} plain, ${KB(r.chainBytes.sealed)} sealed, +${((r.chainBytes.sealed - r.chainBytes.plain) / r.chainBytes.frames).toFixed(0)} B per frame`,
        extraDelta <= 28 + keyField + 0.5 && !(extraBase > 28 + keyField + 0.5) ? 'yes' : '**no**',
      ],
    ];
    out.push(table(['target', 'this run', 'met'], verdicts));
    out.push('');
    out.push(
      `Also: commit latency (call to durable) p50 ${commit.text}; restore of base + ${r.restore.chain} deltas p50 ${ms(r.restore.plain.p50)} ms plain, ${ms(r.restore.sealed.p50)} ms encrypted (${restoreRatio.toFixed(2)}×, n ${r.restore.plain.n} each; IQR ${ms(r.restore.plain.q1)}–${ms(r.restore.plain.q3)} and ${ms(r.restore.sealed.q1)}–${ms(r.restore.sealed.q3)} ms).`,
    );
    out.push('');
    const rows = r.rounds.flatMap((x, i) =>
      (['plain', 'sealed'] as const).map((k) => {
        const s = x[k];
        const f = perFrame(s);
        return [
          `${i + 1}`,
          k === 'plain' ? 'plain' : 'encrypted',
          `${ms(s.stall.p50)} / ${ms(s.stall.p99)}`,
          `${ms(s.loopBlock.p50)} / ${ms(s.loopBlock.p99)}`,
          ms(blocked(s)),
          `${ms(s.commit.p50)} / ${ms(s.commit.p99)}`,
          KB(f.delta),
          KB(f.base),
          `${s.bases}`,
          `${s.steps}`,
        ];
      }),
    );
    out.push(
      table(
        [
          'round',
          'run',
          'stall p50 / p99 ms',
          'loop blocked p50 / p99 ms',
          'bases: loop blocked p99 ms',
          'commit p50 / p99 ms',
          'bytes per delta',
          'bytes per base',
          'bases',
          'checkpoints',
        ],
        rows,
      ),
    );
    out.push('');
  }
  return out;
}
