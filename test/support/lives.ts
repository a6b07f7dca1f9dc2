/**
 * "Lives" of an agent for the crash tests: open an engine on a store, checkpoint seeded random
 * states one at a time, stop at the first failure (a crash), and remember what was acknowledged,
 * what was in flight, and a full copy of every state for the reference.
 */
import {
  SnapshotEngine,
  StatefoldError,
  listCheckpoints,
  restore,
  type Encryption,
  type Retention,
  type Store,
} from 'statefold';
import { Rng, deepCopy, evolve, initialState, type Mode } from './random-states.js';
import { firstDifference } from './same.js';

/** A checkpoint as the agent captured it. */
export interface Captured {
  state: unknown;
  meta: unknown;
}

/** What one life did. */
export interface Life {
  /** Whether open resolved. */
  opened: boolean;
  /** engine.seq and a copy of engine.state right after open. */
  openSeq: number;
  openState: unknown;
  /** Checkpoints whose promise resolved, in order, with their seq. */
  acked: (Captured & { seq: number })[];
  /** The checkpoint whose promise rejected (the life ends there), if any. */
  inflight: Captured | undefined;
  /** Why the life ended early (open or checkpoint rejected). */
  error: unknown;
  /** The engine, when open resolved (closed when the life ended well). */
  engine: SnapshotEngine<Record<string, unknown>> | undefined;
}

/** Options of `live`. */
export interface LifeOptions {
  stream: string;
  mode: Mode;
  baseEvery: number;
  /** The policy's spanEvery (span deltas) and maxDeltaRatio, when set. */
  spanEvery?: number;
  maxDeltaRatio?: number;
  /** How many checkpoints to take (the life ends earlier at the first failure). */
  checkpoints: number;
  rng: Rng;
  /** Names the life in meta (`{ life: label, k, tag }`) and in messages. */
  label: string;
  /** The engine's retention (its gc runs in the background after each base). */
  retention?: Retention;
  /** The engine's encryption. */
  encryption?: Encryption;
  /** The engine's index (EngineOptions.index). */
  index?: (meta: unknown) => string | undefined;
}

/** What the checks read a stream with: the keys of an encrypted one. */
export interface ReadWith {
  encryption?: Encryption;
}

/** Opens an engine and checkpoints until done or until something fails. Never throws. */
export async function live(store: Store, o: LifeOptions): Promise<Life> {
  const life: Life = {
    opened: false,
    openSeq: 0,
    openState: undefined,
    acked: [],
    inflight: undefined,
    error: undefined,
    engine: undefined,
  };
  let engine: SnapshotEngine<Record<string, unknown>>;
  try {
    engine = await SnapshotEngine.open<Record<string, unknown>>({
      store,
      stream: o.stream,
      policy: {
        baseEvery: o.baseEvery,
        ...(o.spanEvery !== undefined && { spanEvery: o.spanEvery }),
        ...(o.maxDeltaRatio !== undefined && { maxDeltaRatio: o.maxDeltaRatio }),
      },
      updates: o.mode,
      retention: o.retention,
      ...(o.encryption && { encryption: o.encryption }),
      ...(o.index && { index: o.index }),
    });
  } catch (err) {
    life.error = err;
    return life;
  }
  life.opened = true;
  life.engine = engine;
  life.openSeq = engine.seq;
  life.openState = deepCopy(engine.state);
  let state = engine.state ?? initialState(o.rng);
  for (let k = 1; k <= o.checkpoints; k++) {
    state = evolve(state, o.rng, o.mode);
    const meta = { life: o.label, k, tag: o.rng.int(1000) };
    const promise = engine.checkpoint(state, { meta });
    // The capture is synchronous: this copy is exactly what the checkpoint holds.
    const captured = { state: deepCopy(state), meta };
    try {
      const info = await promise;
      life.acked.push({ ...captured, seq: info.seq });
    } catch (err) {
      life.inflight = captured;
      life.error = err;
      return life;
    }
  }
  // A life that ends well closes its engine, which waits for a background gc to finish.
  try {
    await engine.close();
  } catch (err) {
    life.error = err;
  }
  return life;
}

/** Thrown by the checks below; the message says what differs. */
export class Mismatch extends Error {}

