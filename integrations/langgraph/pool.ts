/**
 * The open threads of a StatefoldSaver: each holds an engine (the stream's writer), so at most
 * `max` are kept, and the least recently used idle one is closed when one more opens. A thread
 * with work queued or an effect running is never closed under it; a thread opened again while
 * its last writer is still closing starts after that close, so the two writers never fence each other.
 */
import type { EngineOptions } from '../../engine/index.js';
import { streamOf } from './codec.js';
import { Thread } from './thread.js';

export class Threads {
  readonly #open = new Map<string, Thread>();
  /** Streams whose closed thread's writer is still closing. */
  readonly #closing = new Map<string, Promise<void>>();
  /** A deleteThread in progress, by thread id (see `deleting`). */
  readonly #deleting = new Map<string, Promise<void>>();

  constructor(
    private readonly prefix: string,
    private readonly engine: Omit<EngineOptions, 'stream'>,
    private readonly max: number,
  ) {}

  /** The open thread of (thread, ns), made the most recently used; opened if it is not. */
  get(thread: string, ns: string): Thread {
    const stream = streamOf(this.prefix, thread, ns);
    let t = this.#open.get(stream);
    if (t !== undefined) this.#open.delete(stream);
    else t = this.#make(stream, thread, ns);
    this.#open.set(stream, t);
    if (this.#open.size > this.max) {
      for (const [oldest, idle] of this.#open) {
        if (idle === t || idle.busy) continue;
        this.#open.delete(oldest);
        this.#close(oldest, idle).catch(() => undefined);
        break;
      }
      // When every other thread is busy, they all stay open; a later call closes one once idle.
    }
    return t;
  }

  /** A thread to read (list): the open one if there is one, else one that is not kept open. */
  reader(thread: string, ns: string): Thread {
    const stream = streamOf(this.prefix, thread, ns);
    return this.#open.get(stream) ?? this.#make(stream, thread, ns);
  }

  #make(stream: string, thread: string, ns: string): Thread {
    const { encryption, storeTimeoutMs, schema } = this.engine;
    const reading = { encryption, storeTimeoutMs, ...(schema !== undefined && { schema }) };
    return new Thread(stream, thread, ns, this.engine, reading, this.#closing.get(stream));
  }

  /** Closes `t`'s writer after what is queued on it; a thread opened on `stream` meanwhile waits for it. */
  #close(stream: string, t: Thread): Promise<void> {
    const closing = t.release().finally(() => {
      if (this.#closing.get(stream) === settled) this.#closing.delete(stream);
    });
    const settled = closing.catch(() => undefined);
    this.#closing.set(stream, settled);
    return closing;
  }

  /** Closes the thread of `stream` if it is open, and waits until its writer is closed. */
  async drop(stream: string): Promise<void> {
    const t = this.#open.get(stream);
    this.#open.delete(stream);
    if (t !== undefined) await this.#close(stream, t).catch(() => undefined);
    await this.#closing.get(stream);
  }

  /**
   * Runs `deletion` of thread id `thread` after any deletion of it called before; calls on the
   * thread made meanwhile wait for it (`afterDelete`), and those made before it are waited for
   * (dropping a thread's writer waits for what is queued on it): a call runs in call order.
   */
  async deleting(thread: string, deletion: () => Promise<void>): Promise<void> {
    const before = this.#deleting.get(thread);
    const run = (async () => {
      await before?.catch(() => undefined);
      await deletion();
    })();
    this.#deleting.set(thread, run);
    try {
      await run;
    } finally {
      if (this.#deleting.get(thread) === run) this.#deleting.delete(thread);
    }
  }

  /**
   * A deletion of `thread` called before and not done, to wait for (settles when it does, its
   * outcome being its caller's); undefined when there is none, so that a call with nothing to
   * wait for queues at once, in call order.
   */
  deletionOf(thread: string): Promise<void> | undefined {
    return this.#deleting.get(thread)?.then(
      () => undefined,
      () => undefined,
    );
  }

  /** Closes every open thread's writer, after what is queued on each; rejects with the first failure once all are closed. */
  async close(): Promise<void> {
    const open = [...this.#open];
    this.#open.clear();
    const closed = await Promise.allSettled([
      ...open.map(([stream, t]) => this.#close(stream, t)),
      ...this.#closing.values(),
    ]);
    const failed = closed.find((c) => c.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }
}
