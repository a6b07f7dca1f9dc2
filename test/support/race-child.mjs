// A child process for the racing test: opens a stream on a FileStore dir (a SqliteStore file when
// STATEFOLD_TEST_STORE=sqlite), printing its epoch,
// optionally waits for `go` on stdin, then commits raceStep(previous, name) up to `steps` times,
// printing `ack <seq> <n>` for each resolved checkpoint, `fenced` when another process has
// taken the stream over, `done` at the end, or `error <code> <message>` (exit code 1).
//   node race-child.mjs <dir> <stream> <name> <steps> [barrier]
import { createInterface } from 'node:readline';
import { SnapshotEngine } from 'statefold';
import { raceStep } from './agent-steps.mjs';
import { childKind, storeAt } from './store-kind.mjs';

const [dir, stream, name, steps, barrier] = process.argv.slice(2);
const say = (line) => process.stdout.write(`${line}\n`);
try {
  const engine = await SnapshotEngine.open({ store: await storeAt(childKind, dir), stream, policy: { baseEvery: 4 } });
  say(`open ${engine.seq} ${engine.epoch}`);
  if (barrier === 'barrier') {
    const lines = createInterface({ input: process.stdin });
    for await (const line of lines) if (line === 'go') break;
    lines.close();
  }
  let state = engine.state;
  for (let i = 0; i < Number(steps); i++) {
    state = raceStep(state, name);
    let info;
    try {
      info = await engine.checkpoint(state);
    } catch (err) {
      if (err?.code === 'FENCED') {
        say('fenced');
        process.exit(0);
      }
      throw err;
    }
    say(`ack ${info.seq} ${state.n}`);
  }
  await engine.close();
  say('done');
} catch (err) {
  say(`error ${err?.code ?? 'unknown'} ${String(err?.message ?? err).replace(/\n/g, ' ')}`);
  process.exit(1);
}
