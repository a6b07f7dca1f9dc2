import { MemoryStore } from 'statefold';
import { describeStoreConformance } from 'statefold/testing';

// The memory store has no storage that can fail, so it gives no createFailing: that check is skipped.
describeStoreConformance({
  name: 'memory',
  honoursListLimit: true,
  create: async () => new MemoryStore(),
});
