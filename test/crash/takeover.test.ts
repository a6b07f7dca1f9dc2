import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileStore } from 'statefold';
import { takeOverBusyWriter } from '../support/takeover.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe('takeover on the file store: another process committing back to back', () => {
  it('opens while the old process writes with 3 checkpoints in flight, fences it, and keeps every acknowledged seq', async () => {
    const opens: number[] = [];
    for (let round = 1; round <= 3; round++) {
      const dir = await mkdtemp(path.join(tmpdir(), 'statefold-takeover-'));
      dirs.push(dir);
      const report = await takeOverBusyWriter(new FileStore({ dir }), ['file', dir], 'agent/takeover', 20 * round);
      opens.push(report.openMs);
      console.log(
        `takeover (file): round ${round}: open took ${report.openMs.toFixed(1)} ms, old writer acknowledged ${report.acked}, ${report.fillers} fillers, new engine at seq ${report.seq}`,
      );
    }
    expect(opens).toHaveLength(3);
  }, 120_000);
});
