/**
 * A SqliteStore thread: it owns one connection to the database file and runs what the main
 * thread sends it. The writer runs every write it has received when it gets to run (those sent
 * in one turn of the main thread, and those that arrived while its last transaction committed)
 * in ONE transaction: one WAL append and one fsync for all of them (group commit). The reader
 * runs reads on a connection of its own, so that no read waits behind a commit's fsync: in WAL
 * mode a reader sees the last commit without taking the write lock.
 */
import { parentPort, workerData } from 'node:worker_threads';
import {
  openReader,
  openWriter,
  preloadBinding,
  type Database,
  type OpenSettings,
  type Statement,
} from './database.js';

/** A call the main thread sends, with its id. */
export type Job =
  | { id: number; op: 'put'; key: string; body: Uint8Array }
  | { id: number; op: 'delete'; key: string }
  | { id: number; op: 'get'; key: string }
  | { id: number; op: 'list'; prefix: string; after: string | undefined; limit: number | undefined };

/** What the thread answers for one call. */
export type Reply =
  | { id: number; created: boolean }
  | { id: number; deleted: true }
  | { id: number; body: Uint8Array | null }
  | { id: number; keys: string[] }
  | { id: number; error: Failure };

/** A message from the thread: replies, and for the writer the transactions it committed for them. */
export interface Answer {
  replies: Reply[];
  /** Transactions committed while making these replies (0 or 1). */
  transactions: number;
}

/** What the thread is started with. */
export interface ThreadData extends OpenSettings {
  role: 'write' | 'read';
}

const data = workerData as ThreadData;
const port = parentPort!;

interface Connection {
  db: Database;
  insert?: Statement;
  remove?: Statement;
  read?: Statement;
  listFrom?: Statement;
  listAfter?: Statement;
}
let conn: Connection | undefined;
let queue: Job[] = [];
let scheduled = false;

/** An error as it crosses to the main thread: its message and SQLite's code (SQLITE_BUSY, SQLITE_CORRUPT...). */
export interface Failure {
  message: string;
  code: string | undefined;
}

function failure(err: unknown): Failure {
  const e = err as { message?: unknown; code?: unknown } | undefined;
  return {
    message: String(e?.message ?? err),
    code: typeof e?.code === 'string' ? e.code : undefined,
  };
}

/** The connection, opened on first use and again after a failed open (the file may be fixed, the lock freed). */
function connection(): Connection | undefined {
  if (conn !== undefined) return conn;
  if (data.role === 'write') {
    const db = openWriter(data);
    conn = {
      db,
      insert: db.prepare('INSERT INTO statefold_objects (key, body) VALUES (?, ?) ON CONFLICT (key) DO NOTHING'),
      remove: db.prepare('DELETE FROM statefold_objects WHERE key = ?'),
    };
  } else {
    const db = openReader(data);
    if (db === undefined) return undefined;
    conn = {
      db,
      read: db.prepare('SELECT body FROM statefold_objects WHERE key = ?').pluck(),
      // Two statements, so that each seeks the index to its own lower bound (a page of a long
      // listing starts at startAfter, not at the prefix).
      listFrom: db.prepare('SELECT key FROM statefold_objects WHERE key >= ? AND key < ? ORDER BY key LIMIT ?').pluck(),
      listAfter: db.prepare('SELECT key FROM statefold_objects WHERE key > ? AND key < ? ORDER BY key LIMIT ?').pluck(),
    };
  }
  return conn;
}

/** Runs the writes in one transaction; each call gets its own result, or all the transaction's error. */
function write(jobs: Job[]): Answer {
  const replies: Reply[] = [];
  let c: Connection;
  try {
    c = connection()!;
    // IMMEDIATE takes the write lock now, where busy_timeout waits for another process's
    // transaction; a deferred one would fail SQLITE_BUSY at its first write without waiting.
    c.db.exec('BEGIN IMMEDIATE');
  } catch (err) {
    const error = failure(err);
    return { replies: jobs.map((j) => ({ id: j.id, error })), transactions: 0 };
  }
  for (const job of jobs) {
    try {
      if (job.op === 'put') replies.push({ id: job.id, created: c.insert!.run(job.key, job.body).changes === 1 });
      else if (job.op === 'delete') {
        c.remove!.run(job.key);
        replies.push({ id: job.id, deleted: true });
      }
    } catch (err) {
      // A statement that fails is undone alone (the transaction goes on) unless SQLite rolled the
      // whole transaction back (a full disk, an I/O error): then nothing of the batch landed.
      if (!c.db.inTransaction) return abandon(jobs, err);
      replies.push({ id: job.id, error: failure(err) });
    }
  }
  try {
    c.db.exec('COMMIT');
  } catch (err) {
    return abandon(jobs, err);
  }
  return { replies, transactions: 1 };
}

/** The transaction failed: it is rolled back and every call of it fails with its error. */
function abandon(jobs: Job[], err: unknown): Answer {
  try {
    if (conn?.db.inTransaction) conn.db.exec('ROLLBACK');
  } catch {
    // The connection may be unusable: the next batch opens a new one.
    closeConnection();
  }
  const error = failure(err);
  return { replies: jobs.map((j) => ({ id: j.id, error })), transactions: 0 };
}

function read(jobs: Job[]): Answer {
  const replies: Reply[] = [];
  let c: Connection | undefined;
  try {
    c = connection();
  } catch (err) {
    const error = failure(err);
    return { replies: jobs.map((j) => ({ id: j.id, error })), transactions: 0 };
  }
  for (const job of jobs) {
    try {
      if (job.op === 'get') {
        const body = c === undefined ? undefined : (c.read!.get(job.key) as Uint8Array | undefined);
        replies.push({ id: job.id, body: body ?? null });
      } else if (job.op === 'list') {
        const to = upperBound(job.prefix);
        const keys =
          c === undefined
            ? []
            : job.after !== undefined && job.after >= job.prefix
              ? c.listAfter!.all(job.after, to, job.limit ?? -1)
              : c.listFrom!.all(job.prefix, to, job.limit ?? -1);
        replies.push({ id: job.id, keys: keys as string[] });
      }
    } catch (err) {
      replies.push({ id: job.id, error: failure(err) });
    }
  }
  return { replies, transactions: 0 };
}

/**
 * The first string after every key that starts with `prefix`: keys are ASCII below 0x7f, so it is
 * the prefix with its last character incremented, and for the empty prefix 0x7f itself.
 */
function upperBound(prefix: string): string {
  if (prefix === '') return '\x7f';
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

function closeConnection(): void {
  try {
    conn?.db.close();
  } catch {
    // Closing a connection that failed: nothing more to do.
  }
  conn = undefined;
}

/** Runs everything received so far, as one batch, and answers it in one message. */
function run(): void {
  scheduled = false;
  const jobs = queue;
  queue = [];
  if (jobs.length === 0) return;
  const answer = data.role === 'write' ? write(jobs) : read(jobs);
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
    closeConnection();
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
