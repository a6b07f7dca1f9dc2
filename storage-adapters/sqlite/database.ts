/**
 * The database file, as a thread of SqliteStore opens it: the binding, the checks that tell a
 * damaged file from a new one, the pragmas and the one table. Runs on the store's threads only.
 */
import { closeSync, mkdirSync, openSync, readSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';

/** The part of better-sqlite3's API the store uses (the package ships no types of its own). */
export interface Database {
  readonly inTransaction: boolean;
  pragma(source: string, options?: { simple: boolean }): unknown;
  exec(source: string): unknown;
  prepare(source: string): Statement;
  close(): void;
}

/** A prepared statement of better-sqlite3. */
export interface Statement {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  pluck(toggle?: boolean): Statement;
}

type DatabaseClass = new (
  file: string,
  options: { timeout: number; fileMustExist: boolean; readonly?: boolean },
) => Database;

/** How the store's threads open the file, from `SqliteStoreOptions`. */
export interface OpenSettings {
  path: string;
  synchronous: 'FULL' | 'NORMAL';
  busyTimeoutMs: number;
}

/** An error found in the file itself, before SQLite read it: reported as CORRUPT. */
export class DamagedFile extends Error {
  readonly code = 'STATEFOLD_DAMAGED';
}

// better-sqlite3 is CommonJS; require also keeps it out of the main thread's module graph.
const require = createRequire(import.meta.url);
let binding: DatabaseClass | undefined;
function databaseClass(): DatabaseClass {
  return (binding ??= require('better-sqlite3') as DatabaseClass);
}

/** The table: a rowid table with a unique key, so that a listing reads the key index alone, never the bodies. */
const SCHEMA = `CREATE TABLE IF NOT EXISTS statefold_objects (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  body BLOB NOT NULL
)`;

const MAGIC = 'SQLite format 3\0';

/**
 * Checks the file's header before SQLite uses it: a file that is not a database, or that is
 * shorter than its header says (cut by a copy or a full disk), is DamagedFile. SQLite itself
 * would read the missing pages as zeros and fail only on the rows they held, or not at all.
 * The length is only checked without a WAL: pages committed since the last checkpoint may be in
 * the WAL alone, and a checkpoint cut by a crash leaves the file short until the next open redoes it.
 */
function checkHeader(file: string): 'missing' | 'empty' | 'ok' {
  let size: number;
  try {
    size = statSync(file).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw err;
  }
  if (size === 0) return 'empty';
  const header = Buffer.alloc(100);
  const fd = openSync(file, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, 100, 0);
  } finally {
    closeSync(fd);
  }
  if (read < 100 || header.toString('latin1', 0, 16) !== MAGIC)
    throw new DamagedFile(`${file} is not a SQLite database (its first bytes are not a SQLite header)`);
  const raw = header.readUInt16BE(16);
  const pageSize = raw === 1 ? 65536 : raw;
  const pages = header.readUInt32BE(28);
  // The header's page count is valid only when its change counter matches "version-valid-for".
  const valid = pages > 0 && header.readUInt32BE(24) === header.readUInt32BE(92);
  if (!valid || walHasFrames(file)) return 'ok';
  if (size < pages * pageSize)
    throw new DamagedFile(
      `${file} is truncated: its header says ${pages} pages of ${pageSize} bytes (${pages * pageSize} bytes), the file has ${size}`,
    );
  return 'ok';
}

function walHasFrames(file: string): boolean {
  try {
    return statSync(`${file}-wal`).size > 32;
  } catch {
    return false;
  }
}

/**
 * Opens the file for writing: WAL (readers do not wait for writers, one fsync per commit), the
 * store's synchronous level, and the table. Creates the file, and its directory, when there is none.
 */
export function openWriter(settings: OpenSettings): Database {
  if (checkHeader(settings.path) === 'missing') mkdirSync(dirname(settings.path), { recursive: true });
  const db = new (databaseClass())(settings.path, { timeout: settings.busyTimeoutMs, fileMustExist: false });
  try {
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (mode !== 'wal')
      throw new Error(`journal_mode WAL is not available for ${settings.path} (SQLite kept ${String(mode)})`);
    db.pragma(`synchronous = ${settings.synchronous}`);
    db.exec(SCHEMA);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * Opens the file for reading, or resolves undefined while there is nothing to read (no file yet,
 * or no table yet): a reader never creates the file, so that a read of a store never written
 * leaves nothing behind.
 */
export function openReader(settings: OpenSettings): Database | undefined {
  const found = checkHeader(settings.path);
  if (found === 'missing') return undefined;
  const db = new (databaseClass())(settings.path, { timeout: settings.busyTimeoutMs, fileMustExist: true });
  try {
    // Reading the schema is where SQLite finds a damaged first page.
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'statefold_objects'").get();
    if (table === undefined) {
      db.close();
      return undefined;
    }
    db.pragma('query_only = ON');
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Whether `err` says the database file is damaged (SQLite's own codes, or the header checks). */
export function isDamage(code: string | undefined): boolean {
  return (
    code === 'STATEFOLD_DAMAGED' ||
    code === 'SQLITE_NOTADB' ||
    (code !== undefined && (code === 'SQLITE_CORRUPT' || code.startsWith('SQLITE_CORRUPT_')))
  );
}
