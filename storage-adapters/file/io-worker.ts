/**
 * The entry point of a FileStore I/O thread (io-pool.ts): reads whole objects, and creates
 * objects with blocking system calls, one at a time, exactly as FileStore does on Node's thread
 * pool. A create: the
 * body goes to a temp file, which is fsynced and hard-linked to its final name (link fails if the
 * name exists: the create-if-absent), then the directory is fsynced and the temp file removed.
 * A blocking fsync holds only this thread, so several of them keep several fsyncs in flight,
 * which the filesystem's journal commits together.
 */
import {
  closeSync,
  constants,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  rmdirSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import { parentPort } from 'node:worker_threads';

/** A create: the temp file to write, the object's file, its directory, the body, and whether to fsync. */
export interface CreateJob {
  op: 'create';
  id: number;
  temp: string;
  file: string;
  dir: string;
  body: Uint8Array;
  fsync: boolean;
}

/** A read of a whole file. */
export interface ReadJob {
  op: 'read';
  id: number;
  file: string;
}

/**
 * A delete: unlink the object's file, then with `removeDir` remove its directory should that
 * leave it empty, then fsync the directory (its parent when it is gone) when asked.
 */
export interface DeleteJob {
  op: 'delete';
  id: number;
  file: string;
  dir: string;
  removeDir: boolean;
  fsync: boolean;
}

/**
 * A reply (sent in arrays, see below): what the job came to (whether a create created the
 * object; a read's bytes, or null when there is no such file; that a delete is done, and whether
 * it removed the directory), or the error of the first call that failed (its code, such as ENOENT
 * when a directory was removed behind the store's back, its message, and whether it was the open
 * of a create's temp file, before which nothing was written).
 */
export type IoReply =
  | { id: number; created: boolean }
  | { id: number; body: Uint8Array | null }
  | { id: number; deleted: true; removed: boolean }
  | { id: number; error: { code: string | undefined; message: string; atOpen: boolean } };

/**
 * A message is the jobs of one turn of the main thread's event loop. Replies go back together,
 * except that those ready are sent before a create or a delete starts, and a create's or a
 * delete's as soon as it is done: no reply waits for another job's fsync.
 */
parentPort?.on('message', (jobs: (CreateJob | ReadJob | DeleteJob)[]) => {
  let replies: IoReply[] = [];
  let transfer: ArrayBuffer[] = [];
  const send = (): void => {
    if (replies.length === 0) return;
    parentPort!.postMessage(replies, transfer);
    replies = [];
    transfer = [];
  };
  for (const job of jobs) {
    if (job.op !== 'read') send();
    replies.push(run(job, transfer));
    if (job.op !== 'read') send();
  }
  send();
});
// Listening: jobs sent before this could not have run (io-pool.ts hands them back if it dies first).
parentPort?.postMessage({ ready: true });

/** Runs one job; a read's bytes join `transfer` (handed over, not copied). */
function run(job: CreateJob | ReadJob | DeleteJob, transfer: ArrayBuffer[]): IoReply {
  try {
    if (job.op === 'create') return { id: job.id, created: create(job) };
    if (job.op === 'delete') return { id: job.id, deleted: true, removed: remove(job) };
    const body = read(job.file);
    if (body !== null) transfer.push(body.buffer as ArrayBuffer);
    return { id: job.id, body };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return {
      id: job.id,
      error: {
        code: typeof e?.code === 'string' ? e.code : undefined,
        message: String(e?.message ?? e),
        atOpen: e instanceof OpenFailed,
      },
    };
  }
}

/** The file's bytes in a buffer of their own (transferable), or null when it does not exist. */
function read(file: string): Uint8Array | null {
  try {
    const bytes = readFileSync(file);
    // readFileSync may hand out a slice of a shared pool: copy into a buffer of its own.
    return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : new Uint8Array(bytes);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The open of a create's temp file failed: nothing was written. */
class OpenFailed extends Error {
  readonly code: string | undefined;
  constructor(err: NodeJS.ErrnoException) {
    super(err.message);
    this.code = err.code;
  }
}

/**
 * Unlinks the file (ENOENT when there is none), and the directory when asked and empty, and makes
 * that durable (see syncUnlinked in dirs.ts); returns whether it removed the directory.
 */
function remove(job: DeleteJob): boolean {
  unlinkSync(job.file);
  let removed = false;
  if (job.removeDir) {
    try {
      // rmdir refuses a directory that is not empty: that is the check.
      rmdirSync(job.dir);
      removed = true;
    } catch {
      // Not empty, or already gone.
    }
  }
  if (job.fsync) {
    try {
      syncDir(removed ? dirname(job.dir) : job.dir);
    } catch (err) {
      // Removed by another process since: its removal is what must be durable.
      if (removed || (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      syncDir(dirname(job.dir));
    }
  }
  return removed;
}

function syncDir(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function create(job: CreateJob): boolean {
  let fd: number;
  try {
    fd = openSync(job.temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644);
  } catch (err) {
    throw new OpenFailed(err as NodeJS.ErrnoException);
  }
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
    if (job.fsync) syncDir(job.dir);
    return true;
  } finally {
    try {
      unlinkSync(job.temp);
    } catch {
      // Already gone, or left for sweepTempFiles: a temp file is never an object.
    }
  }
}
