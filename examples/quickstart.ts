import { SnapshotEngine, listCheckpoints, restore } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';

type Message = { role: 'user' | 'assistant'; content: string } | { role: 'tool'; tool: string; content: string };
interface AgentState {
  messages: Message[];
  files: Record<string, string>;
  usage: { steps: number; tokens: number };
}

// Stands in for a real tool: a few KB of output that differs from call to call.
const runTests = (step: number) =>
  Array.from({ length: 120 }, (_, i) => `test ${step}.${i} ${(step * 31 + i * 17) % 97} ms`).join('\n');

// One SQLite database file holds every stream of the store (created, with its folder, on the first write).
const store = new SqliteStore({ path: './.statefold/agents.db' });
const engine = await SnapshotEngine.open<AgentState>({ store, stream: 'agent-42' });

// The state of the last committed checkpoint: a second run goes on where the first stopped.
const state: AgentState = engine.state ?? {
  messages: [{ role: 'user', content: 'Make the failing tests pass.' }],
  files: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`src/mod${i}.ts`, runTests(-i)])),
  usage: { steps: 0, tokens: 0 },
};
console.log(`opened at seq ${engine.seq}`);

for (let i = 0; i < 5; i++) {
  const step = ++state.usage.steps;
  const output = runTests(step);
  state.messages.push({ role: 'assistant', content: `Running the tests (step ${step}).` });
  state.messages.push({ role: 'tool', tool: 'run_tests', content: output });
  state.files[`src/mod${step % 40}.ts`] += `\n// fixed in step ${step}`;
  state.usage.tokens += output.length / 4;

  // The state is captured before checkpoint() returns: the agent may change it again at once.
  const info = await engine.checkpoint(state, { meta: { step } });
  console.log(`seq ${info.seq}: ${info.kind}, ${info.ops} operations, ${info.bytes} bytes`);
}
await engine.close();

const latest = await restore<AgentState>(store, 'agent-42');
const first = await restore<AgentState>(store, 'agent-42', { seq: 1 });
console.log(
  `restored seq ${latest.seq}: ${latest.state.messages.length} messages (seq 1 had ${first.state.messages.length})`,
);
const listed = await listCheckpoints(store, 'agent-42', { limit: 3, reverse: true });
console.log(listed.map((c) => (c.damaged ? `${c.seq}: damaged` : `${c.seq}: ${c.kind} ${c.bytes} B`)).join(', '));
await store.close();
