/**
 * The kit for store authors: key checks, STORAGE error helpers, and retries for remote stores.
 * @module statefold/kit
 */
export { isValidKey, isValidPrefix, assertKey, assertPrefix } from './keys.js';
export { abortedError, storageError, throwIfAborted } from './errors.js';
export { retry, retryError, sleep, TransientError } from './retry.js';
export type { RetryPolicy } from './retry.js';
