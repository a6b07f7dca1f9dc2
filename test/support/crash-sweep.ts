import { expect } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  findIndexed,
  listCheckpoints,
  restore,
  type Encryption,
  type Store,
} from 'statefold';
import { FaultStore } from 'statefold/testing';
import { Rng, type Mode } from './random-states.js';
import {
  Mismatch,
  expectCode,
  expectHistory,
  expectLatestOneOf,
  expectSame,
  live,
  type Captured,
  type Life,
  type LifeOptions,
} from './lives.js';

/**
 * Crash-point sweep. A seeded agent run (a clean prefix of checkpoints, then "life 1") is first
 * run without faults to count life 1's store operations; then, for every operation index i of
 * life 1 and both crash kinds (nothing from i on reaches the store / operation i lands and then
 * the process dies), the run is repeated on a fresh MemoryStore with a crash at i. After the
 * crash the stream must restore to exactly the last acknowledged checkpoint or the one in
 * flight, never anything else. Then life 2 opens a new engine (which must fence and resume from
 * that same state) and crashes again at a random operation, life 3 runs clean, and every
 * retained seq must restore to the state captured for it. Last, life 1's engine comes back as a
 * zombie (its store reachable again) and must be FENCED without changing anything. The second
 * half repeats all of it with retention on, so crashes also cut the background gc short; later
 * blocks encrypt, and write span deltas (longer chains, so that restores jump over deltas).
 * A failure names the seed, plan and crash point; every case is deterministic.
 *
 * The blocks are split over two test files (crash-sweep.test.ts: plain plans;
 * crash-sweep-variants.test.ts: retention, encryption, span deltas), so that a runner with two
 * workers runs the halves side by side.
 */

export const STREAM = 'agent/crash sweep';
/** Seeds per test: one `it` sweeps this many plans. */
export const SEEDS_PER_BLOCK = 12;
/** The keys of the encrypted sweep: life 2 rotates to k2, so crashes also meet a rotation base. */
const KEY_1 = new Uint8Array(32).fill(1);
const KEY_2 = new Uint8Array(32).fill(2);

interface Plan {
  seed: number;
  mode: Mode;
  baseEvery: number;
  prefix: number;
  life1: number;
  /** Retention's keepLast (the engine's gc then deletes in the background after each base). */
  keepLast: number | undefined;
  /** Every life encrypts; life 2 on rotates from key k1 to k2. */
  encrypted: boolean;
  /** The policy's spanEvery, when the plan writes span deltas. */
  spanEvery: number | undefined;
}

function planOf(seed: number, retention: boolean, encrypted = false, spans = false): Plan {
  const r = new Rng(seed * 7919 + 1);
  return {
    seed,
    mode: seed % 2 === 0 ? 'copy' : 'immutable',
    // With spans, chains long enough for a restore to jump over deltas, and life 1 crossing span positions.
    baseEvery: spans ? r.pick([7, 9, 12]) : r.pick([4, 4, 4, 1, 2, 3]),
    prefix: r.pick([0, 0, 1, 2, 3, 5, 7, 9]),
    life1: 5 + r.int(6),
    keepLast: retention ? 1 + r.int(4) : undefined,
    encrypted,
    spanEvery: spans ? r.pick([2, 3, 4]) : undefined,
  };
}

/** The encryption of life `life` (undefined when the plan does not encrypt): k1, then k2 from life 2 on. */
function encryptionOf(p: Plan, life: number): Encryption | undefined {
  if (!p.encrypted) return undefined;
  return { keys: { k1: KEY_1, k2: KEY_2 }, current: life >= 2 ? 'k2' : 'k1' };
}

/** What the checks read with: every key the plan's lives may have used. */
function readWith(p: Plan): { encryption?: Encryption } {
  return p.encrypted ? { encryption: encryptionOf(p, 2)! } : {};
}

/**
 * The index of every unencrypted plan's engines: the life, then the checkpoint's number in it,
 * which never decrease along the stream (fillers and re-opens carry the meta before them).
 */
function sweepIndex(meta: unknown): string | undefined {
  const m = meta as { life?: unknown; k?: unknown } | undefined;
  return typeof m?.life === 'string' && typeof m.k === 'number'
    ? `${m.life}/${String(m.k).padStart(6, '0')}`
    : undefined;
}

/**
 * Every retained checkpoint's key looked up through the index: the first retained seq whose key
 * reaches it, or no answer (a crash lost an object, the caller would search); never another seq.
 */
async function expectIndexed(store: Store, what: string): Promise<void> {
  const listed = (await listCheckpoints(store, STREAM)).flatMap((e) => (e.damaged ? [] : [e]));
  for (const entry of listed) {
    const key = sweepIndex(entry.meta);
    if (key === undefined) continue;
    const want = listed.find((e) => (sweepIndex(e.meta) ?? '') >= key)!.seq;
    const found = await findIndexed(store, STREAM, { key, index: sweepIndex, select: (e) => [e[0]!.seq] });
    if (found !== undefined && found.restored[0]?.seq !== want)
      throw new Mismatch(`${what}: the index found seq ${found.restored[0]?.seq} for key ${key}, not seq ${want}`);
    if (found !== undefined) tally.indexed++;
  }
}

