/**
 * statefold/testing, for store authors and your own tests (needs vitest): the conformance suite
 * every store must pass, and a store wrapper that injects faults.
 */
export { describeStoreConformance } from './conformance.js';
export type { StoreInitializer } from './conformance.js';
export { FaultStore } from './fault-store.js';
export type { Fault, FaultMatch, FaultStoreOptions, OpRecord, StoreOp } from './fault-store.js';
