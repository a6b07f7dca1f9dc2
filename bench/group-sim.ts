/**
 * What S3 group commit (docs/design/group-commit.md, not built) would cost in requests, counted by
 * a discrete-event simulation of its write path for the runs issue 31 names: N engines opened on
 * one store instance (one group), then rounds in which every engine checkpoints and all wait; and a
 * steady state of N agents checkpointing every 2 s. Nothing is stored: the simulation counts the
 * requests the design's write path would make, on a virtual clock, with
 * - one JavaScript thread: each open and each checkpoint costs the CPU measured for today's engine
 *   on a MemoryStore (calibrated first, below; an upper bound, since today's open also claims the
 *   stream with a fence of its own, which a group does not write);
 * - every request taking `latency` ms (RGW on loopback, S3 Standard), one segment in flight;
 * - the second draft's rules (docs/design/group-commit.md, sections 1.3, 2.1, 4.1, 5.6): once per
 *   store instance the store's condition probe (two PUTs), the prefix mode (a GET, a LIST and its
 *   create), the group's first index object, and the directory read (a LIST, 16 snapshot GETs);
 *   directory appends on their own cadence (when opens stop arriving for one window, or when the
 *   oldest pending claim has waited `dirEvery` ms, never sooner than `dirEvery` after the previous
 *   append; one in flight); a segment per window while checkpoints wait (the first of an idle group
 *   at once); a merged-row index object every 8 segments and a full index (a shard per ~1,000
 *   streams and a head) every 10 of those; on close, a final merged-row object.
 * Each open and checkpoint is a CPU event of its own, between which the window timer may fire: a
 * burst becomes a trickle of segments. In Node a burst queued at once (Promise.all of checkpoints,
 * each encode queued with setImmediate) runs in one check phase and no timer fires inside it, so
 * the counts of the rounds runs are an upper bound (group-commit-review-2.md, finding 10); the
 * steady state, agents on timers, is a true trickle.
 * PUT-class requests are PUTs and LISTs (AWS bills LIST as PUT); GETs are counted apart. The
 * held-out budgets are totals: 1,000 engines and 10,000 checkpoints <= 500 PUT-class; 10,000
 * engines <= 50 with 10,000 checkpoints, <= 500 with 100,000.
 *
 *   node bench/start.mjs bench/group-sim.ts [--latency 30,80] [--dir-every 500] [--state-bytes 1024]
 *     [--merge-every 8] [--full-every 10]
 */
import { parseArgs } from 'node:util';
import { MemoryStore, SnapshotEngine } from 'statefold';

const { values } = parseArgs({
  options: {
    latency: { type: 'string', default: '30,80' },
    'dir-every': { type: 'string', default: '500' },
    'state-bytes': { type: 'string', default: '1024' },
    window: { type: 'string', default: '100' },
    'merge-every': { type: 'string', default: '8' },
    'full-every': { type: 'string', default: '10' },
  },
});
const latencies = values.latency.split(',').map(Number);
const dirEveries = values['dir-every'].split(',').map(Number);
const stateBytes = Number(values['state-bytes']);
const windowMs = Number(values.window);

/** Segments per merged-row index object, and merged-row objects per full sharded index (16 shards + head). */
const MERGE_EVERY = Number(values['merge-every']);
const FULL_EVERY = Number(values['full-every']);

/** PUTs of a full index at `streams` streams: its shards (~1,000 entries of ~130 bytes in each, a power of two), and the head. */
function fullIndexPuts(streams: number): number {
  let shards = 1;
  while (shards * 1000 < streams) shards *= 2;
  return shards + 1;
}

// ---- Calibration: CPU per open and per checkpoint of today's engine, on a MemoryStore. ----

function stateOf(i: number, step: number): unknown {
  const note = 'x'.repeat(Math.max(0, stateBytes - 120));
  return { agent: i, step, messages: [{ role: 'user', content: `step ${step}` }], note };
}

async function calibrate(n: number): Promise<{ open: number; checkpoint: number }> {
  const store = new MemoryStore();
  let t0 = performance.now();
  const engines = await Promise.all(
    Array.from({ length: n }, (_, i) => SnapshotEngine.open({ store, stream: `calibrate/${i}` })),
  );
  const open = (performance.now() - t0) / n;
  t0 = performance.now();
  await Promise.all(engines.map((e, i) => e.checkpoint(stateOf(i, 1))));
  await Promise.all(engines.map((e, i) => e.checkpoint(stateOf(i, 2))));
  const checkpoint = (performance.now() - t0) / (2 * n);
  await Promise.all(engines.map((e) => e.close()));
  return { open, checkpoint };
}

// ---- The simulation. ----

interface Params {
  engines: number;
  /** Checkpoints per engine: rounds (all checkpoint, all wait), or undefined for the steady state. */
  rounds?: number;
  /** Steady state: each agent checkpoints every `everyMs`, for `forMs`. */
  everyMs?: number;
  forMs?: number;
  latency: number;
  dirEvery: number;
  cpuOpen: number;
  cpuCheckpoint: number;
}

