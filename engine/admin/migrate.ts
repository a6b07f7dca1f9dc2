/**
 * migrateStreams: runs a schema's migrations over many streams (`statefold migrate`). A dry run
 * restores each stream's newest checkpoint through the migrations and reports the streams whose
 * migration fails; an apply writes, per stream stored in an older version, one base in the new
 * version through a normal engine open (which checks the migrations before it claims the stream,
 * so a failing stream is left as it was). Both are resumable: the store is the only state, a
 * stream already in the version is `current` for one header read, and `after` skips the streams
 * a stopped run finished.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptionalFunction, assertOptionalPositiveInt, assertOptions, invalidArgument } from '../args.js';
import { captureValue } from '../capture/index.js';
import { SnapshotEngine } from '../engine.js';
import { StatefoldError } from '../errors.js';
import type { Encryption } from '../format/keyring.js';
import { mapLimit } from '../log/read.js';
import { listCheckpoints, restore } from '../restore/index.js';
import { resolveSchema, type Schema } from '../schema.js';
import { listStreams } from './streams.js';

/** Options of `migrateStreams`. */
export interface MigrateOptions {
  /** The schema to migrate to (as given to SnapshotEngine.open). */
  schema: Schema;
  /** Write a base in the schema's version per stream stored in an older one (default: a dry run, nothing written). */
  apply?: boolean;
  /** The streams to migrate, in this order (default: every stream of the store, as listStreams lists them). */
  streams?: string[];
  /** Skip the streams up to and including this one (the `last` a stopped run reported): how a run resumes. */
  after?: string;
  /** The keys of encrypted streams. */
  encryption?: Encryption;
  /** Streams migrated at once (default 4). */
  concurrency?: number;
  /** Called after each stream, with how many are done of how many. */
  onProgress?: (progress: { done: number; total: number; stream: string }) => void;
  signal?: AbortSignal;
  storeTimeoutMs?: number;
}

/**
 * What became of one stream: `current` (its newest checkpoint is in the schema's version),
 * `migrates` (dry run: stored in an older version, and its migrations succeed), `migrated`
 * (apply: a base in the schema's version written at `seq`), `newer` (stored in a newer version
 * this code may read as stored: left alone), `empty` (no checkpoint), `failed` (`error`: its
 * migration threw, it is too new, damaged, or its key is missing; nothing written).
 */
export interface MigratedStream {
  stream: string;
  status: 'current' | 'migrates' | 'migrated' | 'newer' | 'empty' | 'failed';
  /** The schema version its newest checkpoint was stored in. */
  from?: number;
  /** Apply: the seq of the base written. */
  seq?: number;
  error?: { code: string; seq?: number; message: string };
}

/** What `migrateStreams` did, per stream in order; `failed` names the failed ones; `last`, the last stream done. */
export interface MigrateReport {
  streams: MigratedStream[];
  failed: string[];
  last?: string;
}

/** Errors that end the run (the store, a timeout, the caller's abort); any other fails one stream. */
const FATAL = new Set(['STORAGE', 'TIMEOUT', 'ABORTED', 'INVALID_ARGUMENT']);

/**
 * Runs `options.schema`'s migrations over the store's streams (or `options.streams`): a dry run by
 * default, `apply: true` to write. Resolves a report per stream; rejects only when the store fails
 * (STORAGE, TIMEOUT), on abort, or on a bad option. See MigratedStream for the statuses.
 */
export async function migrateStreams(store: Store, options: MigrateOptions): Promise<MigrateReport> {
  assertOptions(options, 'migrateStreams');
  if (options?.schema === undefined) invalidArgument('migrateStreams', 'schema is required: the one to migrate to');
  const schema = resolveSchema(options.schema, 'migrateStreams');
  if (schema === 'stored') invalidArgument('migrateStreams', "schema 'stored' is not a version to migrate to");
  assertOptionalPositiveInt(options.concurrency, 'concurrency', 'migrateStreams');
  assertOptionalFunction(options.onProgress, 'onProgress', 'migrateStreams');
  const reading = {
    ...(options.encryption && { encryption: options.encryption }),
    ...(options.signal && { signal: options.signal }),
    ...(options.storeTimeoutMs !== undefined && { storeTimeoutMs: options.storeTimeoutMs }),
  };
  let streams = options.streams ?? (await listStreams(store, options.signal ? { signal: options.signal } : {}));
  if (options.after !== undefined) {
    const at = streams.indexOf(options.after);
    if (at < 0) invalidArgument('migrateStreams', `after ${JSON.stringify(options.after)} is not one of the streams`);
    streams = streams.slice(at + 1);
  }
  let done = 0;
  const one = async (stream: string): Promise<MigratedStream> => {
    try {
      if (options.apply !== true) {
        const r = await restore(store, stream, { ...reading, schema: options.schema });
        // What an apply would start from must be checkpointable (a migration may return what is not).
        if (r.schemaVersion < schema.version) checkable(r.state, stream, r.seq);
        const status =
          r.schemaVersion === schema.version ? 'current' : r.schemaVersion < schema.version ? 'migrates' : 'newer';
        return { stream, status, from: r.schemaVersion };
      }
      // Done already (a rerun), or newer: one header read, nothing written.
      const [newest] = await listCheckpoints(store, stream, { ...reading, reverse: true, limit: 1 });
      if (newest === undefined) return { stream, status: 'empty' };
      if (newest.damaged) throw newest.error;
      const from = newest.schemaVersion;
      if (from > schema.version && newest.readableFrom > schema.version) {
        const message = `stream ${JSON.stringify(stream)} seq ${newest.seq}: stored in schema version ${from}, readable from ${newest.readableFrom}; this code reads up to version ${schema.version}`;
        return { stream, status: 'failed', from, error: { code: 'SCHEMA_TOO_NEW', seq: newest.seq, message } };
      }
      if (from >= schema.version) return { stream, status: from === schema.version ? 'current' : 'newer', from };
      // The open upcasts before it claims (MIGRATION_FAILED writes nothing); its first checkpoint is a base.
      const engine = await SnapshotEngine.open({ store, stream, schema: options.schema, ...reading });
      try {
        const info = await engine.checkpoint(engine.state, { meta: engine.meta });
        return { stream, status: 'migrated', from, seq: info.seq };
      } finally {
        await engine.close();
      }
    } catch (err) {
      if (!(err instanceof StatefoldError) || FATAL.has(err.code)) throw err;
      if (err.code === 'NOT_FOUND') return { stream, status: 'empty' };
      const error = { code: err.code, message: err.message, ...(err.seq !== undefined && { seq: err.seq }) };
      return { stream, status: 'failed', error };
    } finally {
      options.onProgress?.({ done: ++done, total: streams.length, stream });
    }
  };
  const results = await mapLimit(streams, options.concurrency ?? 4, one);
  const report: MigrateReport = {
    streams: results,
    failed: results.filter((r) => r.status === 'failed').map((r) => r.stream),
  };
  if (streams.length > 0) report.last = streams[streams.length - 1]!;
  return report;
}

/** MIGRATION_FAILED unless `state` (what the migrations made) could be checkpointed. */
function checkable(state: unknown, stream: string, seq: number): void {
  try {
    captureValue(state, '$');
  } catch (err) {
    throw new StatefoldError(
      'MIGRATION_FAILED',
      `stream ${JSON.stringify(stream)} seq ${seq}: the migrations returned a state that cannot be checkpointed: ${(err as Error).message}`,
      { stream, seq, cause: err },
    );
  }
}
