/** Summary statistics and progress output for the benchmark. */

/** Quantiles and counts of a sample (milliseconds, or any unit). */
export interface Summary {
  n: number;
  p50: number;
  p99: number;
  q1: number;
  q3: number;
  min: number;
  max: number;
  mean: number;
}

/** Linear-interpolated quantile of sorted values. */
function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

export function summarize(values: readonly number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return {
    n: s.length,
    p50: quantile(s, 0.5),
    p99: quantile(s, 0.99),
    q1: quantile(s, 0.25),
    q3: quantile(s, 0.75),
    min: s[0] ?? NaN,
    max: s[s.length - 1] ?? NaN,
    mean,
  };
}

export function median(values: readonly number[]): number {
  return summarize(values).p50;
}

/** A markdown table: the first column left-aligned, the others right-aligned. */
export function table(head: string[], rows: string[][]): string {
  const align = head.map((_, i) => (i === 0 ? ':--' : '--:'));
  return [`| ${head.join(' | ')} |`, `| ${align.join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** Formats milliseconds with a precision that suits their size. */
export function ms(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  if (v < 0.1) return v.toFixed(3);
  if (v < 10) return v.toFixed(2);
  if (v < 100) return v.toFixed(1);
  return Math.round(v).toLocaleString('en-US');
}

/** Formats a byte count as B, KB, MB or GB (powers of 1,000). */
export function bytes(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let u = 0;
  while (Math.abs(v) >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return `${u === 0 ? Math.round(v) : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : Math.round(v)} ${units[u]}`;
}

export function int(v: number): string {
  return Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a';
}

export function pct(v: number, digits = 1): string {
  return Number.isFinite(v) ? `${(v * 100).toFixed(digits)}%` : 'n/a';
}

/** Progress on stderr: which scenario, how far, elapsed time. */
export class Progress {
  readonly #start = performance.now();
  #last = 0;
  #scenario = 0;
  constructor(
    readonly total: number,
    readonly out: NodeJS.WriteStream = process.stderr,
  ) {}

  /** Announces the next scenario. */
  begin(label: string): void {
    this.#scenario++;
    this.#last = performance.now();
    this.out.write(`[bench ${this.#scenario}/${this.total} ${this.#elapsed()}] ${label}\n`);
  }

  /** Reports how far the current scenario is, at most every 2 s. */
  tick(done: number, of: number, unit = 'steps'): void {
    const now = performance.now();
    if (now - this.#last < 2000) return;
    this.#last = now;
    this.out.write(`    ${done}/${of} ${unit} (${Math.round((done / of) * 100)}%)\n`);
  }

  note(text: string): void {
    this.out.write(`    ${text}\n`);
  }

  #elapsed(): string {
    const s = Math.round((performance.now() - this.#start) / 1000);
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  }
}
