import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

// Test files by how long they take. `fast` is the inner loop (`npm run test:fast`) and takes every
// test file that is not listed here, so that a new file runs somewhere; `npm test` runs all three.
/** Crash-point sweeps, fault injection, SIGKILLed and racing processes, child processes, bench and demo runs. */
const SLOW = [
  'test/crash/**/*.test.ts', // crash sweeps and fault injection; kill.test.ts SIGKILLs agent processes
  'test/demo/**/*.test.ts', // the crash-and-resume demo, in child processes
  'test/engine/restart.test.ts', // three agent processes, one after the other
  'test/package/**/*.test.ts', // the packed package, installed and imported from outside the repository
  'test/cli/**/*.test.ts', // the statefold bin, run in child processes
  'test/langgraph/graph.test.ts', // a LangGraph agent SIGKILLed and resumed in child processes
];
/** Against a real S3-compatible server (project `s3`). */
const INTEGRATION = ['test/integration/**/*.test.ts'];
/**
 * A smoke run of the benchmark in a child process (project `bench`, `npm run test:bench`): it needs the
 * bench's own package installed (`npm ci --prefix bench`), so `npm test` (the library's tests) leaves it out.
 */
const BENCH = ['test/bench/**/*.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    // Two files at once even on two cores (vitest's default there is one): most of the slow files
    // wait on fsync, child processes and the test servers rather than compute. On the 2-core CI
    // machine npm test took 745-893 s one file at a time, 535-599 s two at a time; the longest
    // test then used 43 s of its 120 s timeout.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    hookTimeout: 120_000,
    // The SDK warns once per process that its releases after January 2027 need Node 22.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...SLOW, ...INTEGRATION, ...BENCH],
        },
      },
      { extends: true, test: { name: 'slow', include: SLOW } },
      { extends: true, test: { name: 'bench', include: BENCH } },
      {
        // Against a real S3-compatible server from STATEFOLD_S3_* variables; skipped without them
        // (one line says how to run them), an error without them under CI=true.
        extends: true,
        test: {
          name: 's3',
          include: INTEGRATION,
          globalSetup: ['test/support/s3-global-setup.ts'],
          testTimeout: 120_000,
        },
      },
    ],
  },
});
