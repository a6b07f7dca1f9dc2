import { afterAll, expect } from 'vitest';
import { MemoryStore } from 'statefold';
import { describeStoreConformance, FaultStore } from 'statefold/testing';

// The fault-injecting wrapper with no fault set is a store like any other (the crash tests rely
// on it), and crashed it fails every operation: it runs the whole suite, failure check included.
// It also checks that the suite calls destroy once for every store it created.
const created = new Set<FaultStore>();
const destroyed: FaultStore[] = [];

describeStoreConformance<FaultStore>({
  name: 'fault (memory inside)',
  honoursListLimit: true,
  create: async () => remember(new FaultStore(new MemoryStore())),
  createFailing: async () => remember(new FaultStore(new MemoryStore()).crashAt(0)),
  destroy: (store) => {
    destroyed.push(store);
  },
});

function remember(store: FaultStore): FaultStore {
  created.add(store);
  return store;
}

afterAll(() => {
  expect(created.size).toBeGreaterThan(10);
  expect(destroyed).toHaveLength(created.size);
  expect(new Set(destroyed)).toEqual(created);
  expect(destroyed.filter((s) => s.crashed)).toHaveLength(1);
});
