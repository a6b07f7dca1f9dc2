export * from '../storage-adapters/errors.js';
