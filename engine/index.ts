/**
 * statefold: incremental, crash-safe checkpoints of long-running agent state: the engine, restore,
 * the memory and file stores, and the Store interface.
 * @module statefold
 */
import { resolveEngineOptions, type EngineOptions } from './options.js';

export { SnapshotEngine } from './engine.js';
export type { EngineOptions, CheckpointOptions, CheckpointInfo, EffectOptions } from './engine.js';
export type { EffectRecord, EffectStatus, PendingPolicy, EffectRetention } from './effects/ledger.js';
export { restore, listCheckpoints } from './restore/index.js';
export { restoreRange } from './restore/range.js';
export type { RestoreRangeOptions } from './restore/range.js';
export { findIndexed } from './restore/indexed.js';
export type { FindIndexedOptions, IndexedFind, IndexedEntry } from './restore/indexed.js';
export { readCheckpointMeta } from './restore/meta.js';
export { newestCheckpoint } from './restore/newest.js';
export type { NewestCheckpoint } from './restore/newest.js';
export type { ReadMetaOptions } from './restore/meta.js';
export type {
  RestoreOptions,
  Restored,
  CheckpointEntry,
  DamagedCheckpointEntry,
  ListedCheckpoint,
  ListCheckpointsOptions,
} from './restore/index.js';
export type { Policy, ResolvedPolicy, Budget, ResolvedBudget, BudgetExceeded } from './policy.js';
export type { PathSize } from './format/sizes.js';
export type { Schema } from './schema.js';
export type { FrameLimits } from './format/frame.js';
export type { Encryption, KeyProvider } from './format/keyring.js';
export { gc } from './retention.js';
export { verifyStream } from './admin/verify.js';
export type { VerifyOptions, VerifyReport } from './admin/verify.js';
export { diffCheckpoints } from './admin/diff.js';
export { listStreams } from './admin/streams.js';
export { forkStream } from './admin/fork.js';
export { deleteStream } from './admin/delete.js';
export { migrateStreams } from './admin/migrate.js';
export { sizeReport } from './admin/size-report.js';
export type { SizeReport, SizeReportOptions, PathReport, RepeatedValue, StepGrowth } from './admin/size-report.js';
export type { MigrateOptions, MigrateReport, MigratedStream } from './admin/migrate.js';
export type { Repair } from './open/resume.js';
export type { DeleteStreamOptions, DeleteReport } from './admin/delete.js';
export type { ForkOptions, ForkInfo } from './admin/fork.js';
export type { ListStreamsOptions } from './admin/streams.js';
export type { DiffOptions, PatchOperation } from './admin/diff.js';
export type { Retention, GcReport, GcOptions } from './retention.js';
export { DEFAULT_POLICY } from './policy.js';
export type { UpdateMode } from './capture/index.js';
export { StatefoldError, isStatefoldError } from './errors.js';
export type { ErrorCode, StatefoldErrorDetails } from './errors.js';
export type { Store, StoreOptions, ListOptions, ScannedObject } from '../storage-adapters/store.js';
export { MemoryStore } from '../storage-adapters/memory/index.js';
export { FileStore } from '../storage-adapters/file/index.js';
export type { FileStoreOptions } from '../storage-adapters/file/index.js';

/**
 * Checks `options` as `SnapshotEngine.open` does, without touching the store: INVALID_ARGUMENT
 * names the first bad option (the stream id included). For an integration that opens engines
 * later, one per thread or session, so that a bad option fails where it is configured.
 */
export function checkEngineOptions(options: EngineOptions): void {
  resolveEngineOptions(options);
}
