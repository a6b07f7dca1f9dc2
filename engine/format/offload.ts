/**
 * Frames of large payloads are assembled on a worker thread, so that compressing and checksumming
 * a big base (about 2 ms for 500 KB, 20 ms for 5 MB) does not block the caller's event loop. One
 * worker serves every engine of the process; it is started on first use, and does not keep the
 * process alive while idle. Should it fail to start or die, frames are built on the calling thread
 * instead: the bytes are the same either way, so where a frame was built never changes what is stored.
 */
import { Worker } from 'node:worker_threads';
import { assembleFrame, type Seal } from './assemble.js';
import { checkFrameSize, encodeHeader, kindCode, storedVersion, type FrameHeader, type FrameKind } from './frame.js';
import type { FrameJob, FrameReply } from './frame-worker.js';
import { encodeValueInSlices } from './sliced.js';
import type { SealingKey } from './keyring.js';
import type { LeafResolver } from './values.js';

/** Payloads at least this large go to the worker; smaller ones cost less to build than to hand over. */
export const OFFLOAD_MIN_BYTES = 64 * 1024;

interface Pending {
  resolve(frame: Uint8Array): void;
  reject(err: Error): void;
}

class FrameWorker {
  #worker: Worker | undefined;
  #failed = false;
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();

  /** Builds the frame on the worker; falls back to this thread when the worker is unavailable. */
  async assemble(
    kind: number,
    version: number,
    head: Uint8Array,
    raw: Uint8Array,
    seal: Seal | undefined,
  ): Promise<Uint8Array> {
    const worker = this.#start();
    if (worker === undefined) return assembleFrame(kind, version, head, raw, seal);
    const id = this.#nextId++;
    // The payload is copied into a buffer of its own and transferred (not cloned): the caller keeps its bytes.
    const own = new Uint8Array(raw.byteLength);
    own.set(raw);
    const job: FrameJob = { id, kind, version, head, raw: own, ...(seal !== undefined && { seal }) };
    const frame = new Promise<Uint8Array>((resolve, reject) => this.#pending.set(id, { resolve, reject }));
    if (this.#pending.size === 1) worker.ref();
    worker.postMessage(job, [own.buffer]);
    try {
      return await frame;
    } catch {
      // The worker failed this job or died: build it here (from the caller's bytes, which were not transferred).
      return assembleFrame(kind, version, head, raw, seal);
    }
  }

  #start(): Worker | undefined {
    if (this.#worker !== undefined || this.#failed) return this.#worker;
    try {
      const worker = new Worker(new URL('./frame-worker.js', import.meta.url));
      worker.unref();
      worker.on('message', (reply: FrameReply) => this.#settle(reply));
      worker.on('error', (err) => this.#die(err));
      worker.on('exit', (code) => this.#die(new Error(`frame worker exited with code ${code}`)));
      this.#worker = worker;
    } catch {
      this.#failed = true;
    }
    return this.#worker;
  }

  #settle(reply: FrameReply): void {
    const pending = this.#pending.get(reply.id);
    if (pending === undefined) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#worker?.unref();
    if ('frame' in reply)
      pending.resolve(Buffer.from(reply.frame.buffer, reply.frame.byteOffset, reply.frame.byteLength));
    else pending.reject(new Error(reply.error));
  }

  /** The worker is gone: every job in flight is rebuilt by its caller, and no new worker is started. */
  #die(err: Error): void {
    if (this.#worker === undefined) return;
    this.#worker = undefined;
    this.#failed = true;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(err);
  }
}

const shared = new FrameWorker();

/** Assembles a frame, on the frame worker when the payload is large. */
export function assembleFrameAsync(
  kind: number,
  version: number,
  head: Uint8Array,
  raw: Uint8Array,
  seal?: Seal,
): Promise<Uint8Array> {
  if (raw.byteLength < OFFLOAD_MIN_BYTES) return Promise.resolve(assembleFrame(kind, version, head, raw, seal));
  return shared.assemble(kind, version, head, raw, seal);
}

/**
 * Encodes a frame as encodeFrame does (sealed with `sealing` when given), with its payload in
 * slices and a large payload's frame built, and sealed, on the worker.
 */
export async function encodeFrameOffThread(
  kind: FrameKind,
  header: FrameHeader,
  payload: unknown,
  resolve: LeafResolver | undefined,
  version: 1 | 2 = 1,
  sealing?: SealingKey,
): Promise<Uint8Array> {
  return frameOffThread(kind, header, await encodeValueInSlices(payload, resolve), version, sealing);
}

/** As encodeFrameOffThread, from a payload already encoded (`raw`, msgpack). */
export function frameOffThread(
  kind: FrameKind,
  header: FrameHeader,
  raw: Uint8Array,
  version: 1 | 2 | 4,
  sealing: SealingKey | undefined,
): Promise<Uint8Array> {
  checkFrameSize(header, raw);
  const { head, seal } = encodeHeader(header, sealing);
  return assembleFrameAsync(kindCode(kind), storedVersion(version, sealing, header), head, raw, seal);
}
