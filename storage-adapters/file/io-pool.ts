/**
 * I/O threads for FileStore: a create-if-absent is a temp file, two fsyncs, a link and an
 * unlink; a read is an open, a stat, a read and a close. On Node's own thread pool (4 threads unless UV_THREADPOOL_SIZE says otherwise) at most
 * four of those calls run at once, and each of the nine completions costs the main thread a
 * callback. With thousands of engines on one FileStore, both limits showed: fsync here
 * commits ~4,300 objects/s from 4 threads and ~6,100/s from 16, and the completions competed with
 * the engines' captures for the one main thread.
 *
 * So creates, reads and deletes go to worker threads that make the calls blocking (io-worker.ts): one
 * message out per thread for what one turn of the event loop asked of it, replies back together
 * (a create's or a delete's at once), and as many fsyncs in flight as threads. The threads are shared by
 * every FileStore of the process, started one at a time as writes in flight need them, up to the
 * largest `ioThreads` any FileStore asked for, and they do not keep the process alive while idle.
 *
 * No thread starts before the load needs one (see `route`): starting one costs tens of
 * milliseconds of a 2-core machine, most of a fresh process's resume, while one agent's few calls
 * in flight are served as fast by Node's own pool. Reads never start a thread; writes start the
 * first when more than HERE_LIMIT are in flight on the caller's side.
 *
 * Should one fail to start, the writes sent to it are made on Node's fs instead (they never ran);
 * should one die, the writes it held fail (their outcome unknown, as any store error's). Either
 * way no thread is started again.
 */
import { Worker } from 'node:worker_threads';
import type { CreateJob, DeleteJob, IoReply, ReadJob } from './io-worker.js';

interface IoThread {
  worker: Worker;
  /** Jobs sent to it and not yet answered. */
  load: number;
  /** Whether the thread's script loaded and listens (before that, it has run nothing). */
  ready: boolean;
}

/** No I/O thread ran the job (none could start): the caller does it itself. */
export class IoThreadUnavailable extends Error {}

interface Pending {
  thread: IoThread;
  resolve(value: boolean | Uint8Array | undefined): void;
  reject(err: Error): void;
}

/** A job waiting for the end of this turn of the event loop, to be sent with the others. */
interface Outgoing extends Omit<Pending, 'thread'> {
  job: CreateJob | ReadJob | DeleteJob;
  /** A create's body, handed over to the thread. */
  transfer?: ArrayBuffer | undefined;
}

/** The default of `FileStoreOptions.ioThreads`. */
export const DEFAULT_IO_THREADS = 16;

/**
 * Writes in flight on Node's own fs before the first I/O thread starts: Node's thread pool runs
 * four calls at once (UV_THREADPOOL_SIZE), so up to four the caller's side is not yet queueing.
 */
export const HERE_LIMIT = 4;

class IoPool {
  readonly #threads: IoThread[] = [];
  readonly #pending = new Map<number, Pending>();
  #outbox: Outgoing[] = [];
  #nextId = 1;
  #failed = false;
  /** The most threads any FileStore asked for. */
  #max = 0;

  /** Calls the callers make on Node's fs themselves (route said no) and that have not ended. */
  #here = 0;

  /** Whether creates can go to threads (none failed to start or died, or some still run). */
  get available(): boolean {
    return !this.#failed || this.#threads.length > 0;
  }

  /** Threads started and not gone (tests and diagnostics). */
  get threads(): number {
    return this.#threads.length;
  }

  /**
   * Whether a call should go to a thread now (`limit`: the store's ioThreads). A read goes only to
   * a thread already listening: a resume reads a chain once and should not wait for one to start.
   * A write or delete goes once a thread runs, or when more than HERE_LIMIT are in flight here.
   * A caller told no makes the call itself inside `here`, so that the count is right.
   */
  route(op: 'read' | 'write', limit: number): boolean {
    if (limit <= 0 || !this.available) return false;
    if (op === 'read') return this.#threads.some((s) => s.ready);
    return this.#threads.length > 0 || this.#here >= HERE_LIMIT;
  }

  /** Runs a call the caller makes on Node's fs itself, counted as in flight here. */
  async here<T>(call: () => Promise<T>): Promise<T> {
    this.#here++;
    try {
      return await call();
    } finally {
      this.#here--;
    }
  }

  /** Creates an object on an I/O thread; resolves whether this call created it. `limit`: the store's ioThreads. */
  create(job: Omit<CreateJob, 'id' | 'op'>, limit: number): Promise<boolean> {
    return this.#send({ ...job, op: 'create' }, limit) as Promise<boolean>;
  }

  /** Reads a whole file on an I/O thread; resolves undefined when there is none. */
  read(file: string, limit: number): Promise<Uint8Array | undefined> {
    return this.#send({ op: 'read', file }, limit) as Promise<Uint8Array | undefined>;
  }

  /**
   * Deletes a file on an I/O thread (rejects ENOENT when there is none), and its directory when
   * asked and left empty, fsyncing when asked; resolves whether it removed the directory.
   */
  delete(job: Omit<DeleteJob, 'id' | 'op'>, limit: number): Promise<boolean> {
    return this.#send({ ...job, op: 'delete' }, limit) as Promise<boolean>;
  }