function lifeOptions(p: Plan, life: number, checkpoints: number, salt = 0): LifeOptions {
  const o: LifeOptions = {
    stream: STREAM,
    mode: p.mode,
    baseEvery: p.baseEvery,
    checkpoints,
    rng: new Rng(p.seed * 1_000_003 + life * 7_777 + salt),
    label: `life ${life}`,
  };
  // No reader grace: gc deletes at once, so crashes and zombies meet deleted history.
  if (p.keepLast !== undefined) o.retention = { keepLast: p.keepLast, minAgeMs: 0 };
  const encryption = encryptionOf(p, life);
  if (encryption !== undefined) o.encryption = encryption;
  else o.index = sweepIndex;
  if (p.spanEvery !== undefined) {
    o.spanEvery = p.spanEvery;
    // Chains as long as baseEvery: the random states' deltas soon outgrow their small bases.
    o.maxDeltaRatio = Infinity;
  }
  return o;
}

/** What the sweeps of this file (one test file, one module instance) saw, for the checks and the summary. */
export const tally = {
  cases: 0,
  restoredAcked: 0,
  restoredInflight: 0,
  restoredNone: 0,
  secondCrashes: 0,
  zombies: 0,
  spanDeltas: 0,
  /** Lookups the index answered (each checked against the listing). */
  indexed: 0,
};

/**
 * Runs one life on `store` (usually a FaultStore over `inner`), checks what it saw on open and
 * what survives it, records landed checkpoints in `bySeq`, and returns the newest committed seq.
 */
async function checkedLife(
  store: Store,
  inner: Store,
  latest: number,
  bySeq: Map<number, Captured>,
  o: LifeOptions,
  expectClean: boolean,
): Promise<LifeResult> {
  const result = await checkedLifeOnly(store, inner, latest, bySeq, o, expectClean);
  // With retention, a gc cut short by the crash must still leave every listed seq restorable.
  if (o.retention)
    await expectHistory(
      inner,
      STREAM,
      bySeq,
      result.latest,
      `${o.label}: history after it ended`,
      o.retention.keepLast,
      readAll(o),
    );
  return result;
}

interface LifeResult {
  latest: number;
  inflightLanded: boolean;
  engine: Life['engine'];
}

async function checkedLifeOnly(
  store: Store,
  inner: Store,
  latest: number,
  bySeq: Map<number, Captured>,
  o: LifeOptions,
  expectClean: boolean,
): Promise<LifeResult> {
  const what = o.label;
  const life = await live(store, o);
  if (life.opened) {
    if (life.openSeq !== latest)
      throw new Mismatch(`${what}: opened at seq ${life.openSeq}, the newest committed is ${latest}`);
    expectSame(life.openState, latest === 0 ? undefined : bySeq.get(latest)!.state, `${what}: engine.state after open`);
  }
  if (life.error !== undefined) {
    if (expectClean) throw new Mismatch(`${what}: failed without a fault: ${String(life.error)}`);
    expectCode(life.error, ['STORAGE'], `${what}: the crash`);
  }
  let seq = latest;
  for (const a of life.acked) {
    if (a.seq !== seq + 1) throw new Mismatch(`${what}: acknowledged seq ${a.seq} after ${seq}`);
    seq = a.seq;
    bySeq.set(seq, a);
  }
  const allowed = new Map<number, Captured>();
  if (seq > 0) allowed.set(seq, bySeq.get(seq)!);
  if (life.inflight) allowed.set(seq + 1, life.inflight);
  const got = await expectLatestOneOf(inner, STREAM, allowed, seq === 0, `${what}: after it ended`, readAll(o));
  const inflightLanded = life.inflight !== undefined && got === seq + 1;
  if (inflightLanded) bySeq.set(got, life.inflight!);
  return { latest: got, inflightLanded, engine: life.engine };
}

