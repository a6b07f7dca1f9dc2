/**
 * The entry point of a FileStore write thread (create-pool.ts): creates objects with blocking
 * system calls, one at a time, exactly as FileStore.putIfAbsent does on Node's thread pool: the
 * body goes to a temp file, which is fsynced and hard-linked to its final name (link fails if the
 * name exists: the create-if-absent), then the directory is fsynced and the temp file removed.
 * A blocking fsync holds only this thread, so several of them keep several fsyncs in flight,
 * which the filesystem's journal commits together.
 */
import { closeSync, constants, fsyncSync, linkSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';

/** A request: the temp file to write, the object's file, its directory, the body, and whether to fsync. */
export interface CreateJob {
  id: number;
  temp: string;
  file: string;
  dir: string;
  body: Uint8Array;
  fsync: boolean;
}

/**
 * A reply: whether this job created the object, or the error of the first call that failed (its
 * code, such as ENOENT when the directory was removed behind the store's back, and message).
 */
export type CreateReply =
  { id: number; created: boolean } | { id: number; error: { code: string | undefined; message: string } };

parentPort?.on('message', (job: CreateJob) => {
  let reply: CreateReply;
  try {
    reply = { id: job.id, created: create(job) };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    reply = {
      id: job.id,
      error: { code: typeof e?.code === 'string' ? e.code : undefined, message: String(e?.message ?? e) },
    };
  }
  parentPort!.postMessage(reply);
});

function create(job: CreateJob): boolean {
  const fd = openSync(job.temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644);
  try {
    try {
      for (let at = 0; at < job.body.byteLength;) at += writeSync(fd, job.body, at, job.body.byteLength - at);
      if (job.fsync) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(job.temp, job.file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    }
    if (job.fsync) {
      const dir = openSync(job.dir, constants.O_RDONLY);
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    }
    return true;
  } finally {
    try {
      unlinkSync(job.temp);
    } catch {
      // Already gone, or left for sweepTempFiles: a temp file is never an object.
    }
  }
}
