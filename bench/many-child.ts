/**
 * Runs one many-streams scenario (many.ts) in a process of its own, so that it starts from a fresh
 * heap, as a process serving 10,000 streams would, not after every other scenario of the bench.
 * Arguments: one JSON object; prints the ManyResult as JSON on stdout (progress on stderr). One
 * process of a run across several (`shared`): before each phase it prints `ready PHASE` and waits
 * for a line on stdin; at the window's end it prints `mark window-end`.
 */
import { createInterface } from 'node:readline';
import { manyStreamsScenario, type ManyArgs, type ManyShared } from './many.js';
import { Progress } from './stats.js';
import { fileStores, memoryStores, postgresStores, sqliteStores, type StoreKind } from './stores.js';

const args = JSON.parse(process.argv[2] ?? '') as ManyArgs;
const kind: StoreKind =
  args.store === 'memory'
    ? memoryStores()
    : args.store === 'sqlite'
      ? sqliteStores()
      : args.store === 'postgres'
        ? await postgresStores(args.postgres!.url, args.postgres!.table)
        : fileStores(undefined, args.ioThreads);
let shared: ManyShared = {};
const input = args.shared ? createInterface({ input: process.stdin }) : undefined;
if (args.shared && input) {
  const lines = input[Symbol.asyncIterator]();
  shared = {
    prefix: args.shared.prefix,
    samples: true,
    sync: async (phase) => {
      process.stdout.write(`ready ${phase}\n`);
      if ((await lines.next()).done) throw new Error(`many streams: stdin closed before ${phase}`);
    },
    mark: (phase) => void process.stdout.write(`mark ${phase}\n`),
  };
}
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
    shared,
  );
  process.stdout.write(
    `${JSON.stringify({
      ...result,
      ...(args.ioThreads !== undefined && { ioThreads: args.ioThreads }),
      ...(args.semiSpaceMb !== undefined && { semiSpaceMb: args.semiSpaceMb }),
    })}\n`,
  );
} finally {
  await kind.cleanup();
  // A piped stdin would keep the process alive.
  if (input) {
    input.close();
    process.stdin.destroy();
  }
}
