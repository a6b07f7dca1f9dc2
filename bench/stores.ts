/**
 * Stores for the benchmark: memory, file (fsync on, the durable default), SQLite (statefold/sqlite,
 * synchronous=FULL by default), S3 when the STATEFOLD_S3_* variables are set, PostgreSQL
 * (statefold/postgres) on a table the caller names; and a wrapper that counts the write requests
 * and bytes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  FileStore,
  MemoryStore,
  type FileStoreOptions,
  type ListOptions,
  type Store,
  type StoreOptions,
} from 'statefold';
import { SqliteStore } from 'statefold/sqlite';
import { PostgresStore } from 'statefold/postgres';
import pg from 'pg';

/** What a written object is, for counting bases and deltas apart. */
/** What a write holds: a base, a delta, a fence, a full snapshot (baselines), or a hint (statefold's newest-base pointer). */
export type WriteKind = 'base' | 'delta' | 'fence' | 'full' | 'hint';

/** Counts putIfAbsent calls and bytes by kind. */
export interface WriteCounts {
  requests: Record<WriteKind, number>;
  bytes: Record<WriteKind, number>;
}

export function emptyCounts(): WriteCounts {
  return {
    requests: { base: 0, delta: 0, fence: 0, full: 0, hint: 0 },
    bytes: { base: 0, delta: 0, fence: 0, full: 0, hint: 0 },
  };
}

const MAGIC = 0x444c4653; // "SFLD": a statefold frame
const FRAME_KIND: Record<number, WriteKind> = { 1: 'base', 2: 'delta', 3: 'fence' };

/** The kind of a written body: statefold frames by their header, baselines by their key's last segment. */
function kindOf(key: string, body: Uint8Array): WriteKind {
  if (body.byteLength >= 6 && (body[0]! | (body[1]! << 8) | (body[2]! << 16) | (body[3]! << 24)) >>> 0 === MAGIC)
    return FRAME_KIND[body[5]!] ?? 'full';
  if (key.includes('/hint/')) return 'hint';
  const last = key.slice(key.lastIndexOf('/') + 1);
  if (last.startsWith('base-')) return 'base';
  if (last.startsWith('delta-')) return 'delta';
  return 'full';
}

/** A store wrapper that counts write requests and bytes (every method passes through). */
export class CountingStore implements Store {
  counts: WriteCounts = emptyCounts();
  constructor(readonly inner: Store) {}
  get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    return this.inner.get(key, options);
  }
  putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    const k = kindOf(key, body);
    this.counts.requests[k]++;
    this.counts.bytes[k] += body.byteLength;
    return this.inner.putIfAbsent(key, body, options);
  }
  list(prefix: string, options?: ListOptions): Promise<string[]> {
    return this.inner.list(prefix, options);
  }
  delete(key: string, options?: StoreOptions): Promise<void> {
    return this.inner.delete(key, options);
  }
  removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    return this.inner.removeLeftovers(prefix, options);
  }
  reset(): WriteCounts {
    const c = this.counts;
    this.counts = emptyCounts();
    return c;
  }
}

/** A store the benchmark can open fresh for each scenario. */
export interface StoreKind {
  name: 'memory' | 'file' | 'sqlite' | 's3' | 'postgres';
  /** A fresh, empty store (a new directory, a new S3 prefix). */
  create(label: string, options?: { fsync?: boolean }): Promise<Store>;
  /**
   * The same objects through a new instance, as a restarted process would see them (a new
   * FileStore on the same directory); a kind whose objects live only in one instance returns it.
   */
  reopen?(store: Store): Store;
  /** Removes everything this kind created. */
  cleanup(): Promise<void>;
}

export function memoryStores(): StoreKind {
  return { name: 'memory', create: async () => new MemoryStore(), cleanup: async () => undefined };
}

