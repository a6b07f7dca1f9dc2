import { afterAll, describe, expect, it } from 'vitest';
import { SEEDS_PER_BLOCK, reportTally, sweepBlock, tally } from '../support/crash-sweep.js';

/**
 * Crash-point sweep with retention (crashes cut the background gc short), encryption (a key
 * rotation at life 2) and span deltas (restores that jump over deltas); test/support/crash-sweep.ts
 * says what a case runs and checks, crash-sweep.test.ts runs the plain plans.
 */

const RETENTION_BLOCKS = 2;
const ENCRYPTED_BLOCKS = 2;
const SPAN_BLOCKS = 3;

afterAll(() => reportTally('retention, encryption, span deltas'));

describe('crash sweep with retention: a crash also cuts the background gc short', () => {
  for (let block = 0; block < RETENTION_BLOCKS; block++) {
    const seeds = Array.from({ length: SEEDS_PER_BLOCK }, (_, i) => 10_001 + block * SEEDS_PER_BLOCK + i);
    it(`keeps every listed seq restorable and the newest keepLast kept, across crashes (seeds ${seeds[0]}-${seeds[seeds.length - 1]})`, async () => {
      const zombies = tally.zombies;
      const failures = await sweepBlock(seeds, true);
      expect(failures.slice(0, 8), `${failures.length} failing cases (first 8 shown)`).toEqual([]);
      expect(tally.zombies - zombies, 'zombie lives checked').toBeGreaterThan(0);
    }, 120_000);
  }
});

describe('crash sweep with encryption: every checkpoint sealed, a key rotation at life 2', () => {
  for (let block = 0; block < ENCRYPTED_BLOCKS; block++) {
    const seeds = Array.from({ length: SEEDS_PER_BLOCK }, (_, i) => 20_001 + block * SEEDS_PER_BLOCK + i);
    const retention = block % 2 === 1;
    it(`restores exactly the last acknowledged or in-flight state${retention ? ', with retention' : ''} (seeds ${seeds[0]}-${seeds[seeds.length - 1]})`, async () => {
      const zombies = tally.zombies;
      const failures = await sweepBlock(seeds, retention, true);
      expect(failures.slice(0, 8), `${failures.length} failing cases (first 8 shown)`).toEqual([]);
      expect(tally.zombies - zombies, 'zombie lives checked').toBeGreaterThan(0);
    }, 120_000);
  }
});

describe('crash sweep with span deltas: restores that jump over deltas', () => {
  for (let block = 0; block < SPAN_BLOCKS; block++) {
    const seeds = Array.from({ length: SEEDS_PER_BLOCK }, (_, i) => 30_001 + block * SEEDS_PER_BLOCK + i);
    // One block each: plain, with retention, encrypted (a rotation base at life 2, sealed span deltas).
    const retention = block === 1;
    const encrypted = block === 2;
    it(`restores exactly the last acknowledged or in-flight state${retention ? ', with retention' : ''}${encrypted ? ', encrypted' : ''} (seeds ${seeds[0]}-${seeds[seeds.length - 1]})`, async () => {
      const [zombies, spanDeltas] = [tally.zombies, tally.spanDeltas];
      const failures = await sweepBlock(seeds, retention, encrypted, true);
      expect(failures.slice(0, 8), `${failures.length} failing cases (first 8 shown)`).toEqual([]);
      expect(tally.zombies - zombies, 'zombie lives checked').toBeGreaterThan(0);
      // The plans write span deltas: restores in this block jumped over deltas.
      expect(tally.spanDeltas - spanDeltas, 'span deltas in the clean runs').toBeGreaterThan(SEEDS_PER_BLOCK);
    }, 120_000);
  }
});
