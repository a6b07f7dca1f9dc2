// A child process for the kill tests: opens a stream on a FileStore dir (a SqliteStore file when
// STATEFOLD_TEST_STORE=sqlite), checks that it resumes from the state of the step it finds, and
// checkpoints stateAt(step) for the following steps, writing `ack <seq> <step>` once each checkpoint has resolved. The parent SIGKILLs it at random.
//   node kill-child.mjs <dir> <stream> <maxSteps> <baseEvery>
import { SnapshotEngine } from 'statefold';
import { difference, stateAt } from './agent-steps.mjs';
import { childKind, storeAt } from './store-kind.mjs';

const [dir, stream, maxSteps, baseEvery] = process.argv.slice(2);
const engine = await SnapshotEngine.open({
  store: await storeAt(childKind, dir),
  stream,
  policy: { baseEvery: Number(baseEvery) },
});
const start = engine.state?.step ?? 0;
const diff =
  engine.seq !== start
    ? `seq ${engine.seq} holds step ${start}`
    : difference(engine.state, start === 0 ? undefined : stateAt(start));
// On Linux, writes to a pipe are synchronous: once this returns, the parent will read the line.
process.stdout.write(`open ${engine.seq} ${start} ${diff === undefined ? 'ok' : `bad ${diff}`}\n`);
if (diff !== undefined) process.exit(3);
for (let step = start + 1; step <= Number(maxSteps); step++) {
  const info = await engine.checkpoint(stateAt(step), { meta: { step } });
  process.stdout.write(`ack ${info.seq} ${step}\n`);
}
await engine.close();
process.stdout.write('done\n');
