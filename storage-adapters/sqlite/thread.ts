/**
 * The main thread's side of one SqliteStore thread (worker.ts): started on first use, one message
 * out for what a turn of the event loop asked of it, one message back per batch it ran. It holds
 * the process open only while calls are in flight. A thread that dies fails the calls it held
 * (their outcome unknown, as after any store error); the next call starts a new one.
 */
import { Worker } from 'node:worker_threads';
import type { Answer, Failure, Job, Reply, ThreadData } from './worker.js';

/** What a call resolves to: the reply the thread sent for it. */
export type Outcome = Exclude<Reply, { error: Failure }>;

/** A call that failed in the thread: SQLite's message and code, for the store to name. */
export class ThreadError extends Error {
  constructor(
    message: string,
    readonly sqliteCode: string | undefined,
  ) {
    super(message);
  }
}

interface Pending {
  resolve(reply: Outcome): void;
  reject(err: Error): void;
}

type Call = Job extends infer J ? (J extends Job ? Omit<J, 'id'> : never) : never;

export class StoreThread {
  readonly #data: ThreadData;
  readonly #onAnswer: (answer: Answer) => void;
  #worker: Worker | undefined;
  readonly #pending = new Map<number, Pending>();
  #outbox: Job[] = [];
  #transfer: ArrayBuffer[] = [];
  #nextId = 1;
  #closing: Promise<void> | undefined;
  /** Whether close() was called: calls are refused from then on. */
  #refusing = false;

  constructor(data: ThreadData, onAnswer: (answer: Answer) => void) {
    this.#data = data;
    this.#onAnswer = onAnswer;
  }

  /** Sends one call (with the buffer to hand over, a put's copy of its body); resolves its reply. */
  call(job: Call, transfer?: ArrayBuffer): Promise<Outcome> {
    if (this.#refusing) return Promise.reject(new ThreadError('the store is closed', undefined));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#outbox.push({ ...job, id } as Job);
      if (transfer !== undefined) this.#transfer.push(transfer);
      if (this.#outbox.length === 1) queueMicrotask(this.#flush);
    });
  }

  readonly #flush = (): void => {
    const jobs = this.#outbox;
    const transfer = this.#transfer;
    this.#outbox = [];
    this.#transfer = [];
    if (jobs.length === 0) return;
    let worker: Worker;
    try {
      worker = this.#start();
      worker.postMessage(jobs, transfer);
    } catch (err) {
      // Not sent, so none of them ran.
      for (const job of jobs) this.#take(job.id)?.reject(err as Error);
      return;
    }
    worker.ref();
  };

  #start(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    // No flags of this process (--input-type, loaders): the thread runs one plain module.
    const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: this.#data, execArgv: [] });
    worker.unref();
    worker.on('message', (message: Answer | { ready: true } | { closed: true }) => {
      if (!('replies' in message)) return;
      this.#onAnswer(message);
      for (const reply of message.replies) {
        const pending = this.#take(reply.id);
        if (pending === undefined) continue;
        if ('error' in reply) pending.reject(new ThreadError(reply.error.message, reply.error.code));
        else pending.resolve(reply);
      }
    });
    const die = (err: Error): void => {
      if (this.#worker !== worker) return;
      this.#worker = undefined;
      worker.unref();
      const held = [...this.#pending.values()];
      this.#pending.clear();
      // Only once the thread has stopped: a transaction it was running (after a message it could
      // not read, it still runs) has then committed or rolled back, so a caller that reads back
      // after the failure sees the outcome for good.
      void worker
        .terminate()
        .catch(() => undefined)
        .then(() => {
          for (const p of held) p.reject(err);
        });
    };
    worker.on('error', die);
    worker.on('messageerror', die);
    worker.on('exit', (code) => die(new Error(`the SqliteStore ${this.#data.role} thread exited with code ${code}`)));
    this.#worker = worker;
    return worker;
  }

  #take(id: number): Pending | undefined {
    const pending = this.#pending.get(id);
    if (pending === undefined) return undefined;
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker?.unref();
    return pending;
  }

  /** Refuses calls from now on (those sent are still answered); close() does it too. */
  refuse(): void {
    this.#refusing = true;
  }

  /** Answers every call sent, closes the connection (a last checkpoint of the WAL) and stops the thread. */
  close(): Promise<void> {
    this.#refusing = true;
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#flush();
    const worker = this.#worker;
    if (worker === undefined) return;
    worker.ref();
    await new Promise<void>((resolve) => {
      worker.on('message', (message: object) => {
        if ('closed' in message) resolve();
      });
      worker.on('exit', () => resolve());
      worker.postMessage({ close: true });
    });
    this.#worker = undefined;
    await worker.terminate();
  }
}
