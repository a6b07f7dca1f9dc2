/**
 * FileStore's temp files: a write's body goes to a temp file beside its object before the link
 * that creates the object. Their names hold `#`, which never occurs in a key, so listings never
 * report them; a write that crashed mid-way leaves one behind for sweepTempFiles.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { storageError } from '../kit/index.js';

/** Marks temp files; `#` never occurs in a store key. */
export const TEMP_MARK = '#';

/** This module instance's random tag (one per process or thread), and how many names it gave. */
const TAG = randomBytes(8).toString('hex');
let made = 0;

/**
 * A fresh temp file name beside `file`: a random tag drawn once, then a counter. Temp files are
 * opened O_EXCL, so a clash could only fail a write, never mix two; drawing random bytes for each
 * name cost ~4% of the main thread with thousands of engines writing.
 */
export function tempOf(file: string): string {
  return `${file}${TEMP_MARK}${TAG}-${(++made).toString(36)}.tmp`;
}

/**
 * Removes the temp files under `root` (those last written before `cutoff`, when given) and, with
 * `emptyDirs`, the directories left empty. Resolves how many files it removed; failures are
 * STORAGE errors of `op`.
 */
export async function removeTemps(
  root: string,
  op: string,
  cutoff: number | undefined,
  emptyDirs: boolean,
): Promise<number> {
  let removed = 0;
  const visit = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw storageError(op, dir, err);
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await visit(full);
      else if (entry.name.includes(TEMP_MARK) && entry.name.endsWith('.tmp')) {
        const stat = cutoff === undefined ? undefined : await fs.stat(full).catch(() => undefined);
        if (cutoff !== undefined && !(stat && stat.mtimeMs < cutoff)) continue;
        await fs.rm(full, { force: true });
        removed++;
      }
    }
    // Empty now unless a key is there (or was just written): then it stays.
    if (emptyDirs) await fs.rmdir(dir).catch(() => undefined);
  };
  await visit(root);
  return removed;
}
