import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileStore, listCheckpoints } from 'statefold';
import { killRounds, raceRound } from '../support/kill-harness.mjs';

/**
 * Real processes on a FileStore dir. A child agent checkpoints a state that is a function of its
 * step and prints each acknowledged step; the parent SIGKILLs it at random moments (during start
 * and open, mid-run, right as a checkpoint is acknowledged) and restores after each kill: the
 * stream must hold the last acknowledged step or the one in flight, nothing else. The next child
 * resumes from engine.state on the same dir. Then several processes race on one stream.
 * Seeds: STATEFOLD_KILL_SEED (default 1, printed with the results and any failure); the kill
 * moments still depend on how fast the children run. For many seeds, run test/support/soak.mjs.
 */

const seed = Number(process.env.STATEFOLD_KILL_SEED ?? 1);

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'statefold-kill-'));
  dirs.push(dir);
  return dir;
}

describe('kill: SIGKILL at random moments', () => {
  it('restores the last acknowledged checkpoint or the one in flight after each of 60 kills, and the next process resumes from it', async () => {
    const dir = await tempDir();
    const stats = await killRounds({ dir, kills: 60, seconds: 70, seed, baseEvery: 8 });
    console.log(
      `kill: seed ${seed}: ${stats.kills} kills (${stats.killedBeforeOpen} before open), ${stats.restores} restores, ${stats.acks} acknowledged checkpoints, in-flight landed ${stats.inFlightLanded}x, ${stats.committed} committed, ${stats.historyChecks} history checks, ${stats.tempFiles} temp files left by kills`,
    );
    expect(stats.mismatches, `seed ${seed}`).toEqual([]);
    expect(stats.kills, `seed ${seed}: kills within the time budget`).toBeGreaterThanOrEqual(50);
    // Temp files of writes cut short by a kill are never listed, and the sweep removes them.
    const store = new FileStore({ dir });
    expect(await store.sweepTempFiles(0)).toBe(stats.tempFiles);
    expect((await listCheckpoints(store, 'agent/kill')).length).toBe(stats.committed);
  }, 120_000);
});

describe('kill: processes racing on one stream', () => {
  it('never forks: the last opener commits, earlier openers are fenced, every seq restores (all open before any commit)', async () => {
    const dir = await tempDir();
    for (let round = 0; round < 3; round++) {
      const r = await raceRound({ dir, writers: 3, steps: 25, barrier: true, seed, round });
      expect(r.mismatches, `seed ${seed} round ${round}`).toEqual([]);
      expect(r.fenced, `seed ${seed} round ${round}`).toBe(2);
    }
  }, 60_000);

  it('never forks when processes open and commit at staggered random moments', async () => {
    const dir = await tempDir();
    let fenced = 0;
    for (let round = 0; round < 4; round++) {
      const r = await raceRound({ dir, writers: 2 + (round % 2), steps: 60, barrier: false, seed, round });
      expect(r.mismatches, `seed ${seed} round ${round}`).toEqual([]);
      fenced += r.fenced;
    }
    console.log(`race: seed ${seed}: ${fenced} writers fenced over 4 staggered rounds`);
  }, 60_000);
});
