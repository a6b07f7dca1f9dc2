/** The public types of the read API: what restore and listCheckpoints take and give. */
import type { StatefoldError } from '../errors.js';
import type { EffectRecord } from '../effects/ledger.js';
import type { Encryption } from '../format/keyring.js';
import type { Schema } from '../schema.js';

/** Options of `restore`. */
export interface RestoreOptions {
  /** The seq to restore; the newest committed checkpoint when absent. */
  seq?: number;
  /** Aborts the reads (they then reject ABORTED). */
  signal?: AbortSignal;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
  /** Largest uncompressed frame payload accepted (default 1 GiB): a guard against damaged lengths. */
  maxPayloadBytes?: number;
  /** How many objects a restore reads at once (default 64: a long chain on a remote store is read in few rounds). */
  concurrency?: number;
  /**
   * When the checkpoint asked for (or one its chain needs) is damaged or missing, restore the
   * newest intact checkpoint before it instead of rejecting CORRUPT, and report what was skipped
   * in `skipped` and `damage`. Off by default: damage is an error.
   */
  skipDamaged?: boolean;
  /** The keys of an encrypted stream (as given to `SnapshotEngine.open`; only the ids its frames name are used). */
  encryption?: Encryption;
  /**
   * The schema of the state this code reads (see Schema): a checkpoint stored in an older version
   * is upcast through `migrate`, one in a newer version is SCHEMA_TOO_NEW unless its writer
   * declared it readable by this version. Default: version 1, no migrations. `'stored'`: every
   * state as stored, whatever its version (for tools).
   */
  schema?: Schema | 'stored';
}

/** A restored checkpoint. */
export interface Restored<S = unknown> {
  /** The state as it was captured at `seq`. */
  state: S;
  seq: number;
  /** The meta given to `checkpoint`, or undefined. */
  meta: unknown;
  kind: 'base' | 'delta';
  /** When the checkpoint was captured (ms since the epoch). */
  createdAt: number;
  /** The effect ledger as of `seq`: every token with its status (see `engine.effect`). */
  effects: EffectRecord[];
  /** With `skipDamaged`: the seqs newer than `seq`, up to the one asked for, that were passed over (empty otherwise). */
  skipped: number[];
  /** With `skipDamaged`: the CORRUPT errors that made restore pass them over. */
  damage: StatefoldError[];
  /** The schema version the checkpoint was stored in (1 when written without a schema); `state` is in the reader's. */
  schemaVersion: number;
}

/** One entry of `listCheckpoints`. */
export interface CheckpointEntry {
  seq: number;
  kind: 'base' | 'delta';
  /** Size of the stored object in bytes. */
  bytes: number;
  /** When the checkpoint was captured (ms since the epoch). */
  createdAt: number;
  meta: unknown;
  /** The seq of the base this checkpoint's chain starts from (its own seq for a base). */
  base: number;
  /** Writer epoch of the engine that committed it. */
  epoch: number;
  /** Effect records this checkpoint wrote (intents and outcomes); a base lists the whole ledger. */
  effects: EffectRecord[];
  /**
   * True for a filler: a checkpoint equal to the one before it, written by an engine taking over
   * the stream to close a seq the engine it fenced never committed (see README, Guarantees).
   */
  filler: boolean;
  /** The id of the key it is encrypted with; absent when the stream is not encrypted. */
  keyId?: string;
  /** The schema version its state was stored in (1 when written without a schema); see Schema. */
  schemaVersion: number;
  /** The oldest schema version whose code may read it as stored (its schemaVersion unless its writer declared lower). */
  readableFrom: number;
  /** False: the checkpoint was read and verified (see DamagedCheckpointEntry). */
  damaged: false;
}

/** An entry of `listCheckpoints` whose object failed verification: listed, not thrown. */
export interface DamagedCheckpointEntry {
  seq: number;
  damaged: true;
  /** The CORRUPT error reading it gave (stream, seq and key inside). */
  error: StatefoldError;
}

/** One entry of `listCheckpoints`: a verified checkpoint, or a damaged one. */
export type ListedCheckpoint = CheckpointEntry | DamagedCheckpointEntry;

/** Options of `listCheckpoints`. */
export interface ListCheckpointsOptions {
  /** At most this many entries (default: all). Only the objects returned are read. */
  limit?: number;
  /** Only seqs greater than this one (the last seq of the previous page, ascending). */
  after?: number;
  /** Only seqs smaller than this one (the last seq of the previous page, with `reverse`). */
  before?: number;
  /** Newest first (default: oldest first). */
  reverse?: boolean;
  /** Aborts the reads (they then reject ABORTED). */
  signal?: AbortSignal;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
  /** Largest uncompressed frame payload accepted (default 1 GiB). */
  maxPayloadBytes?: number;
  /** How many objects are read at once (default 16). */
  concurrency?: number;
  /** The keys of an encrypted stream (its meta and effects are sealed; without keys, KEY_UNAVAILABLE). */
  encryption?: Encryption;
  /**
   * Checked, then changes nothing: entries hold metas, which are never upcast (each entry's
   * `schemaVersion` says what its state was stored in). Accepted so that one options object
   * serves every read.
   */
  schema?: Schema | 'stored';
}
