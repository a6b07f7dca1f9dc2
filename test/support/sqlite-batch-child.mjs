// A child process for the SQLite kill test: commits batches of `keys` creates of `size` bytes each,
// every batch issued in one turn so that it is one transaction (a group commit), and writes
// `sent <batch>` before a batch and `ack <batch> <transactions>` once all of it has resolved.
// Its bodies are large, so that the parent's SIGKILL mostly lands inside a transaction: while
// the WAL frames are written, or during the commit's fsync.
//   node sqlite-batch-child.mjs <database file> <first batch> <keys> <size>
import { SqliteStore } from 'statefold/sqlite';
import { batchBody, batchKey } from './sqlite-batches.mjs';

const [file, first, keys, size] = process.argv.slice(2);
const store = new SqliteStore({ path: file });
for (let batch = Number(first); batch < Number(first) + 100_000; batch++) {
  process.stdout.write(`sent ${batch}\n`);
  const created = await Promise.all(
    Array.from({ length: Number(keys) }, (_, j) =>
      store.putIfAbsent(batchKey(batch, j), batchBody(batch, j, Number(size))),
    ),
  );
  if (!created.every(Boolean)) {
    process.stdout.write(`error batch ${batch} found keys already there\n`);
    process.exit(1);
  }
  process.stdout.write(`ack ${batch} ${store.stats().transactions}\n`);
}
