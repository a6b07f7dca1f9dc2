/**
 * statefold: incremental, crash-safe checkpoints of long-running agent state: the engine, restore,
 * the memory and file stores, and the Store interface.
 * @module statefold
 */
export { SnapshotEngine } from './engine.js';
export type { EngineOptions, CheckpointOptions, CheckpointInfo, EffectOptions } from './engine.js';
export type { EffectRecord, EffectStatus, PendingPolicy, EffectRetention } from './effects/ledger.js';
export { restore, listCheckpoints } from './restore/index.js';
export type {
  RestoreOptions,
  Restored,
  CheckpointEntry,
  DamagedCheckpointEntry,
  ListedCheckpoint,
  ListCheckpointsOptions,
} from './restore/index.js';
export type { Policy, ResolvedPolicy } from './policy.js';
export type { FrameLimits } from './format/frame.js';
export type { Encryption, KeyProvider } from './format/keyring.js';
export { gc } from './retention.js';
export { verifyStream } from './ops/verify.js';
export type { VerifyOptions, VerifyReport } from './ops/verify.js';
export { diffCheckpoints } from './ops/diff.js';
export { listStreams } from './ops/streams.js';
export { forkStream } from './ops/fork.js';
export { deleteStream } from './ops/delete.js';
export type { Repair } from './writer/resume.js';
export type { DeleteStreamOptions, DeleteReport } from './ops/delete.js';
export type { ForkOptions, ForkInfo } from './ops/fork.js';
export type { ListStreamsOptions } from './ops/streams.js';
export type { DiffOptions, PatchOperation } from './ops/diff.js';
export type { Retention, GcReport, GcOptions } from './retention.js';
export { DEFAULT_POLICY } from './policy.js';
export type { UpdateMode } from './capture/index.js';
export { StatefoldError, isStatefoldError } from './errors.js';
export type { ErrorCode, StatefoldErrorDetails } from './errors.js';
export type { Store, StoreOptions, ListOptions } from '../storage-adapters/store.js';
export { MemoryStore } from '../storage-adapters/memory/index.js';
export { FileStore } from '../storage-adapters/file/index.js';
export type { FileStoreOptions } from '../storage-adapters/file/index.js';
