/**
 * forkStream: a new stream whose first checkpoint is the state of another stream at a seq, with
 * that checkpoint's meta and effect ledger, so that an agent resumed from the fork skips every
 * effect the original recorded (and stops at one it left pending) instead of repeating it.
 *
 * The fork is one base at the first seq of the new stream (1, or the floor of an id deleted
 * before), created only if absent: that one write is the
 * whole fork, so two forks racing for one target cannot both win, and the loser has nothing to
 * clean up (no fence, no claim: a new stream has no writer to fence).
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertSeq, assertStore, readingOf } from '../args.js';
import {
  expired,
  ledgerEntries,
  resolveEffectRetention,
  type EffectRetention,
  type Ledger,
} from '../effects/ledger.js';
import { StatefoldError } from '../errors.js';
import { Keyring, type Encryption } from '../format/keyring.js';
import { encodeFrameOffThread } from '../format/offload.js';
import { encodeValue } from '../format/values.js';
import type { FrameHeader } from '../format/header.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { listLog } from '../log/listing.js';
import { resolveSchema, schemaFields, type ResolvedSchema, type Schema } from '../schema.js';
import { restore } from '../restore/index.js';
import { createOrRead } from '../log/create.js';
import { wrapStorage } from '../errors.js';

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
  /** The fork's base holds the state upcast to this schema, in its version (default: as stored, in the version stored). */
  schema?: Schema;
}

/** What `forkStream` made. */
export interface ForkInfo {
  /** The new stream, and its first seq (1, or for an id deleteStream removed before, the seq after its tombstone). */
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
  const source = new StreamKeys(from);
  const target = new StreamKeys(to);
  // Every option checked before the first store call: a bad one must not leave half a fork.
  options = assertOptions(options, 'forkStream', source.stream);
  if (options.seq !== undefined) assertSeq(options.seq, source.stream, 'forkStream');
  readingOf(options, 'forkStream');
  if (source.root === target.root)
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `forkStream: the fork must be another stream than ${JSON.stringify(from)}`,
    );
  const retention = resolveEffectRetention(options.effectRetention);
  const keyring = Keyring.of(options.encryption, 'forkStream');
  const guarded = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'forkStream'));
  const signalOpt = options.signal ? { signal: options.signal } : undefined;
  const exists = (): StatefoldError =>
    new StatefoldError('INVALID_ARGUMENT', `forkStream: stream ${JSON.stringify(to)} already exists`, { stream: to });
  // Refuse a target that exists before reading the original (a retry of a fork that landed too).
  // One that deleteStream removed keeps a tombstone: the fork starts after it, at its floor.
  const existing = await listLog(guarded, target, options.signal);
  if (existing.slots.length > 0) throw exists();
  const seq = Math.max(1, existing.floor);
  // ('stored', given by a caller outside TypeScript, is as without a schema: the version stored.)
  const upcastTo = (options.schema as unknown) === 'stored' ? undefined : options.schema;
  const restored = await restore(store, from, {
    ...(options.seq !== undefined && { seq: options.seq }),
    ...(options.encryption && { encryption: options.encryption }),
    ...(options.signal && { signal: options.signal }),
    ...(options.storeTimeoutMs !== undefined && { storeTimeoutMs: options.storeTimeoutMs }),
    schema: upcastTo ?? 'stored',
  });
  // The ledger as the fork's engine would carry it: settled tokens past effectRetention dropped.
  const now = Date.now();
  const all: Ledger = new Map(restored.effects.map((r) => [r.token, r]));
  const drop = new Set(expired(all, retention, now));
  const ledger: Ledger = new Map([...all].filter(([token]) => !drop.has(token)));
  const header: FrameHeader = {
    stream: to,
    seq,
    epoch: 1,
    writer: randomBytes(8).toString('hex'),
    createdAt: now,
    baseSeq: seq,
  };
  if (restored.meta !== undefined) header.meta = encodeValue(restored.meta);
  // The state as stored, in the version stored (its readable-from, if any, not carried); or upcast, in the schema's.
  if (upcastTo !== undefined)
    Object.assign(header, schemaFields(resolveSchema(upcastTo, 'forkStream') as ResolvedSchema));
  else if (restored.schemaVersion > 1) header.schemaVersion = restored.schemaVersion;
  if (ledger.size > 0) header.ledger = ledgerEntries(ledger);
  const frame = await encodeFrameOffThread('base', header, restored.state, undefined, 1, await keyring?.sealing(to));
  const key = target.slot(seq);
  // The one write that is the fork; taken: another fork, or an engine opened on `to`, got there first.
  let there: 'ours' | Uint8Array | undefined;
  try {
    there = await createOrRead(guarded, key, frame, options.signal);
  } catch (err) {
    // Its outcome is unknown: it may still land (a retry then finds the target exists).
    throw wrapStorage(err, to, seq, key, 'forkStream');
  }
  if (there !== 'ours') throw exists();
  return { stream: to, seq, from: { stream: from, seq: restored.seq }, effects: ledger.size };
}