/** Throws Mismatch unless `err` is a StatefoldError with one of `codes`. */
export function expectCode(err: unknown, codes: readonly string[], what: string): void {
  if (!(err instanceof StatefoldError) || !codes.includes(err.code)) {
    throw new Mismatch(
      `${what}: expected ${codes.join(' or ')}, got ${err instanceof StatefoldError ? err.code : String(err)}: ${(err as Error)?.message ?? ''}`,
    );
  }
}

/** Throws Mismatch when `actual` and `expected` differ (strict structural equality). */
export function expectSame(actual: unknown, expected: unknown, what: string): void {
  const d = firstDifference(actual, expected);
  if (d !== undefined) throw new Mismatch(`${what}: ${d}`);
}

/**
 * Restores the newest checkpoint and checks it is one of `allowed` (seq -> captured), or, when
 * `noneAllowed`, that the stream has none. Returns the seq restored (0 for none).
 */
export async function expectLatestOneOf(
  store: Store,
  stream: string,
  allowed: Map<number, Captured>,
  noneAllowed: boolean,
  what: string,
  read: ReadWith = {},
): Promise<number> {
  let restored;
  try {
    restored = await restore(store, stream, read);
  } catch (err) {
    expectCode(err, ['NOT_FOUND'], `${what}: restore`);
    if (!noneAllowed)
      throw new Mismatch(`${what}: restore found no checkpoint, expected seq ${[...allowed.keys()].join(' or ')}`);
    return 0;
  }
  const want = allowed.get(restored.seq);
  if (want === undefined)
    throw new Mismatch(
      `${what}: restored seq ${restored.seq}, expected ${allowed.size ? [...allowed.keys()].join(' or ') : 'no checkpoint'}`,
    );
  expectSame(restored.state, want.state, `${what}: state of seq ${restored.seq}`);
  expectSame(restored.meta, want.meta, `${what}: meta of seq ${restored.seq}`);
  return restored.seq;
}

/**
 * Checks the retained history: seqs oldest..latest without a gap (oldest 1 unless `keepLast` is
 * given, else at least the newest `keepLast` kept), and every listed seq restoring to its reference.
 */
export async function expectHistory(
  store: Store,
  stream: string,
  bySeq: Map<number, Captured>,
  latest: number,
  what: string,
  keepLast?: number,
  read: ReadWith = {},
): Promise<void> {
  const listed = await listCheckpoints(store, stream, read);
  const seqs = listed.map((c) => c.seq);
  const oldest = seqs[0] ?? latest + 1;
  const contiguous = seqs.every((s, i) => s === oldest + i) && seqs[seqs.length - 1] === latest;
  if (latest > 0 && !contiguous)
    throw new Mismatch(`${what}: listed seqs [${seqs.join(',')}], expected ..${latest} without gaps`);
  if (keepLast === undefined ? oldest !== 1 && latest > 0 : oldest > Math.max(1, latest - keepLast + 1)) {
    throw new Mismatch(
      `${what}: listed seqs [${seqs.join(',')}] lack seqs that must be kept (latest ${latest}, keepLast ${keepLast ?? 'all'})`,
    );
  }
  for (const entry of listed) {
    const ref = bySeq.get(entry.seq);
    if (ref === undefined) throw new Mismatch(`${what}: seq ${entry.seq} has no reference`);
    if (entry.damaged) throw new Mismatch(`${what}: seq ${entry.seq} is listed as damaged: ${entry.error.message}`);
    expectSame(entry.meta, ref.meta, `${what}: listed meta of seq ${entry.seq}`);
    let r;
    try {
      r = await restore(store, stream, { ...read, seq: entry.seq });
    } catch (err) {
      throw new Mismatch(
        `${what}: listed seqs [${seqs[0]}..${latest}], but seq ${entry.seq} does not restore: ${(err as StatefoldError).code} ${(err as Error).message}`,
      );
    }
    if (r.seq !== entry.seq) throw new Mismatch(`${what}: restore of seq ${entry.seq} gave seq ${r.seq}`);
    expectSame(r.state, ref.state, `${what}: state of seq ${entry.seq}`);
    expectSame(r.meta, ref.meta, `${what}: meta of seq ${entry.seq}`);
  }
}
