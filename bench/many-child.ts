/**
 * Runs one many-streams scenario (many.ts) in a process of its own, so that it starts from a fresh
 * heap, as a process serving 10,000 streams would, not after every other scenario of the bench.
 * Arguments: one JSON object; prints the ManyResult as JSON on stdout (progress on stderr).
 */
import { manyStreamsScenario, type ManyArgs } from './many.js';
import { Progress } from './stats.js';
import { fileStores, memoryStores, sqliteStores } from './stores.js';

const args = JSON.parse(process.argv[2] ?? '') as ManyArgs;
const kind =
  args.store === 'memory'
    ? memoryStores()
    : args.store === 'sqlite'
      ? sqliteStores()
      : fileStores(undefined, args.ioThreads);
try {
  const result = await manyStreamsScenario(
    kind,
    args.mode,
    args.workload,
    args.streams,
    args.size,
    args.intervalMs,
    args.warmupMs,
    args.windowMs,
    args.seed,
    new Progress(1),
    args.aloneMs,
  );
  process.stdout.write(
    `${JSON.stringify({ ...result, ...(args.ioThreads !== undefined && { ioThreads: args.ioThreads }) })}\n`,
  );
} finally {
  await kind.cleanup();
}
