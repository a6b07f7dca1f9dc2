import { MemoryStore } from 'statefold';
import { describeStoreConformance } from '../conformance/store-conformance.js';

describeStoreConformance({
  name: 'memory',
  create: async () => new MemoryStore(),
});
