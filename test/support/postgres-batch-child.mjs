// A child process for the PostgreSQL kill test: commits batches of `keys` creates of `size` bytes
// each, every batch issued in one turn so that it is one statement (a group commit), and writes
// `sent <batch>` before a batch and `ack <batch> <transactions>` once all of it has resolved.
// Its bodies are large, so that the parent's SIGKILL mostly lands while a statement is on its way
// or committing.
//   node postgres-batch-child.mjs <postgres URL>#<table> <first batch> <keys> <size>
import { batchBody, batchKey } from './sqlite-batches.mjs';
import { storeAt } from './store-kind.mjs';

const [where, first, keys, size] = process.argv.slice(2);
const store = await storeAt('postgres', where);
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
