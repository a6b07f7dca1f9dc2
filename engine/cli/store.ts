/** The store a CLI command works on: a directory (a path or a `file://` URL), or `s3://bucket/prefix`. */
import { stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { StatefoldError, describeCause } from '../errors.js';
import { FileStore } from '../../storage-adapters/file/index.js';
import type { Store } from '../../storage-adapters/store.js';

/** Where S3 is: flags first, then the usual AWS variables (the SDK reads credentials itself). */
export interface S3Flags {
  endpoint?: string | undefined;
  region?: string | undefined;
}

/** Thrown for a command line that cannot be run as given: exit code 2. */
export class UsageError extends Error {}

/** Opens the store `spec` names. A directory must exist (NOT_FOUND otherwise; it is never created). */
export async function openStore(spec: string, flags: S3Flags): Promise<{ store: Store; close(): void }> {
  if (spec.startsWith('s3://')) {
    const rest = spec.slice('s3://'.length);
    const slash = rest.indexOf('/');
    const bucket = slash < 0 ? rest : rest.slice(0, slash);
    const prefix = slash < 0 ? '' : rest.slice(slash + 1);
    if (bucket === '') throw new UsageError(`store ${spec}: no bucket (s3://bucket/prefix)`);
    // The SDK prints a notice about Node versions on every start; one per command would bury the
    // output (the library itself leaves it on). Set the variable yourself to choose otherwise.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    const { S3Store } = await import('../../storage-adapters/s3/index.js');
    const endpoint = flags.endpoint ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
    const region = flags.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
    const store = new S3Store({
      bucket,
      ...(prefix !== '' && { prefix }),
      ...(endpoint !== undefined && { endpoint, forcePathStyle: true }),
      ...(region !== undefined && { region }),
    });
    return { store, close: () => store.destroy() };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec) && !spec.startsWith('file://'))
    throw new UsageError(`store ${spec}: a directory, a file:// URL or s3://bucket/prefix`);
  const dir = spec.startsWith('file://') ? fileURLToPath(spec) : spec;
  // The file store makes its directory on the first write; a typo must not read as an empty store.
  const info = await stat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR')
      throw new StatefoldError('NOT_FOUND', `store ${spec}: no such directory`, { cause: err });
    throw new StatefoldError('STORAGE', `store ${spec}: ${describeCause(err)}`, { cause: err });
  });
  if (!info.isDirectory()) throw new StatefoldError('NOT_FOUND', `store ${spec}: not a directory`);
  return { store: new FileStore({ dir }), close: () => undefined };
}
