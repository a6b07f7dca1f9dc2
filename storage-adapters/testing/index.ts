/**
 * statefold/testing, for store authors and your own tests (needs vitest, an optional peer
 * dependency: without it, importing `statefold/testing` fails with one message that says what to
 * install): the conformance suite every store must pass, and a store wrapper that injects faults.
 * @module statefold/testing
 */
import type * as Conformance from './conformance.js';
import { assertPeers } from '../peers.js';
import { NOT_INSTALLED } from './peers.js';

assertPeers(['vitest'], NOT_INSTALLED);
// A dynamic import (not a static one, which would fail before the check with a bare "Cannot find package").
const conformance: typeof Conformance = await import('./conformance.js');

/**
 * The contract every store keeps; each adapter's test file calls this and adds its own native checks.
 * @function
 */
export const describeStoreConformance: typeof Conformance.describeStoreConformance =
  conformance.describeStoreConformance;
export type { StoreInitializer } from './conformance.js';
export { FaultStore } from './fault-store.js';
export type { Fault, FaultMatch, FaultStoreOptions, OpRecord, StoreOp } from './fault-store.js';