  #send(
    job: Omit<CreateJob, 'id'> | Omit<ReadJob, 'id'> | Omit<DeleteJob, 'id'>,
    limit: number,
  ): Promise<boolean | Uint8Array | undefined> {
    this.#max = Math.max(this.#max, limit);
    const id = this.#nextId++;
    let sent: Outgoing['job'];
    let transfer: ArrayBuffer | undefined;
    if (job.op === 'create') {
      // A copy of its own, transferred: a pool slice would otherwise be cloned with its whole
      // slab. A body that cannot be read (a detached buffer) throws here, before anything is queued.
      const body = new Uint8Array(job.body);
      sent = { ...job, body, id };
      transfer = body.buffer as ArrayBuffer;
    } else sent = { ...job, id };
    return new Promise((resolve, reject) => {
      this.#outbox.push({ job: sent, transfer, resolve, reject });
      if (this.#outbox.length === 1) queueMicrotask(this.#flush);
    });
  }

  /**
   * Sends what this turn of the event loop asked for, one message per thread: the reads together
   * to the least loaded thread (an open reads a chain at once; each read is short), each create
   * and delete to the least loaded thread at its turn (their fsyncs wait in parallel). A message
   * and the thread's wake-up cost the main thread about as much as a read itself did.
   */
  readonly #flush = (): void => {
    const outbox = this.#outbox;
    this.#outbox = [];
    const batches = new Map<IoThread, Outgoing[]>();
    let readThread: IoThread | undefined;
    for (const out of outbox) {
      const thread = out.job.op === 'read' ? (readThread ??= this.#thread()) : this.#thread();
      if (thread === undefined) {
        out.reject(new IoThreadUnavailable('no FileStore I/O thread could start'));
        continue;
      }
      this.#pending.set(out.job.id, { thread, resolve: out.resolve, reject: out.reject });
      if (thread.load++ === 0) thread.worker.ref();
      const batch = batches.get(thread);
      if (batch === undefined) batches.set(thread, [out]);
      else batch.push(out);
    }
    for (const [thread, batch] of batches) {
      const transfer: ArrayBuffer[] = [];
      for (const out of batch) if (out.transfer !== undefined) transfer.push(out.transfer);
      try {
        thread.worker.postMessage(
          batch.map((out) => out.job),
          transfer,
        );
      } catch (err) {
        // Not sent, so none of them ran: each fails with the error, and the thread is as before.
        for (const out of batch) this.#take(out.job.id)?.reject(err as Error);
      }
    }
  };

  /** The least loaded thread; a new one when every thread is busy and the limit allows. */
  #thread(): IoThread | undefined {
    let best: IoThread | undefined;
    for (const s of this.#threads) if (best === undefined || s.load < best.load) best = s;
    if (best !== undefined && (best.load === 0 || this.#threads.length >= this.#max)) return best;
    if (this.#failed) return best;
    let worker: Worker;
    try {
      // No flags of this process (--input-type, loaders): the thread runs one plain module.
      worker = new Worker(new URL('./io-worker.js', import.meta.url), { execArgv: [] });
    } catch {
      this.#failed = true;
      return best;
    }
    worker.unref();
    const thread: IoThread = { worker, load: 0, ready: false };
    // 'online' comes before the script loads: the thread says itself when it listens.
    worker.on('message', (replies: IoReply[] | { ready: true }) => {
      if ('ready' in replies) thread.ready = true;
      else for (const reply of replies) this.#settle(reply);
    });
    worker.on('messageerror', (err) => this.#die(thread, err));
    worker.on('error', (err) => this.#die(thread, err));
    worker.on('exit', (code) => this.#die(thread, new Error(`FileStore I/O thread exited with code ${code}`)));
    this.#threads.push(thread);
    return thread;
  }

  /** Removes a job from those pending, and from its thread's load; undefined when it is not pending. */
  #take(id: number): Pending | undefined {
    const pending = this.#pending.get(id);
    if (pending === undefined) return undefined;
    this.#pending.delete(id);
    if (--pending.thread.load === 0) pending.thread.worker.unref();
    return pending;
  }

  #settle(reply: IoReply): void {
    const pending = this.#take(reply.id);
    if (pending === undefined) return;
    if ('created' in reply) pending.resolve(reply.created);
    else if ('deleted' in reply) pending.resolve(reply.removed);
    else if ('body' in reply)
      pending.resolve(
        reply.body === null ? undefined : Buffer.from(reply.body.buffer, reply.body.byteOffset, reply.body.byteLength),
      );
    else {
      const err = new Error(reply.error.message) as NodeJS.ErrnoException & { atOpen: boolean };
      if (reply.error.code !== undefined) err.code = reply.error.code;
      err.atOpen = reply.error.atOpen;
      pending.reject(err);
    }
  }

  /**
   * A thread is gone, and no thread is started again. Its writes in flight fail: with
   * IoThreadUnavailable when it never started (they never ran: the caller writes them itself),
   * else with the error (they may or may not have landed, as after any store error).
   */
  #die(thread: IoThread, err: Error): void {
    const at = this.#threads.indexOf(thread);
    if (at < 0) return;
    this.#threads.splice(at, 1);
    this.#failed = true;
    // After a message it could not read, the thread still runs: it must not hold the process.
    thread.worker.unref();
    void thread.worker.terminate().catch(() => undefined);
    const failure = thread.ready ? err : new IoThreadUnavailable(`no FileStore I/O thread could start: ${err.message}`);
    for (const [id, p] of this.#pending) {
      if (p.thread !== thread) continue;
      this.#pending.delete(id);
      p.reject(failure);
    }
  }
}

/** The I/O threads of this process, shared by every FileStore. */
export const ioPool = new IoPool();
