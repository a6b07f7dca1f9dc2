/**
 * Group commit on PostgreSQL: the writes that arrive together (in one turn of the event loop, or
 * while the previous batch commits) go to the server as one statement, one transaction, each call
 * still getting its own result; and the answer of a statement lost with its connection, resolved.
 */
import { QUERY_TIMEOUT_MS, type PgPool, type PgPoolClient, type PgResult } from './driver.js';

/** One write: a create-if-absent, or a delete. */
export type Write = { op: 'put'; key: string; body: Buffer } | { op: 'delete'; key: string };

interface Queued {
  write: Write;
  resolve(created: boolean | undefined): void;
  reject(err: unknown): void;
}

/** At most this many writes in one statement (two parameters each, PostgreSQL takes 65,535). */
const MAX_BATCH = 1_000;
/** Writes join a batch while its bodies total less than this: one statement stays a few MB, not GB. */
const MAX_BATCH_BYTES = 16 * 1024 * 1024;
/** Rounds of read back and retry before a lost statement is reported as an unknown outcome. */
const MAX_ROUNDS = 4;
/** SQLSTATEs of a statement the server rolled back whole and may run again: deadlock, serialization failure. */
const ROLLED_BACK = new Set(['40P01', '40001']);

/** A statement sent on a connection that was lost before its answer came: it may or may not have committed. */
export class LostAnswer extends Error {
  constructor(cause: unknown) {
    super(`the connection was lost before the answer came (${(cause as Error)?.message ?? String(cause)})`, { cause });
    this.name = 'LostAnswer';
  }
}

/** The outcome is unknown after MAX_ROUNDS: reported to the caller, who treats it as any STORAGE failure. */
export class UnknownOutcome extends Error {
  constructor(what: string, cause: unknown) {
    super(`${what}: outcome unknown (${(cause as Error)?.message ?? String(cause)})`, { cause });
    this.name = 'UnknownOutcome';
  }
}

/**
 * Whether a failure of a statement that was sent leaves its outcome unknown: anything but an
 * error the server answered (a SQLSTATE), and the server's connection-class answers (08xxx, and
 * 57Pxx: the server shutting down or crashing) too.
 */
export function isLost(err: unknown): boolean {
  // The server's answers (pg's DatabaseError) carry a severity beside their SQLSTATE; a socket's
  // errors (EPIPE, ECONNRESET) and timeouts do not.
  const e = err as { code?: unknown; severity?: unknown } | undefined;
  const code = e?.code;
  if (typeof e?.severity === 'string' && typeof code === 'string')
    return code.startsWith('08') || code.startsWith('57P');
  return true;
}

/** Counts of GroupCommit's work. */
export interface CommitStats {
  transactions: number;
  writes: number;
  /** Statements whose answer was lost with their connection, resolved by reading back. */
  lostAnswers: number;
}

/** Runs batches of writes, one after the other, on a pool; see the module doc. */
export class GroupCommit {
  #queue: Queued[] = [];
  #running = false;
  #idle: (() => void)[] = [];
  readonly stats: CommitStats = { transactions: 0, writes: 0, lostAnswers: 0 };

  constructor(
    private readonly pool: PgPool,
    /** The table, quoted. */
    private readonly table: string,
    /** How long a statement may go unanswered before it is taken as lost (ms). */
    private readonly timeoutMs: number = QUERY_TIMEOUT_MS,
  ) {}

