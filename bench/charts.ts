/** Charts: Vega-Lite specs compiled and rendered to SVG by vega, in Node, without a browser. */
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

/** Renders a Vega-Lite spec to an SVG string. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const compiled = compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

const BASE = {
  width: 560,
  height: 320,
  background: 'white',
  config: { font: 'sans-serif', legend: { labelLimit: 400, orient: 'bottom', columns: 1 } },
} as const;

/** A line chart with points, in the house style, over `rows`. */
function lineChart(rows: object[], title: string, encoding: Record<string, unknown>): TopLevelSpec {
  return { ...BASE, title, data: { values: rows }, mark: { type: 'line', point: true }, encoding } as TopLevelSpec;
}

/** Bytes written per agent-hour against the checkpoint interval, one line per strategy (log y). */
export function bytesPerHourChart(
  rows: { interval: string; order: number; strategy: string; bytesPerHour: number; source: string }[],
  title: string,
): TopLevelSpec {
  return lineChart(rows, title, {
    x: { field: 'interval', type: 'ordinal', sort: { field: 'order' }, title: 'checkpoint interval' },
    y: {
      field: 'bytesPerHour',
      type: 'quantitative',
      scale: { type: 'log' },
      title: 'bytes written per agent-hour',
      axis: { format: '~s' },
    },
    color: { field: 'strategy', type: 'nominal', title: null },
    strokeDash: { field: 'source', type: 'nominal', title: null },
  });
}

/** Stall (checkpoint() call duration) against state size, p50 and p99 per strategy (log-log). */
export function stallChart(
  rows: { size: number; strategy: string; stat: string; ms: number }[],
  title: string,
): TopLevelSpec {
  return lineChart(rows, title, {
    x: {
      field: 'size',
      type: 'quantitative',
      scale: { type: 'log' },
      title: 'state size (msgpack bytes)',
      axis: { format: '~s' },
    },
    y: { field: 'ms', type: 'quantitative', scale: { type: 'log' }, title: 'checkpoint() call, ms' },
    color: { field: 'strategy', type: 'nominal', title: null },
    strokeDash: { field: 'stat', type: 'nominal', title: 'percentile' },
  });
}

/** Restore time against delta-chain length, per state size and store (log-log). */
export function restoreChart(rows: { chain: number; series: string; ms: number }[], title: string): TopLevelSpec {
  return lineChart(rows, title, {
    x: { field: 'chain', type: 'quantitative', scale: { type: 'log' }, title: 'deltas folded onto the base' },
    y: { field: 'ms', type: 'quantitative', scale: { type: 'log' }, title: 'restore, median ms' },
    color: { field: 'series', type: 'nominal', title: null },
  });
}