/** File stores in a temp directory (fsync on: a resolved checkpoint survives power loss). */
export function fileStores(root?: string, ioThreads?: number): StoreKind {
  const dir = mkdtempSync(path.join(root ?? tmpdir(), 'statefold-bench-'));
  let n = 0;
  const made = new WeakMap<Store, FileStoreOptions>();
  return {
    name: 'file',
    create: async (label, options) => {
      const o: FileStoreOptions = {
        dir: path.join(dir, `${++n}-${label.replace(/[^A-Za-z0-9._-]+/g, '_')}`),
        fsync: options?.fsync ?? true,
        ...(ioThreads !== undefined && { ioThreads }),
      };
      const store = new FileStore(o);
      made.set(store, o);
      return store;
    },
    reopen: (store) => new FileStore(made.get(store)!),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * SqliteStores, one database file each in a temp directory (`synchronous: 'full'` unless asked:
 * a resolved checkpoint survives power loss). `fsync: false` asks for synchronous=NORMAL, the
 * nearest SQLite has to a write without fsync.
 */
export function sqliteStores(root?: string): StoreKind {
  const dir = mkdtempSync(path.join(root ?? tmpdir(), 'statefold-bench-sqlite-'));
  let n = 0;
  const open: SqliteStore[] = [];
  const made = new WeakMap<Store, { path: string; synchronous: 'full' | 'normal' }>();
  const store = (o: { path: string; synchronous: 'full' | 'normal' }): SqliteStore => {
    const s = new SqliteStore(o);
    open.push(s);
    made.set(s, o);
    return s;
  };
  return {
    name: 'sqlite',
    create: async (label, options) =>
      store({
        path: path.join(dir, `${++n}-${label.replace(/[^A-Za-z0-9._-]+/g, '_')}.db`),
        synchronous: options?.fsync === false ? 'normal' : 'full',
      }),
    // A new instance on the same file, as a restarted process would open it.
    reopen: (s) => store(made.get(s)!),
    cleanup: async () => {
      for (const s of open.splice(0)) await s.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The S3 variables, or undefined when STATEFOLD_S3_ENDPOINT / _BUCKET are not both set. */
export function s3Env(
  env = process.env,
):
  | { endpoint: string; region: string; bucket: string; credentials?: { accessKeyId: string; secretAccessKey: string } }
  | undefined {
  const endpoint = env.STATEFOLD_S3_ENDPOINT;
  const bucket = env.STATEFOLD_S3_BUCKET;
  if (!endpoint || !bucket) return undefined;
  const accessKeyId = env.STATEFOLD_S3_ACCESS_KEY_ID;
  const secretAccessKey = env.STATEFOLD_S3_SECRET_ACCESS_KEY;
  return {
    endpoint,
    bucket,
    region: env.STATEFOLD_S3_REGION || 'us-east-1',
    ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey } } : {}),
  };
}

/**
 * S3 stores under one run prefix in the configured bucket, or a reason why S3 is skipped
 * (variables not set, or 'statefold/s3' not built yet).
 */
export async function s3Stores(runId: string): Promise<StoreKind | string> {
  const env = s3Env();
  if (env === undefined) return 'STATEFOLD_S3_ENDPOINT and STATEFOLD_S3_BUCKET are not set';
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let S3Store: new (options: Record<string, unknown>) => Store;
  try {
    // A variable specifier: the module is optional at build time and loaded only when asked for.
    const specifier = 'statefold/s3';
    ({ S3Store } = (await import(specifier)) as { S3Store: typeof S3Store });
  } catch (err) {
    return `'statefold/s3' could not be loaded (${(err as Error).message.split('\n')[0]})`;
  }
  const created: Store[] = [];
  let n = 0;
  return {
    name: 's3',
    create: async (label) => {
      const store = new S3Store({
        bucket: env.bucket,
        prefix: `statefold-bench/${runId}/${++n}-${label.replace(/[^A-Za-z0-9._-]+/g, '_')}/`,
        endpoint: env.endpoint,
        region: env.region,
        credentials: env.credentials,
        forcePathStyle: true,
      });
      created.push(store);
      return store;
    },
    cleanup: async () => {
      for (const store of created) {
        const keys = await store.list('').catch(() => [] as string[]);
        for (const key of keys) await store.delete(key).catch(() => undefined);
      }
    },
  };
}

/**
 * PostgresStores on one table of the server at `url` (PostgreSQL's defaults: fsync and
 * synchronous_commit on), every instance on that table: the caller makes the table's name unique
 * and drops it afterwards (dropPostgresTable). `cleanup` closes the instances.
 */
export async function postgresStores(url: string, table: string): Promise<StoreKind> {
  const open: { close(): Promise<void> }[] = [];
  const store = (): Store => {
    const s = new PostgresStore({ connectionString: url, table });
    open.push(s);
    return s;
  };
  return {
    name: 'postgres',
    create: async () => store(),
    // A new instance (a new pool) on the same table, as a restarted process would open it.
    reopen: () => store(),
    cleanup: async () => {
      for (const s of open.splice(0)) await s.close().catch(() => undefined);
    },
  };
}

/** A table name for one bench run (letters, digits, `_`), unique on the server in practice. */
export function benchTable(label: string): string {
  return `statefold_bench_${label}_${process.pid}_${Date.now().toString(36)}`;
}

/** Drops `table` on the server at `url` if it is there. */
export async function dropPostgresTable(url: string, table: string): Promise<void> {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(table)) throw new Error(`bench: not a plain table name: ${table}`);
  await postgresQuery(url, `DROP TABLE IF EXISTS "${table}"`);
}

/** One statement on a connection of its own. */
export async function postgresQuery(url: string, text: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}
