// A child process for the shard race of test/adapters/file.test.ts: once `go` is read on stdin,
// `loops` loops each create a key in the same shard of a FileStore dir, read it back and delete
// it, `rounds` times, so that the shard is emptied and removed again and again while the parent
// process does the same. Prints `ready`, then `done <creates>` or `error <code> <message>` (exit 1).
//   node shard-child.mjs <dir> <name> <loops> <rounds>
import { createInterface } from 'node:readline';
import { FileStore } from 'statefold';
import { churnShard } from './shard-churn.mjs';

const [dir, name, loops, rounds] = process.argv.slice(2);
const say = (line) => process.stdout.write(`${line}\n`);
say('ready');
const lines = createInterface({ input: process.stdin });
for await (const line of lines) if (line === 'go') break;
lines.close();
try {
  const created = await churnShard(new FileStore({ dir }), name, Number(loops), Number(rounds));
  say(`done ${created}`);
} catch (err) {
  say(`error ${err?.code ?? 'unknown'} ${String(err?.message ?? err).replace(/\n/g, ' ')}`);
  process.exit(1);
}
