/**
 * The store a CLI command works on: a directory (a path or a `file://` URL), a SQLite database
 * file (`.db`, `.sqlite`, `.sqlite3`, a file that is one, or `sqlite:PATH`), or `s3://bucket/prefix`.
 */
import { open, stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { FileStore, StatefoldError, type Store } from '../engine/index.js';

/** Where S3 is: flags first, then the usual AWS variables (the SDK reads credentials itself). */
export interface S3Flags {
  endpoint?: string | undefined;
  region?: string | undefined;
}

/** Thrown for a command line that cannot be run as given: exit code 2. */
export class UsageError extends Error {}

/** The first of `values` that is set and not empty (an exported but empty variable counts as unset). */
const firstSet = (...values: (string | undefined)[]): string | undefined =>
  values.find((v) => v !== undefined && v !== '');

/** Names ending so are taken for SQLite databases even when missing (NOT_FOUND, not "no such directory"). */
const DATABASE_NAME = /\.(db|sqlite|sqlite3)$/i;

/**
 * Opens the store `spec` names. A directory must exist (NOT_FOUND otherwise; it is never created);
 * a file is a SQLite database (SqliteStore) when its name ends `.db`, `.sqlite` or `.sqlite3` or it
 * starts as a database does, and so is `sqlite:PATH` (or `sqlite://PATH`): it must exist too;
 * on S3, with an endpoint and no region the region is us-east-1, and with neither it is a usage error.
 */
export async function openStore(
  spec: string,
  flags: S3Flags,
): Promise<{ store: Store; close(): void | Promise<void> }> {
  if (spec.startsWith('sqlite:')) return openDatabase(spec, spec.slice('sqlite:'.length).replace(/^\/\//, ''));
  if (spec.startsWith('s3://')) {
    const { bucket, prefix } = s3Location(spec);
    // The SDK prints a notice about Node versions on every start; one per command would bury the
    // output (the library itself leaves it on). Set the variable yourself to choose otherwise.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    const { S3Store } = await import('../storage-adapters/s3/index.js');
    const env = process.env;
    const endpoint = firstSet(flags.endpoint, env.AWS_ENDPOINT_URL_S3, env.AWS_ENDPOINT_URL);
    const region = firstSet(flags.region, env.AWS_REGION, env.AWS_DEFAULT_REGION);
    const store = new S3Store({
      bucket,
      ...(prefix !== '' && { prefix }),
      // S3Store's own default with an endpoint: us-east-1, the region MinIO and Ceph RGW expect.
      ...(endpoint !== undefined && { endpoint, forcePathStyle: true }),
      ...(region !== undefined && { region }),
    });
    if (endpoint === undefined && region === undefined) {
      // AWS itself: the region may still come from the profile (~/.aws/config); the SDK's own
      // "Region is missing" would only come with the first request, wrapped in a key.
      try {
        await store.client.config.region();
      } catch {
        store.destroy();
        throw new UsageError(
          `store ${spec}: no region: give --region or set AWS_REGION (with --endpoint or AWS_ENDPOINT_URL it defaults to us-east-1)`,
        );
      }
    }
    return { store, close: () => store.destroy() };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec) && !spec.startsWith('file://'))
    throw new UsageError(`store ${spec}: a directory, a file:// URL, a SQLite database file or s3://bucket/prefix`);
  const dir = spec.startsWith('file://') ? fileURLToPath(spec) : spec;
  // The file store makes its directory on the first write; a typo must not read as an empty store.
  const info = await statOf(spec, dir, DATABASE_NAME.test(dir) ? 'database file' : 'directory');
  if (info.isFile() && (DATABASE_NAME.test(dir) || (await isDatabase(dir)))) return openDatabase(spec, dir);
  if (!info.isDirectory()) throw new StatefoldError('NOT_FOUND', `store ${spec}: not a directory`);
  return { store: new FileStore({ dir }), close: () => undefined };
}

/** Whether `file` starts as every SQLite database does (no connection is open yet: reading it is safe). */
async function isDatabase(file: string): Promise<boolean> {
  const handle = await open(file, 'r').catch(() => undefined);
  if (handle === undefined) return false;
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(16), 0, 16, 0);
    return bytesRead === 16 && buffer.toString('latin1') === 'SQLite format 3\0';
  } finally {
    await handle.close();
  }
}

/** What is at `file`; NOT_FOUND ("no such `what`") when nothing is. */
async function statOf(spec: string, file: string, what: string) {
  return stat(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR')
      throw new StatefoldError('NOT_FOUND', `store ${spec}: no such ${what}`, { cause: err });
    throw new StatefoldError('STORAGE', `store ${spec}: ${err.message}`, { cause: err });
  });
}

/**
 * A SqliteStore on the database `file`, which must exist: SqliteStore would create a missing one
 * at the first write, and a typo must not read as an empty store. A file that is not a database
 * fails CORRUPT at the first read, naming it.
 */
async function openDatabase(spec: string, file: string): Promise<{ store: Store; close(): Promise<void> }> {
  if (file === '') throw new UsageError(`store ${spec}: no path (sqlite:PATH)`);
  const info = await statOf(spec, file, 'database file');
  if (!info.isFile()) throw new StatefoldError('NOT_FOUND', `store ${spec}: not a database file`);
  const { SqliteStore } = await import('../storage-adapters/sqlite/index.js');
  const store = new SqliteStore({ path: file });
  return { store, close: () => store.close() };
}

/** The bucket and prefix of `s3://bucket/prefix`. */
function s3Location(spec: string): { bucket: string; prefix: string } {
  const rest = spec.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  if (bucket === '') throw new UsageError(`store ${spec}: no bucket (s3://bucket/prefix)`);
  return { bucket, prefix: slash < 0 ? '' : rest.slice(slash + 1) };
}

/** Names of errors in `err`'s chain of causes, with their messages (the SDK's error is at the bottom). */
function causes(err: unknown): { name: string; message: string }[] {
  const out: { name: string; message: string }[] = [];
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++)
    out.push({ name: e.name, message: e.message });
  return out;
}

/**
 * A store failure (STORAGE or TIMEOUT) told in the user's terms: `where` (the store or stream they
 * named) instead of the key statefold made of it, and what to do when the cause is known (no
 * credentials, no such bucket); the original error is the cause. Other errors come back as they are.
 */
export function storeFailure(err: StatefoldError, spec: string, where: string): StatefoldError {
  const chain = causes(err);
  if (spec.startsWith('s3://') && chain.some((c) => c.name === 'NoSuchBucket')) {
    const { bucket } = s3Location(spec);
    return new StatefoldError('NOT_FOUND', `store ${spec}: no bucket ${JSON.stringify(bucket)}`, { cause: err });
  }
  const credentials = chain.find((c) => c.name === 'CredentialsProviderError');
  if (credentials !== undefined) {
    return new StatefoldError(
      err.code,
      `${where}: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE); the AWS SDK said: ${credentials.message}`,
      { cause: err },
    );
  }
  // A store call's error starts `op key: `; what follows is the store's own account.
  const op = /^[A-Za-z]+ /.exec(err.message)?.[0];
  if (err.key === undefined || op === undefined || !err.message.startsWith(`${err.key}: `, op.length)) return err;
  return new StatefoldError(err.code, `${where}: ${err.message.slice(op.length + err.key.length + 2)}`, {
    cause: err,
  });
}