interface Counts {
  put: number;
  list: number;
  get: number;
  segments: number;
  dirAppends: number;
  indexPuts: number;
  checkpoints: number;
  /** Virtual ms from the first open to the last acknowledgement. */
  ms: number;
  /** Commit latency (checkpoint encoded to acknowledged), p50 and p99, ms. */
  p50: number;
  p99: number;
}

/** Events on a virtual clock, in time order (ties in the order they were scheduled): a binary heap. */
class Clock {
  now = 0;
  #heap: { at: number; seq: number; fn: () => void }[] = [];
  #seq = 0;
  at(at: number, fn: () => void): void {
    const h = this.#heap;
    h.push({ at: Math.max(at, this.now), seq: this.#seq++, fn });
    for (let i = h.length - 1; i > 0;) {
      const up = (i - 1) >> 1;
      if (!this.#before(h[i]!, h[up]!)) break;
      [h[i], h[up]] = [h[up]!, h[i]!];
      i = up;
    }
  }
  run(): void {
    const h = this.#heap;
    while (h.length > 0) {
      const top = h[0]!;
      const end = h.pop()!;
      if (h.length > 0) {
        h[0] = end;
        for (let i = 0; ;) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < h.length && this.#before(h[l]!, h[m]!)) m = l;
          if (r < h.length && this.#before(h[r]!, h[m]!)) m = r;
          if (m === i) break;
          [h[i], h[m]] = [h[m]!, h[i]!];
          i = m;
        }
      }
      this.now = top.at;
      top.fn();
    }
  }
  #before(a: { at: number; seq: number }, b: { at: number; seq: number }): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
}

function simulate(p: Params): Counts {
  const clock = new Clock();
  const c: Counts = {
    put: 0,
    list: 0,
    get: 0,
    segments: 0,
    dirAppends: 0,
    indexPuts: 0,
    checkpoints: 0,
    ms: 0,
    p50: 0,
    p99: 0,
  };
  const latencies: number[] = [];
  // One JavaScript thread: CPU work runs one task after the other.
  let cpuFree = 0;
  const cpu = (cost: number, then: () => void): void => {
    cpuFree = Math.max(cpuFree, clock.now) + cost;
    clock.at(cpuFree, then);
  };

  // Store instance: the prefix mode (one GET), then the directory read once (a LIST, 16 snapshot GETs).
  let dirAsked = false;
  let dirKnown = false;
  const dirWaiters: (() => void)[] = [];
  const whenDirectoryKnown = (then: () => void): void => {
    if (dirKnown) return then();
    dirWaiters.push(then);
    if (dirAsked) return;
    dirAsked = true;
    // The store's condition probe (two PUTs), the prefix mode (GET, LIST, create), the group's first index object.
    c.put += 2 + 1 + 1;
    c.list += 1;
    c.get += 1;
    clock.at(clock.now + p.latency, () => {
      c.list += 1; // _dir/
      c.get += 16; // snapshot shards
      clock.at(clock.now + 2 * p.latency, () => {
        dirKnown = true;
        for (const w of dirWaiters.splice(0)) w();
      });
    });
  };

  /** A deferral: `later(due, again)` is false once `due` has come; before, it arms one timer (at most) that calls `again`. */
  const deferral = (): ((due: number, again: () => void) => boolean) => {
    let armed = false;
    return (due, again) => {
      if (clock.now >= due) return false;
      if (!armed) {
        armed = true;
        clock.at(due, () => {
          armed = false;
          again();
        });
      }
      return true;
    };
  };

  // Directory appends, one in flight: when opens stop arriving for a window, or the oldest has waited dirEvery;
  // never sooner than dirEvery after the previous append started.
  let pending: { since: number; done: () => void }[] = [];
  let lastClaim = 0;
  let lastAppend = -Infinity;
  let appending = false;
  const appendLater = deferral();
  const maybeAppend = (): void => {
    if (appending || pending.length === 0) return;
    const due = Math.max(Math.min(lastClaim + windowMs, pending[0]!.since + p.dirEvery), lastAppend + p.dirEvery);
    if (appendLater(due, maybeAppend)) return;
    const batch = pending;
    pending = [];
    appending = true;
    lastAppend = clock.now;
    c.put += 1;
    c.dirAppends += 1;
    clock.at(clock.now + p.latency, () => {
      appending = false;
      for (const b of batch) b.done();
      maybeAppend();
    });
  };
  const claim = (done: () => void): void => {
    whenDirectoryKnown(() => {
      lastClaim = clock.now;
      pending.push({ since: clock.now, done });
      maybeAppend();
    });
  };

  // The group's segments: a window each, one in flight; index objects off the commit path.
  let queue: { at: number; ack: () => void }[] = [];
  let inFlight = false;
  let lastStart = -Infinity;
  const flushLater = deferral();
  let unindexed = 0;
  let merged = 0;
  const flush = (): void => {
    if (inFlight || queue.length === 0) return;
    if (flushLater(lastStart + windowMs, flush)) return;
    const batch = queue;
    queue = [];
    inFlight = true;
    lastStart = clock.now;
    c.put += 1;
    c.segments += 1;
    clock.at(clock.now + p.latency, () => {
      inFlight = false;
      for (const f of batch) {
        latencies.push(clock.now - f.at);
        f.ack();
      }
      if (++unindexed === MERGE_EVERY) {
        unindexed = 0;
        c.put += 1;
        c.indexPuts += 1;
        if (++merged === FULL_EVERY) {
          merged = 0;
          c.put += fullIndexPuts(p.engines);
          c.indexPuts += fullIndexPuts(p.engines);
        }
      }
      flush();
    });
  };
  const commit = (ack: () => void): void => {
    queue.push({ at: clock.now, ack });
    c.checkpoints += 1;
    flush();
  };

  let last = 0;
  const finish = (): void => {
    last = Math.max(last, clock.now);
  };
  if (p.rounds !== undefined) {
    // Rounds: all engines open at once; then every engine checkpoints and all wait, `rounds` times.
    let opened = 0;
    const round = (r: number): void => {
      if (r > p.rounds!) return finish();
      let acked = 0;
      for (let i = 0; i < p.engines; i++)
        cpu(p.cpuCheckpoint, () =>
          commit(() => {
            if (++acked === p.engines) round(r + 1);
          }),
        );
    };
    for (let i = 0; i < p.engines; i++)
      cpu(p.cpuOpen, () =>
        claim(() => {
          if (++opened === p.engines) round(1);
        }),
      );
  } else {
    // Steady state: agents open at once, then each checkpoints every everyMs (phases spread evenly).
    for (let i = 0; i < p.engines; i++)
      cpu(p.cpuOpen, () =>
        claim(() => {
          const phase = (i / p.engines) * p.everyMs!;
          for (let t = phase; t < p.forMs!; t += p.everyMs!)
            clock.at(clock.now + t, () => cpu(p.cpuCheckpoint, () => commit(finish)));
        }),
      );
  }
  clock.run();
  // close(): the final merged-row object, marked closed.
  c.put += 1;
  c.indexPuts += 1;
  c.ms = last;
  latencies.sort((a, b) => a - b);
  c.p50 = latencies[Math.floor(latencies.length / 2)] ?? 0;
  c.p99 = latencies[Math.floor(latencies.length * 0.99)] ?? 0;
  return c;
}

// ---- Runs. ----

const fmt = (n: number, d = 4): string => n.toFixed(d);
console.log(`calibrating today's engine on a MemoryStore (state ~${stateBytes} bytes) ...`);
const cal = await calibrate(2000);
console.log(`CPU per open ${cal.open.toFixed(3)} ms, per checkpoint ${cal.checkpoint.toFixed(3)} ms (wall / n)\n`);

/** AWS S3 Standard list prices, dollars per 1,000 requests: PUT, COPY, POST, LIST; GET. */
const PUT_PRICE = 0.005;
const GET_PRICE = 0.0004;

const runs: { name: string; engines: number; rounds?: number; everyMs?: number; forMs?: number; budget?: number }[] = [
  { name: '1,000 engines x 10 rounds (10,000 checkpoints)', engines: 1000, rounds: 10, budget: 500 },
  { name: '10,000 engines x 1 round (10,000 checkpoints)', engines: 10000, rounds: 1, budget: 50 },
  { name: '10,000 engines x 10 rounds (100,000 checkpoints)', engines: 10000, rounds: 10, budget: 500 },
  { name: '1,000 agents every 2 s, 60 s', engines: 1000, everyMs: 2000, forMs: 60000 },
  { name: '10,000 agents every 2 s, 60 s', engines: 10000, everyMs: 2000, forMs: 60000 },
];
console.log(
  '| run | latency ms | dir every ms | CPU x | PUT-class | per checkpoint | budget | segments | dir appends | index PUTs | GETs | virtual s | commit p50 / p99 ms | $ a day |',
);
console.log('| :-- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |');
for (const run of runs) {
  for (const latency of latencies) {
    for (const dirEvery of dirEveries) {
      // CPU at the calibrated cost, and at 3x it (a loaded machine, a larger state).
      for (const scale of [1, 3]) {
        const c = simulate({
          ...run,
          latency,
          dirEvery,
          cpuOpen: cal.open * scale,
          cpuCheckpoint: cal.checkpoint * scale,
        });
        const putClass = c.put + c.list;
        // Steady state only: the requests of the simulated span, scaled to a day.
        const perDay =
          run.forMs === undefined
            ? ''
            : (((putClass * PUT_PRICE + c.get * GET_PRICE) / 1000) * (86_400_000 / run.forMs)).toFixed(2);
        console.log(
          `| ${run.name} | ${latency} | ${dirEvery} | ${scale} | ${putClass} | ${fmt(putClass / c.checkpoints)} | ${run.budget === undefined ? '' : `${run.budget}${putClass <= run.budget ? '' : ' **over**'}`} | ${c.segments} | ${c.dirAppends} | ${c.indexPuts} | ${c.get} | ${(c.ms / 1000).toFixed(1)} | ${c.p50.toFixed(0)} / ${c.p99.toFixed(0)} | ${perDay} |`,
        );
      }
    }
  }
}
