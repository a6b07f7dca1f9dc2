/**
 * The database file, as a thread of SqliteStore opens it: the binding, the pragmas and the one
 * table; SQLite itself tells a damaged file from a new one. Runs on the main thread and on the
 * store's writer thread (runner.ts).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, statSync } from 'node:fs';
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

/** How the store's connections open the file, from `SqliteStoreOptions`. */
export interface OpenSettings {
  path: string;
  synchronous: 'FULL' | 'NORMAL';
  busyTimeoutMs: number;
}

// better-sqlite3 is CommonJS: loaded with require at the first connection, not at import.
const require = createRequire(import.meta.url);
let binding: DatabaseClass | undefined;
function databaseClass(): DatabaseClass {
  return (binding ??= require('better-sqlite3') as DatabaseClass);
}

/**
 * Loads the binding's addon now (10-45 ms) rather than at the first call: the writer thread does
 * it as it starts, while its first calls are on their way. A failure here is left for the
 * first open to report, with its file's name.
 */
export function preloadBinding(): void {
  try {
    databaseClass();
  } catch {
    // Reported by openWriter/openReader.
  }
}

/** The table: a rowid table with a unique key, so that a listing reads the key index alone, never the bodies. */
const SCHEMA = `CREATE TABLE IF NOT EXISTS statefold_objects (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  body BLOB NOT NULL
)`;

/**
 * Whether the file is there. Only a stat: opening and closing a descriptor of the file
 * would drop the POSIX locks this process's connections hold on it (closing any descriptor of a
 * file drops them all). SQLite itself reports a file that is not a database (SQLITE_NOTADB) or is
 * shorter than its header says (SQLITE_CORRUPT), under its own locks, when the connection first
 * reads it: a check of the bytes here would race with another process's checkpoint growing the file.
 */
function exists(file: string): boolean {
  try {
    statSync(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Creates `dir` and its missing parents, durably: each directory that holds a new one is fsynced,
 * so that a power loss after the first commit cannot take the database's directory with it
 * (SQLite fsyncs the directory it creates the file in, not those above).
 */
function makeDirs(dir: string): void {
  const first = mkdirSync(dir, { recursive: true });
  if (first === undefined) return;
  for (let d = dir; ; d = dirname(d)) {
    const parent = dirname(d);
    const fd = openSync(parent, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (d === first || parent === d) return;
  }
}

/**
 * Opens the file for writing: WAL (readers do not wait for writers, one fsync per commit), the
 * store's synchronous level, and the table. Creates the file, and its directory, when there is none.
 */
export function openWriter(settings: OpenSettings): Database {
  if (!exists(settings.path)) makeDirs(dirname(settings.path));
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
  if (!exists(settings.path)) return undefined;
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

/** Whether `err` says the database file is damaged (SQLite's own codes). */
export function isDamage(code: string | undefined): boolean {
  return (
    code === 'SQLITE_NOTADB' ||
    (code !== undefined && (code === 'SQLITE_CORRUPT' || code.startsWith('SQLITE_CORRUPT_')))
  );
}