  /** Queues a write; resolves `created` for a put, undefined for a delete. */
  push(write: Write): Promise<boolean | undefined> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ write, resolve, reject });
      if (!this.#running) {
        this.#running = true;
        // After this turn's microtasks: the writes of one turn (other engines' commits) go together.
        setImmediate(() => void this.#drain());
      }
    });
  }

  /** Resolves once every queued write is answered. */
  idle(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        // What arrived while the previous batch committed is the next batch (up to MAX_BATCH writes
        // and MAX_BATCH_BYTES of bodies, at least one write).
        let n = 0;
        for (let bytes = 0; n < this.#queue.length && n < MAX_BATCH && (n === 0 || bytes < MAX_BATCH_BYTES); n++) {
          const write = this.#queue[n]!.write;
          if (write.op === 'put') bytes += write.body.byteLength;
        }
        const batch = this.#queue.splice(0, n);
        for (const run of runs(batch)) {
          try {
            if (run[0]!.write.op === 'put') await this.#creates(run);
            else await this.#deletes(run);
          } catch (err) {
            // Not expected (every failure is settled above): still, no call is left waiting.
            for (const q of run) q.reject(err);
          }
        }
      }
    } finally {
      this.#running = false;
      for (const resolve of this.#idle.splice(0)) resolve();
    }
  }

  /** A run of creates: one INSERT ... ON CONFLICT DO NOTHING of every key (the first call for a key), RETURNING those it inserted. */
  async #creates(run: Queued[]): Promise<void> {
    const first = new Map<string, Queued & { write: { op: 'put' } }>();
    for (const q of run) if (!first.has(q.write.key)) first.set(q.write.key, q as Queued & { write: { op: 'put' } });
    const items = [...first.values()];
    let outcome: Map<string, boolean | Error>;
    try {
      const result = await this.#insert(items, run.length);
      const inserted = new Set(result.rows.map((r) => r.key as string));
      outcome = new Map(items.map((q) => [q.write.key, inserted.has(q.write.key)]));
    } catch (err) {
      if (!(err instanceof LostAnswer)) {
        for (const q of run) q.reject(err);
        return;
      }
      this.stats.lostAnswers++;
      try {
        outcome = await this.#resolveCreates(items, err);
      } catch (definite) {
        for (const q of run) q.reject(definite);
        return;
      }
    }
    for (const q of run) {
      const o = outcome.get(q.write.key)!;
      // A later call for a key in the same run: the first one created it or found it there.
      if (first.get(q.write.key) !== q) {
        if (o instanceof Error) q.reject(o);
        else q.resolve(false);
      } else if (o instanceof Error) q.reject(o);
      else q.resolve(o);
    }
  }

  #insert(items: { write: { key: string; body: Buffer } }[], writes: number): Promise<PgResult> {
    const values: unknown[] = [];
    const rows: string[] = [];
    // In key order: two processes inserting overlapping keys then wait for each other in one order,
    // never in a cycle (a deadlock).
    const sorted = [...items].sort((a, b) => (a.write.key < b.write.key ? -1 : a.write.key > b.write.key ? 1 : 0));
    for (const { write } of sorted) {
      values.push(write.key, write.body);
      rows.push(`($${values.length - 1}, $${values.length})`);
    }
    return this.#statement(
      `INSERT INTO ${this.table} (key, body) VALUES ${rows.join(', ')} ON CONFLICT (key) DO NOTHING RETURNING key`,
      values,
      writes,
    );
  }

  /**
   * The creates of a statement whose answer was lost, once its backend has finished: read back,
   * a key that holds exactly our bytes was created by us, one that holds other bytes was there
   * already. When none holds our bytes and some are absent, the statement did not commit: it is
   * sent again (a create that meets our own earlier one, committed late, conflicts and the next
   * read back finds our bytes). A key absent although the statement committed (deleted since by
   * someone else) cannot be told apart: that call rejects with an unknown outcome.
   */
  async #resolveCreates(
    items: (Queued & { write: { op: 'put' } })[],
    lost: LostAnswer,
  ): Promise<Map<string, boolean | Error>> {
    let last: unknown = lost.cause;
    const keys = items.map((q) => q.write.key);
    for (let round = 0; round < MAX_ROUNDS; round++) {
      let held: Map<string, Buffer>;
      try {
        const { rows } = await this.pool.query({
          text: `SELECT key, body FROM ${this.table} WHERE key = ANY($1::text[])`,
          values: [keys],
          query_timeout: this.timeoutMs,
        });
        held = new Map(rows.map((r) => [r.key as string, r.body as Buffer]));
      } catch (err) {
        last = err;
        continue;
      }
      const ours = (q: (typeof items)[number]): boolean => held.get(q.write.key)?.equals(q.write.body) === true;
      const landed = items.some(ours);
      if (landed || items.every((q) => held.has(q.write.key))) {
        return new Map(
          items.map((q) => [
            q.write.key,
            ours(q)
              ? true
              : held.has(q.write.key)
                ? false
                : new UnknownOutcome(`create ${q.write.key} (committed, then deleted by another)`, last),
          ]),
        );
      }
      try {
        await this.#insert(items, items.length);
      } catch (err) {
        if (!(err instanceof LostAnswer)) throw err;
        last = err.cause;
      }
    }
    const err = new UnknownOutcome('create', last);
    return new Map(items.map((q) => [q.write.key, err]));
  }

  /** A run of deletes: one DELETE of every key. Lost, it is sent again: deleting is idempotent. */
  async #deletes(run: Queued[]): Promise<void> {
    const keys = [...new Set(run.map((q) => q.write.key))].sort();
    let last: unknown;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      try {
        await this.#statement(`DELETE FROM ${this.table} WHERE key = ANY($1::text[])`, [keys], run.length);
        for (const q of run) q.resolve(undefined);
        return;
      } catch (err) {
        if (!(err instanceof LostAnswer)) {
          for (const q of run) q.reject(err);
          return;
        }
        if (round === 0) this.stats.lostAnswers++;
        last = err.cause;
      }
    }
    const err = new UnknownOutcome('delete', last);
    for (const q of run) q.reject(err);
  }

  /**
   * One statement (its own transaction) on a connection of the pool. A failure after it was sent,
   * with no answer from the server, throws LostAnswer once the connection's backend has finished
   * with it (so that what it did is final before anyone reads back). A statement the server rolled
   * back as a deadlock or a serialization failure did nothing: it is sent again (a few times).
   */
  async #statement(text: string, values: unknown[], writes: number): Promise<PgResult> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      const ignore = (): void => {};
      client.on('error', ignore);
      let result: PgResult;
      try {
        result = await client.query({ text, values, query_timeout: this.timeoutMs });
      } catch (err) {
        const lost = isLost(err);
        client.off('error', ignore);
        client.release(lost ? (err as Error) : undefined);
        if (lost) {
          // Only once the backend that had the statement is gone is what it did final; when that
          // cannot be told, sending it again (or reading back) could race the original: unknown.
          if (await this.#backendDone(client)) throw new LostAnswer(err);
          throw new UnknownOutcome('a statement whose connection was lost, on a backend not known to be gone', err);
        }
        if (attempt < MAX_ROUNDS && ROLLED_BACK.has((err as { code?: string }).code ?? '')) continue;
        throw err;
      }
      client.off('error', ignore);
      client.release();
      this.stats.transactions++;
      this.stats.writes += writes;
      return result;
    }
  }

  /**
   * Waits (bounded, 5 s) until the server's backend of a lost connection is gone: idle, it may
   * still have our statement unread in its socket, so only its exit makes what it did final. A
   * backend whose socket was closed exits once it has read it to the end; one still there after
   * 2 s (a half-open connection) is terminated. Its pid comes from the server at
   * connect time; behind a pooler in transaction mode it names no one backend (see the docs).
   */
  async #backendDone(client: PgPoolClient): Promise<boolean> {
    const pid = client.processID;
    if (typeof pid !== 'number') return false;
    const deadline = Date.now() + 5_000;
    let terminated = false;
    const query = (text: string) => this.pool.query({ text, values: [pid], query_timeout: 5_000 });
    while (Date.now() < deadline) {
      try {
        const { rows } = await query('SELECT 1 FROM pg_stat_activity WHERE pid = $1');
        if (rows.length === 0) return true;
        if (!terminated && Date.now() > deadline - 3_000) {
          terminated = true;
          await query('SELECT pg_terminate_backend($1)');
        }
      } catch {
        // The server out of reach (or refusing connections): the backend cannot be known gone.
        return false;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return false;
  }
}

/** A batch cut into runs of creates and runs of deletes, in the calls' order. */
function runs(batch: Queued[]): Queued[][] {
  const out: Queued[][] = [];
  for (const q of batch) {
    const last = out[out.length - 1];
    if (last !== undefined && last[0]!.write.op === q.write.op) last.push(q);
    else out.push([q]);
  }
  return out;
}