/** One case: prefix, life 1 crashing at `crash`, life 2 crashing at a random point, life 3 clean, full history check. */
async function runCase(p: Plan, crash: number, landed: boolean): Promise<void> {
  const inner = new MemoryStore();
  const bySeq = new Map<number, Captured>();
  let latest = 0;
  if (p.prefix > 0) latest = (await checkedLife(inner, inner, latest, bySeq, lifeOptions(p, 0, p.prefix), true)).latest;

  const f1 = new FaultStore(inner, { log: false }).crashAt(crash, { landed });
  const l1 = await checkedLife(f1, inner, latest, bySeq, lifeOptions(p, 1, p.life1), false);
  latest = l1.latest;
  if (l1.inflightLanded) tally.restoredInflight++;
  else if (latest === 0) tally.restoredNone++;
  else tally.restoredAcked++;

  // Life 2 crashes again somewhere (often during its open, leaving a fence behind), or not at all.
  const r = new Rng(p.seed * 31 + crash * 2 + (landed ? 1 : 0));
  const second = r.int(24);
  const f2 = new FaultStore(inner, { log: false }).crashAt(second, { landed: r.chance(0.5) });
  latest = (await checkedLife(f2, inner, latest, bySeq, lifeOptions(p, 2, 4, crash), false)).latest;
  if (f2.crashed) tally.secondCrashes++;

  latest = (await checkedLife(inner, inner, latest, bySeq, lifeOptions(p, 3, 3, crash), true)).latest;
  await expectHistory(inner, STREAM, bySeq, latest, 'after life 3', p.keepLast, readWith(p));
  if (p.encrypted) await expectAllSealed(inner);
  else await expectIndexed(inner, 'after life 3');

  // Life 1's engine comes back as a zombie (a partition heals): lives 2 and 3 fenced it.
  if (l1.engine !== undefined && f1.crashed) {
    f1.heal();
    tally.zombies++;
    const zombie = await l1.engine.checkpoint({ zombie: true }).then(
      (info) => `resolved seq ${info.seq}`,
      (err: unknown) => err,
    );
    // A life 1 that got as far as close() (the crash hit its final gc) is closed: CLOSED says so.
    expectCode(zombie, ['FENCED', 'CLOSED'], 'life 1 back as a zombie after lives 2 and 3');
    await expectHistory(inner, STREAM, bySeq, latest, 'after the zombie', p.keepLast, readWith(p));
  }
}

/** What a check after a life reads with: both keys when it encrypted (earlier lives used k1). */
function readAll(o: LifeOptions): { encryption?: Encryption } {
  return o.encryption ? { encryption: { keys: { k1: KEY_1, k2: KEY_2 }, current: 'k2' } } : {};
}

/** Every checkpoint stored (fillers written by claims after crashes included) is sealed: format version 3 (4 for a span delta), flag 1. */
async function expectAllSealed(store: Store): Promise<void> {
  for (const key of await store.list('')) {
    const bytes = Buffer.from((await store.get(key))!);
    // Only frames of checkpoints: not floors, hints or markers, and not fences (never sealed).
    if (bytes.byteLength < 20 || bytes.toString('latin1', 0, 4) !== 'SFLD' || bytes[5] === 3) continue;
    if ((bytes[4] !== 3 && bytes[4] !== 4) || (bytes[7]! & 1) !== 1)
      throw new Mismatch(
        `${key}: a checkpoint in an encrypted stream is not sealed (version ${bytes[4]}, flags ${bytes[7]})`,
      );
  }
}

/** Counts life 1's store operations in a run without faults. */
async function operationsOfLife1(p: Plan): Promise<number> {
  const inner = new MemoryStore();
  const bySeq = new Map<number, Captured>();
  let latest = 0;
  if (p.prefix > 0) latest = (await checkedLife(inner, inner, latest, bySeq, lifeOptions(p, 0, p.prefix), true)).latest;
  const counter = new FaultStore(inner, { log: false });
  await checkedLife(counter, inner, latest, bySeq, lifeOptions(p, 1, p.life1), true);
  if (p.spanEvery !== undefined) tally.spanDeltas += await countSpanDeltas(inner);
  return counter.count;
}

/** Span deltas stored: frames of format version 4. */
async function countSpanDeltas(store: Store): Promise<number> {
  let n = 0;
  for (const key of await store.list('')) {
    const bytes = (await store.get(key))!;
    if (bytes.byteLength >= 20 && Buffer.from(bytes).toString('latin1', 0, 4) === 'SFLD' && bytes[4] === 4) n++;
  }
  return n;
}

export async function sweepBlock(
  seeds: number[],
  retention: boolean,
  encrypted = false,
  spans = false,
): Promise<string[]> {
  const failures: string[] = [];
  for (const seed of seeds) {
    const p = planOf(seed, retention, encrypted, spans);
    const n = await operationsOfLife1(p);
    for (let crash = 0; crash <= n; crash++) {
      for (const landed of [false, true]) {
        tally.cases++;
        try {
          await runCase(p, crash, landed);
        } catch (err) {
          const why = err instanceof Mismatch ? err.message : `unexpected ${String((err as Error)?.stack ?? err)}`;
          const retained =
            (p.keepLast === undefined ? '' : `, retention keepLast ${p.keepLast}`) +
            (p.encrypted ? ', encrypted' : '') +
            (p.spanEvery === undefined ? '' : `, spanEvery ${p.spanEvery}`);
          failures.push(
            `seed ${seed} (${p.mode}, baseEvery ${p.baseEvery}${retained}, prefix ${p.prefix}, life 1 of ${p.life1} checkpoints = ${n} operations) crash at operation ${crash}${landed ? ' after it landed' : ''}: ${why}`,
          );
        }
      }
    }
  }
  return failures;
}

/** The one-line summary each test file prints after its sweeps. */
export function reportTally(which: string): void {
  console.log(
    `crash sweep (${which}): ${tally.cases} cases; after the first crash the stream held the last acknowledged checkpoint ${tally.restoredAcked}x, the one in flight ${tally.restoredInflight}x, nothing ${tally.restoredNone}x; ${tally.secondCrashes} second crashes; ${tally.zombies} zombies; ${tally.spanDeltas} span deltas in the clean runs of span plans; ${tally.indexed} lookups answered by the index`,
  );
}
