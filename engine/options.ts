/** The options of `SnapshotEngine.open` and `checkpoint`, and their checks (INVALID_ARGUMENT before any store is touched). */
import type { Store } from '../storage-adapters/store.js';
import {
  assertOptionalBoolean,
  assertOptionalFunction,
  assertOptions,
  assertStore,
  invalidArgument,
  readingOf,
} from './args.js';
import type { UpdateMode } from './capture/index.js';
import { resolveEffectRetention, type EffectRetention, type PendingPolicy } from './effects/ledger.js';
import { StatefoldError, describeValue } from './errors.js';
import type { FrameReading } from './format/frame.js';
import type { Encryption } from './format/keyring.js';
import { guardStore, resolveStoreTimeout } from './log/guard.js';
import { StreamKeys } from './log/keys.js';
import type { IndexOf } from './writer/index-objects.js';
import { resolveSchema, type ResolvedSchema, type Schema } from './schema.js';
import { resolvePolicy, type Policy, type ResolvedPolicy } from './policy.js';
import { resolveRetention, type Retention } from './retention.js';

/** Options of `SnapshotEngine.open`. */
export interface EngineOptions {
  /** Where checkpoints are stored: MemoryStore, FileStore, S3Store, or any Store. */
  store: Store;
  /** The stream id: any non-empty string of up to 512 UTF-8 bytes. */
  stream: string;
  /** When bases are written and when `step()` checkpoints (see Policy for the defaults). */
  policy?: Policy;
  /**
   * How the caller changes its state between checkpoints. `'copy'` (default): any way, in place
   * included; each checkpoint walks the whole state. `'immutable'`: by replacing objects, never
   * mutating them (structural sharing); checkpoints skip unchanged subtrees and the engine
   * freezes the objects it captures, so an accidental in-place change throws instead of being lost.
   */
  updates?: UpdateMode;
  /** Largest uncompressed frame payload read back (default 1 GiB). */
  maxPayloadBytes?: number;
  /**
   * Which checkpoints to keep. Off by default: every checkpoint is kept. When set, the engine
   * deletes older ones in the background after each base it commits (see `gc`), never one that a
   * kept checkpoint needs.
   */
  retention?: Retention;
  /** What `effect()` does with a token found pending after a crash (default `'throw'`); see PendingPolicy. */
  onPendingEffect?: PendingPolicy;
  /** How long settled effect tokens are kept (defaults: 24 hours, 10,000 tokens). */
  effectRetention?: EffectRetention;
  /**
   * How long one store call may take before it fails TIMEOUT (default 300,000 ms: a guard against
   * a store whose call never settles; S3Store also times out each try after its requestTimeoutMs).
   */
  storeTimeoutMs?: number;
  /**
   * Encrypts every checkpoint (AES-256-GCM) with the key `current` names; older checkpoints
   * decrypt with the key their frame names, so keys can rotate. Off by default. An encrypted
   * stream must be opened, restored and listed with its keys (else KEY_UNAVAILABLE), and every
   * checkpoint in it must be sealed (a plaintext one is CORRUPT). See README, Encryption.
   */
  encryption?: Encryption;
  /**
   * When the newest chain is damaged (open would reject CORRUPT), start from the newest intact
   * checkpoint instead: the engine's state is that checkpoint's, its first checkpoint a base at
   * the next seq, and `engine.repaired` says what was passed over. Off by default: damage is an error.
   */
  repair?: boolean;
  /**
   * Keeps an index of the stream's checkpoints by a key their meta gives, for `findIndexed`: after
   * each base the engine writes one empty object named by that base's key (`index(meta)`). Keys
   * must never decrease along the stream, be 1 to 90 printable ASCII characters (others are not
   * indexed), and are stored in the clear, so an encrypted stream cannot have one. Off by default.
   */
  index?: (meta: unknown) => string | undefined;
  /**
   * The schema of the state this code writes and reads (see Schema): every checkpoint records its
   * version; a stream stored in an older version opens upcast through `migrate` (checked before
   * the engine claims the stream: a migration that throws rejects MIGRATION_FAILED and no state
   * changes; see docs/engine.md for the two cases that leave a fence), its first checkpoint then a
   * base in this version; a stream stored in a newer
   * version opens as stored when its writer declared it readable by this version, else
   * SCHEMA_TOO_NEW. Default: version 1, no migrations.
   */
  schema?: Schema;
}

/** Options of `checkpoint` and `step`. */
export interface CheckpointOptions {
  /** Any encodable value stored with the checkpoint and returned by `restore` and `listCheckpoints`. */
  meta?: unknown;
}

/** EngineOptions checked, with every default filled in. */
export interface ResolvedEngineOptions {
  /** The caller's store behind the error boundary (log/guard.ts). */
  store: Store;
  keys: StreamKeys;
  policy: ResolvedPolicy;
  updates: UpdateMode;
  /** Limits, and the keyring of an encrypted stream. */
  limits: FrameReading;
  retention: Retention | undefined;
  onPendingEffect: PendingPolicy;
  effectRetention: Required<EffectRetention>;
  repair: boolean;
  index: IndexOf | undefined;
  schema: ResolvedSchema;
}

/** Checks `options` and fills defaults; INVALID_ARGUMENT names the first bad option. */
export function resolveEngineOptions(options: EngineOptions): ResolvedEngineOptions {
  if (options === undefined)
    invalidArgument('SnapshotEngine.open', 'options must be an object: { store, stream, ... }');
  assertOptions(options, 'SnapshotEngine.open');
  const { store } = options;
  assertStore(store, 'SnapshotEngine.open');
  const keys = new StreamKeys(options.stream);
  const policy = resolvePolicy(options.policy);
  assertOptionalBoolean(options.repair, 'repair', 'SnapshotEngine.open', keys.stream);
  const updates = options.updates === undefined ? 'copy' : options.updates;
  if (updates !== 'copy' && updates !== 'immutable') {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `SnapshotEngine.open: updates ${describeValue(updates)} must be 'copy' or 'immutable'`,
      { stream: keys.stream },
    );
  }
  const limits = readingOf(options, 'SnapshotEngine.open');
  assertOptionalFunction(options.index, 'index', 'SnapshotEngine.open', keys.stream);
  if (options.index !== undefined && options.encryption !== undefined)
    invalidArgument(
      'SnapshotEngine.open',
      'index keys are stored in the clear: an encrypted stream cannot have an index',
      keys.stream,
    );
  if (options.retention !== undefined) resolveRetention(options.retention);
  const schema = resolveSchema(options.schema, 'SnapshotEngine.open', keys.stream);
  if (schema === 'stored')
    invalidArgument('SnapshotEngine.open', "schema 'stored' is for reading: a writer needs its version", keys.stream);
  const effectRetention = resolveEffectRetention(options.effectRetention);
  const onPendingEffect = options.onPendingEffect === undefined ? 'throw' : options.onPendingEffect;
  if (onPendingEffect !== 'retry' && onPendingEffect !== 'throw' && typeof onPendingEffect !== 'function') {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `SnapshotEngine.open: onPendingEffect ${describeValue(onPendingEffect)} must be 'retry', 'throw' or a function`,
      { stream: keys.stream },
    );
  }
  const guarded = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'SnapshotEngine.open'));
  return {
    store: guarded,
    keys,
    policy,
    updates,
    limits,
    retention: options.retention,
    onPendingEffect,
    effectRetention,
    repair: options.repair === true,
    index: options.index,
    schema,
  };
}
