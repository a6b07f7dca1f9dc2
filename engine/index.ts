export { StatefoldError, isStatefoldError } from './errors.js';
export type { ErrorCode, StatefoldErrorDetails } from './errors.js';
export type { Store, StoreOptions, ListOptions } from '../storage-adapters/store.js';
export { MemoryStore } from '../storage-adapters/memory/index.js';
export { FileStore } from '../storage-adapters/file/index.js';
export type { FileStoreOptions } from '../storage-adapters/file/index.js';
