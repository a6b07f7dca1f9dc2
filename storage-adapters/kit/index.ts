/**
 * The kit for store and integration authors: key checks, STORAGE error helpers, retries for remote
 * stores, and optional peer dependencies checked without top-level await.
 * @module statefold/kit
 */
export { isValidKey, isValidPrefix, assertKey, assertPrefix } from './keys.js';
export { abortedError, storageError, throwIfAborted } from './errors.js';
export { retry, retryError, sleep, TransientError } from './retry.js';
export type { RetryPolicy } from './retry.js';
export { assertPeers, loadPeer } from '../peers.js';
