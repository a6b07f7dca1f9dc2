/** The report's section on read costs against history length (bench/history.ts). */
import type { HistoryOp, HistoryResult } from './history.js';
import { table, int, ms } from './stats.js';

const OPS: HistoryOp[] = ['open', 'restore newest', 'restore middle', 'list newest 10'];

/** The section: targets, then every (store, history, operation) with its time and requests. */
export function historySection(results: HistoryResult[]): string[] {
  if (results.length === 0) return [];
  const out: string[] = [];
  const at = (store: string, history: number, op: HistoryOp): HistoryResult | undefined =>
    results.find((r) => r.store === store && r.history === history && r.op === op);
  const stores = [...new Set(results.map((r) => r.store))];
  out.push('## Reading a stream against the length of its history');
  out.push('');
  out.push(
    "Streams of 100 to 100,000 checkpoints written by an engine with the default policy (a base every 32), copied into each store. `open`: `SnapshotEngine.open` (it claims the stream with a fence and restores the newest checkpoint), then `close`; restore newest: `restore(store, stream)`; restore middle: `restore(store, stream, { seq })` at half the history; list newest 10: `listCheckpoints(store, stream, { limit: 10, reverse: true })`. Milliseconds p50 / p99 over the runs; requests are those of one run, counted by a wrapper around the store: `list` calls with the keys they returned (on S3 one call pages by 1,000 keys), GETs, conditional PUTs. The file store's LIST reads a directory, so its keys listed cost time even though no request crosses a network.",
  );
  out.push('');
  // Targets.
  const verdicts: string[][] = [];
  for (const store of stores) {
    const histories = [...new Set(results.filter((r) => r.store === store).map((r) => r.history))].sort(
      (a, b) => a - b,
    );
    const small = histories[0]!;
    const large = histories[histories.length - 1]!;
    if (large === small) continue;
    const pair = (h: number): number =>
      (at(store, h, 'open')?.latency.p50 ?? NaN) + (at(store, h, 'restore newest')?.latency.p50 ?? NaN);
    const ratio = pair(large) / pair(small);
    const keys =
      (at(store, large, 'open')?.requests.keysListed ?? 0) +
      (at(store, large, 'restore newest')?.requests.keysListed ?? 0);
    verdicts.push([
      `open + restore newest at ${int(large)} checkpoints ≤ 3 × at ${int(small)}, ≤ ~1,000 keys listed (${store})`,
      `${ms(pair(large))} ms against ${ms(pair(small))} ms (${ratio.toFixed(2)}×); ${int(keys)} keys listed`,
      ratio <= 3 && keys <= 1000 ? 'yes' : '**no**',
    ]);
    const list = at(store, large, 'list newest 10');
    const listSmall = at(store, small, 'list newest 10');
    if (list && listSmall) {
      const n = (r: HistoryResult): number => r.requests.lists + r.requests.gets;
      verdicts.push([
        `listCheckpoints({ limit: 10, reverse: true }) at ${int(large)} checkpoints in a handful of requests: its 10 GETs and a few lists, no more than at ${int(small)} (${store})`,
        `${list.requests.lists} list calls (${int(list.requests.keysListed)} keys) + ${list.requests.gets} GET, ${ms(list.latency.p50)} ms; at ${int(small)}: ${listSmall.requests.lists} + ${listSmall.requests.gets}`,
        n(list) <= n(listSmall) + 2 && n(list) <= 20 && list.requests.keysListed <= 1000 ? 'yes' : '**no**',
      ]);
    }
  }
  if (verdicts.length > 0) {
    out.push(table(['target', 'this run', 'met'], verdicts));
    out.push('');
  }
  const rows: string[][] = [];
  for (const store of stores)
    for (const history of [...new Set(results.filter((r) => r.store === store).map((r) => r.history))].sort(
      (a, b) => a - b,
    ))
      for (const op of OPS) {
        const r = at(store, history, op);
        if (!r) continue;
        const base = results.find((x) => x.store === store && x.op === op);
        rows.push([
          store,
          int(history),
          op,
          `${ms(r.latency.p50)} / ${ms(r.latency.p99)}`,
          base && base !== r ? `${(r.latency.p50 / base.latency.p50).toFixed(2)}×` : '1×',
          `${r.requests.lists} (${int(r.requests.keysListed)} keys)`,
          int(r.requests.gets),
          int(r.requests.writes),
        ]);
      }
  out.push(
    table(
      [
        'store',
        'checkpoints',
        'operation',
        'ms p50 / p99',
        'p50 vs the shortest history',
        'list calls (keys)',
        'GET',
        'PUT',
      ],
      rows,
    ),
  );
  out.push('');
  return out;
}
