// Soak: the kill test of test/crash/kill.test.ts for as long as you like, outside the default run.
//   npm run build && node test/support/soak.mjs --seconds 600 [--seed N] [--base-every 8] [--race-every 25] [--dir DIR] [--keep]
// Prints kills, restores and mismatches; exits 1 on any mismatch (0 must be the only answer).
// --race-every N also runs a round of processes racing on a second stream every N kill rounds.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { killRounds, raceRound } from './kill-harness.mjs';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '600' },
    seed: { type: 'string' },
    'base-every': { type: 'string', default: '8' },
    'race-every': { type: 'string', default: '25' },
    dir: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const seconds = Number(values.seconds);
// Unlike the tests, a soak explores: without --seed it picks a new seed each time, and prints it
// first and last, so that any run can be repeated with --seed.
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const raceEvery = Number(values['race-every']);
if (!(seconds > 0) || !Number.isSafeInteger(seed)) {
  console.error(
    'usage: node test/support/soak.mjs --seconds 600 [--seed N] [--base-every 8] [--race-every 25] [--dir DIR] [--keep]',
  );
  process.exit(2);
}
const dir = values.dir ?? (await mkdtemp(path.join(tmpdir(), 'statefold-soak-')));
const started = Date.now();
const deadline = started + seconds * 1000;
const total = {
  kills: 0,
  restores: 0,
  acks: 0,
  inFlightLanded: 0,
  killedBeforeOpen: 0,
  races: 0,
  fenced: 0,
  mismatches: [],
};
const say = (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}`);
say(`soak: seed ${seed}, ${seconds} s, dir ${dir}`);

let batch = 0;
// Batches of kill rounds on one stream (it grows across batches), a race round between batches.
while (Date.now() < deadline && total.mismatches.length === 0) {
  const left = (deadline - Date.now()) / 1000;
  const stats = await killRounds({
    dir,
    stream: 'agent/soak',
    kills: raceEvery > 0 ? raceEvery : 1_000_000,
    seconds: left,
    seed: seed + batch,
    baseEvery: Number(values['base-every']),
    log: say,
  });
  for (const k of ['kills', 'restores', 'acks', 'inFlightLanded', 'killedBeforeOpen']) total[k] += stats[k];
  total.mismatches.push(...stats.mismatches);
  if (raceEvery > 0 && Date.now() < deadline && total.mismatches.length === 0) {
    const race = await raceRound({
      dir,
      stream: 'agent/soak-race',
      writers: 2 + (batch % 3),
      steps: 30,
      barrier: batch % 2 === 0,
      seed,
      round: batch,
    });
    total.races++;
    total.fenced += race.fenced;
    total.mismatches.push(...race.mismatches.map((m) => `race round ${batch}: ${m}`));
  }
  batch++;
  say(
    `${total.kills} kills, ${total.restores} restores, ${total.acks} acknowledged checkpoints (${stats.committed} committed), in flight landed ${total.inFlightLanded}x, ${total.races} race rounds (${total.fenced} fenced), ${total.mismatches.length} mismatches`,
  );
}

say(`done: seed ${seed}: ${total.kills} kills, ${total.restores} restores, ${total.mismatches.length} mismatches`);
for (const m of total.mismatches.slice(0, 20)) console.log(`  ${m}`);
if (!values.keep && values.dir === undefined && total.mismatches.length === 0)
  await rm(dir, { recursive: true, force: true });
else console.log(`  dir kept: ${dir}`);
process.exit(total.mismatches.length === 0 ? 0 : 1);
