/**
 * statefold/testing as `require()` loads it: index.ts without its top-level await, which `require`
 * of an ES module refuses (the conformance suite is loaded through `require` instead). index.ts stays
 * the `import` entry because vitest's module loader would otherwise load the suite's modules twice.
 */
import { createRequire } from 'node:module';
import type * as Conformance from './conformance.js';
import { assertPeers } from '../peers.js';
import { NOT_INSTALLED } from './peers.js';

assertPeers(['vitest'], NOT_INSTALLED);
const conformance = createRequire(import.meta.url)('./conformance.js') as typeof Conformance;

/** The contract every store keeps; each adapter's test file calls this and adds its own native checks. */
export const describeStoreConformance: typeof Conformance.describeStoreConformance =
  conformance.describeStoreConformance;
export { FaultStore } from './fault-store.js';
