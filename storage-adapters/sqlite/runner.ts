/**
 * What runs the store's calls on one connection to the database file: a batch of writes as ONE
 * transaction (one WAL append and one fsync for all of them: group commit), or a batch of reads.
 * The store's writer thread runs one (worker.ts), and so does the main thread while no thread is
 * needed (index.ts): the same code, so that both answer alike.
 */
import { openReader, openWriter, type Database, type OpenSettings, type Statement } from './database.js';

/** A call, with its id. */
export type Job =
  | { id: number; op: 'put'; key: string; body: Uint8Array }
  | { id: number; op: 'delete'; key: string }
  | { id: number; op: 'get'; key: string }
  | { id: number; op: 'list' | 'scan'; prefix: string; after: string | undefined; limit: number | undefined };

/** What a runner answers for one call. */
export type Reply =
  | { id: number; created: boolean }
  | { id: number; deleted: true }
  | { id: number; body: Uint8Array | null }
  | { id: number; keys: string[] }
  | { id: number; objects: { key: string; body: Uint8Array }[] }
  | { id: number; error: Failure };

/** What a batch gives: its replies, and the transactions committed for them (0 or 1). */
export interface Answer {
  replies: Reply[];
  transactions: number;
  /** A write batch whose transaction could not begin (the replies hold why): none of it ran. */
  unrun?: true;
}

/** An error as it leaves a runner: its message and SQLite's code (SQLITE_BUSY, SQLITE_CORRUPT...). */
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

interface Connection {
  db: Database;
  insert?: Statement;
  remove?: Statement;
  read?: Statement;
  listFrom?: Statement;
  listAfter?: Statement;
  scanFrom?: Statement;
  scanAfter?: Statement;
}

export class Runner {
  #conn: Connection | undefined;

  constructor(
    readonly settings: OpenSettings,
    readonly role: 'write' | 'read',
  ) {}

  /** Whether a connection is open. */
  get open(): boolean {
    return this.#conn !== undefined;
  }

  /** Runs a batch: writes in one transaction, or reads. */
  run(jobs: Job[]): Answer {
    return this.role === 'write' ? this.#write(jobs) : this.#read(jobs);
  }

  /** The connection, opened on first use and again after a failed open (the file may be fixed, the lock freed). */
  #connection(): Connection | undefined {
    if (this.#conn !== undefined) return this.#conn;
    if (this.role === 'write') {
      const db = openWriter(this.settings);
      this.#conn = {
        db,
        insert: db.prepare('INSERT INTO statefold_objects (key, body) VALUES (?, ?) ON CONFLICT (key) DO NOTHING'),
        remove: db.prepare('DELETE FROM statefold_objects WHERE key = ?'),
      };
    } else {
      const db = openReader(this.settings);
      if (db === undefined) return undefined;
      this.#conn = {
        db,
        read: db.prepare('SELECT body FROM statefold_objects WHERE key = ?').pluck(),
        // Two statements, so that each seeks the index to its own lower bound (a page of a long
        // listing starts at startAfter, not at the prefix).
        listFrom: db
          .prepare('SELECT key FROM statefold_objects WHERE key >= ? AND key < ? ORDER BY key LIMIT ?')
          .pluck(),
        listAfter: db
          .prepare('SELECT key FROM statefold_objects WHERE key > ? AND key < ? ORDER BY key LIMIT ?')
          .pluck(),
        scanFrom: db.prepare('SELECT key, body FROM statefold_objects WHERE key >= ? AND key < ? ORDER BY key LIMIT ?'),
        scanAfter: db.prepare('SELECT key, body FROM statefold_objects WHERE key > ? AND key < ? ORDER BY key LIMIT ?'),
      };
    }
    return this.#conn;
  }

  /** Runs the writes in one transaction; each call gets its own result, or all the transaction's error. */
  #write(jobs: Job[]): Answer {
    const replies: Reply[] = [];
    let c: Connection;
    try {
      c = this.#connection()!;
      // IMMEDIATE takes the write lock now, where busy_timeout waits for another process's
      // transaction; a deferred one would fail SQLITE_BUSY at its first write without waiting.
      c.db.exec('BEGIN IMMEDIATE');
    } catch (err) {
      const error = failure(err);
      return { replies: jobs.map((j) => ({ id: j.id, error })), transactions: 0, unrun: true };
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
        if (!c.db.inTransaction) return this.#abandon(jobs, err);
        replies.push({ id: job.id, error: failure(err) });
      }
    }
    try {
      c.db.exec('COMMIT');
    } catch (err) {
      return this.#abandon(jobs, err);
    }
    return { replies, transactions: 1 };
  }

  /** The transaction failed: it is rolled back and every call of it fails with its error. */
  #abandon(jobs: Job[], err: unknown): Answer {
    try {
      if (this.#conn?.db.inTransaction) this.#conn.db.exec('ROLLBACK');
    } catch {
      // The connection may be unusable: the next batch opens a new one.
      this.close();
    }
    const error = failure(err);
    return { replies: jobs.map((j) => ({ id: j.id, error })), transactions: 0 };
  }

  #read(jobs: Job[]): Answer {
    const replies: Reply[] = [];
    let c: Connection | undefined;
    try {
      c = this.#connection();
    } catch (err) {
      const error = failure(err);
      return { replies: jobs.map((j) => ({ id: j.id, error })), transactions: 0 };
    }
    for (const job of jobs) {
      try {
        if (job.op === 'get') {
          const body = c === undefined ? undefined : (c.read!.get(job.key) as Uint8Array | undefined);
          replies.push({ id: job.id, body: body ?? null });
        } else if (job.op === 'list' || job.op === 'scan') {
          const to = upperBound(job.prefix);
          const after = job.after !== undefined && job.after >= job.prefix;
          const [from, statement] =
            job.op === 'list'
              ? [after ? c?.listAfter : c?.listFrom, 'keys' as const]
              : [after ? c?.scanAfter : c?.scanFrom, 'objects' as const];
          const rows = from === undefined ? [] : from.all(after ? job.after! : job.prefix, to, job.limit ?? -1);
          replies.push(
            statement === 'keys'
              ? { id: job.id, keys: rows as string[] }
              : { id: job.id, objects: rows as { key: string; body: Uint8Array }[] },
          );
        }
      } catch (err) {
        replies.push({ id: job.id, error: failure(err) });
      }
    }
    return { replies, transactions: 0 };
  }

  /** Closes the connection, if one is open (a writer's, closed last in the process, folds the WAL into the file). */
  close(): void {
    try {
      this.#conn?.db.close();
    } catch {
      // Closing a connection that failed: nothing more to do.
    }
    this.#conn = undefined;
  }
}

/**
 * The first string after every key that starts with `prefix`: keys are ASCII below 0x7f, so it is
 * the prefix with its last character incremented, and for the empty prefix 0x7f itself.
 */
function upperBound(prefix: string): string {
  if (prefix === '') return '\x7f';
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}
