/**
 * The SqliteStore writer thread: it owns one connection to the database file and runs every write
 * it has received when it gets to run (those sent in one turn of the main thread, and those that
 * arrived while its last transaction committed) in ONE transaction (runner.ts): group commit, with
 * the fsync off the main thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { preloadBinding, type OpenSettings } from './database.js';
import { Runner, type Job } from './runner.js';

export type { Answer, Failure, Job, Reply } from './runner.js';

/** What the thread is started with. */
export interface ThreadData extends OpenSettings {
  role: 'write' | 'read';
}

const data = workerData as ThreadData;
const port = parentPort!;
const runner = new Runner(data, data.role);
let queue: Job[] = [];
let scheduled = false;

/** Runs everything received so far, as one batch, and answers it in one message. */
function run(): void {
  scheduled = false;
  const jobs = queue;
  queue = [];
  if (jobs.length === 0) return;
  const answer = runner.run(jobs);
  // A body that owns its whole buffer (SQLite's copy) is handed over, not copied again.
  const transfer: ArrayBuffer[] = [];
  for (const r of answer.replies) {
    if ('body' in r && r.body !== null && r.body.byteOffset === 0 && r.body.byteLength === r.body.buffer.byteLength)
      transfer.push(r.body.buffer as ArrayBuffer);
  }
  port.postMessage(answer, transfer);
}

port.on('message', (message: Job[] | { close: true }) => {
  if ('close' in message) {
    run();
    runner.close();
    port.postMessage({ closed: true });
    return;
  }
  for (const job of message) queue.push(job);
  // Not at once: messages that arrived while the last batch ran are delivered before this runs,
  // and join this batch.
  if (!scheduled) {
    scheduled = true;
    setImmediate(run);
  }
});
port.postMessage({ ready: true });
// After ready: the addon loads while the first calls are on their way here.
preloadBinding();
