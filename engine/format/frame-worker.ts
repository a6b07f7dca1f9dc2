/**
 * The frame worker's entry point: assembles frames (lz4 compression and checksum) off the main
 * thread for offload.ts. It loads assemble.js alone, not the codec or the engine.
 */
import { parentPort } from 'node:worker_threads';
import { assembleFrame, type Seal } from './assemble.js';

/** A request: job id, frame kind code, format version, encoded header, raw payload, and the seal of a sealed frame. */
export interface FrameJob {
  id: number;
  kind: number;
  version: number;
  head: Uint8Array;
  raw: Uint8Array;
  seal?: Seal;
}

/** A reply: the frame, or why it could not be built. */
export type FrameReply = { id: number; frame: Uint8Array } | { id: number; error: string };

parentPort?.on('message', (job: FrameJob) => {
  let reply: FrameReply;
  try {
    reply = { id: job.id, frame: assembleFrame(job.kind, job.version, job.head, job.raw, job.seal, true) };
  } catch (err) {
    parentPort!.postMessage({ id: job.id, error: String((err as Error)?.message ?? err) } satisfies FrameReply);
    return;
  }
  parentPort!.postMessage(reply, [(reply.frame as Uint8Array).buffer as ArrayBuffer]);
});
