// A child process for the restart test: opens a stream on a FileStore, adds `count` steps to
// whatever state it finds, and prints the seq and state it committed last as JSON.
import { FileStore, SnapshotEngine } from 'statefold';

const [dir, stream, count] = process.argv.slice(2);
const engine = await SnapshotEngine.open({ store: new FileStore({ dir }), stream, policy: { baseEvery: 3 } });
const state = engine.state ?? { steps: [], pid: [] };
state.pid.push(process.pid);
let info;
for (let i = 0; i < Number(count); i++) {
  state.steps.push(state.steps.length + 1);
  info = await engine.checkpoint(state);
}
await engine.close();
process.stdout.write(JSON.stringify({ seq: info.seq, state }));
