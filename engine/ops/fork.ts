/**
 * forkStream: a new stream whose first checkpoint is the state of another stream at a seq, with
 * that checkpoint's meta and effect ledger, so that an agent resumed from the fork skips every
 * effect the original recorded (and stops at one it left pending) instead of repeating it.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertSeq, assertStore } from '../args.js';
import type { EffectRetention, Ledger } from '../effects/ledger.js';
import { StatefoldError } from '../errors.js';
import type { Encryption } from '../format/keyring.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { SEED_LEDGER, type EngineOptions } from '../options.js';
import { restore } from '../restore/index.js';
import { SnapshotEngine } from '../engine.js';
import { deleteStream } from './delete.js';

/** Options of `forkStream`. */
export interface ForkOptions {
  /** The seq of `from` to fork at (default: its newest checkpoint). */
  seq?: number;
  /** The keys of `from` if it is encrypted; the fork is encrypted with them too (its `current` key). */
  encryption?: Encryption;
  /** How long effect tokens carried over are kept in the fork (as `SnapshotEngine.open`'s effectRetention). */
  effectRetention?: EffectRetention;
  /** Aborts the reads (they then reject ABORTED). */
  signal?: AbortSignal;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
}

/** What `forkStream` made. */
export interface ForkInfo {
  /** The new stream, and its first seq (1). */
  stream: string;
  seq: number;
  /** The stream and seq it was forked from. */
  from: { stream: string; seq: number };
  /** Effect records carried over (pending ones included). */
  effects: number;
}

/**
 * Forks `from` at `options.seq` (default: its newest checkpoint) into the new stream `to`: one
 * base holding that checkpoint's state, meta and effect ledger, whatever the length of the
 * original's chain. `to` must hold nothing yet (INVALID_ARGUMENT otherwise); `from` is only read.
 */
export async function forkStream(store: Store, from: string, to: string, options: ForkOptions = {}): Promise<ForkInfo> {
  assertStore(store, 'forkStream');
  if (options === null || typeof options !== 'object')
    throw new StatefoldError('INVALID_ARGUMENT', 'forkStream: options must be an object');
  const source = new StreamKeys(from);
  const target = new StreamKeys(to);
  if (options.seq !== undefined) assertSeq(options.seq, source.stream);
  if (source.root === target.root)
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `forkStream: the fork must be another stream than ${JSON.stringify(from)}`,
    );
  const guarded = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'forkStream'));
  // Refuse a target that exists before claiming it: opening it would fence its writer.
  const existing = await guarded.list(target.root, { limit: 1, ...(options.signal && { signal: options.signal }) });
  if (existing.length > 0) {
    throw new StatefoldError('INVALID_ARGUMENT', `forkStream: stream ${JSON.stringify(to)} already exists`, {
      stream: to,
    });
  }
  const restored = await restore(store, from, {
    ...(options.seq !== undefined && { seq: options.seq }),
    ...(options.encryption && { encryption: options.encryption }),
    ...(options.signal && { signal: options.signal }),
    ...(options.storeTimeoutMs !== undefined && { storeTimeoutMs: options.storeTimeoutMs }),
  });
  const ledger: Ledger = new Map(restored.effects.map((r) => [r.token, r]));
  const open: EngineOptions & { [SEED_LEDGER]: Ledger } = {
    store,
    stream: to,
    [SEED_LEDGER]: ledger,
    ...(options.encryption && { encryption: options.encryption }),
    ...(options.effectRetention && { effectRetention: options.effectRetention }),
    ...(options.storeTimeoutMs !== undefined && { storeTimeoutMs: options.storeTimeoutMs }),
  };
  const engine = await SnapshotEngine.open(open);
  try {
    // Another fork or engine got there between the check and the claim: leave what it wrote alone.
    if (engine.seq !== 0) {
      throw new StatefoldError('INVALID_ARGUMENT', `forkStream: stream ${JSON.stringify(to)} already exists`, {
        stream: to,
      });
    }
    let info;
    try {
      info = await engine.checkpoint(restored.state, { meta: restored.meta });
    } catch (err) {
      // Leave no half-made fork (its fence alone) that a retry would find "already exists".
      await engine.close().catch(() => undefined);
      await deleteStream(store, to).catch(() => undefined);
      throw err;
    }
    return { stream: to, seq: info.seq, from: { stream: from, seq: restored.seq }, effects: ledger.size };
  } finally {
    await engine.close().catch(() => undefined);
  }
}
