/**
 * Schema evolution: the version of the caller's state a checkpoint was written in, and the
 * migrations that upcast an older stored state, on read, one version at a time (Axon's and
 * Marten's upcasters). A stored state is folded in the version it was written in (a chain holds
 * one version: patches are never upcast), then upcast once. See docs/design/schema-evolution.md.
 */
import { corrupt, describeValue, StatefoldError } from './errors.js';
import type { FrameHeader } from './format/header.js';
import { invalidArgument } from './args.js';

/** The schema of the state an engine writes and a reader expects. */
export interface Schema {
  /** The version of the state this code writes and reads: an integer, at least 1 (no schema: 1). */
  version: number;
  /**
   * The migrations: key `k` turns a state of version `k` into one of version `k + 1` (it may change
   * the state it is given, or return a new one; it may be async). Keys run without a gap up to
   * `version - 1`; the lowest is the oldest version this code reads.
   */
  migrate?: Record<number, (state: any) => unknown>;
  /**
   * The oldest schema version whose code may read what this code writes, as it is (default:
   * `version`, only this version's code). Stored with every checkpoint: code of an older version
   * at or above it reads the state as stored; below it, SCHEMA_TOO_NEW.
   */
  readableFrom?: number;
}

/** A schema checked, or `'stored'`: every state as it was stored, whatever its version (for tools). */
export interface ResolvedSchema {
  version: number;
  readableFrom: number;
  migrate: Map<number, (state: any) => unknown>;
}

/** What code without a schema reads and writes: version 1, no migrations. */
export const NO_SCHEMA: ResolvedSchema = { version: 1, readableFrom: 1, migrate: new Map() };

const positiveInt = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 1;

/** Checks a `schema` option (INVALID_ARGUMENT naming what is wrong); undefined gives NO_SCHEMA. */
export function resolveSchema(schema: unknown, op: string, stream?: string): ResolvedSchema | 'stored' {
  if (schema === undefined) return NO_SCHEMA;
  if (schema === 'stored') return 'stored';
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema))
    invalidArgument(
      op,
      `schema must be an object { version, migrate?, readableFrom? } or 'stored', not ${describeValue(schema)}`,
      stream,
    );
  const { version, migrate, readableFrom } = schema as Schema;
  if (!positiveInt(version))
    invalidArgument(op, `schema.version ${describeValue(version)} is not an integer of at least 1`, stream);
  if (readableFrom !== undefined && (!positiveInt(readableFrom) || readableFrom > version))
    invalidArgument(
      op,
      `schema.readableFrom ${describeValue(readableFrom)} is not an integer from 1 to ${version}`,
      stream,
    );
  if (migrate !== undefined && (migrate === null || typeof migrate !== 'object' || Array.isArray(migrate)))
    invalidArgument(
      op,
      `schema.migrate must be an object of functions by version, not ${describeValue(migrate)}`,
      stream,
    );
  const steps = new Map<number, (state: unknown) => unknown>();
  for (const [k, fn] of Object.entries(migrate ?? {})) {
    const from = Number(k);
    if (!positiveInt(from) || String(from) !== k || from >= version)
      invalidArgument(op, `schema.migrate key ${JSON.stringify(k)} is not a version from 1 to ${version - 1}`, stream);
    if (typeof fn !== 'function')
      invalidArgument(
        op,
        `schema.migrate[${k}] must be a function (version ${k} to ${from + 1}), not ${describeValue(fn)}`,
        stream,
      );
    steps.set(from, fn);
  }
  const keys = [...steps.keys()].sort((a, b) => a - b);
  for (const [i, k] of keys.entries())
    if (k !== version - keys.length + i)
      invalidArgument(
        op,
        `schema.migrate has no migration from version ${version - keys.length + i} (its keys must run without a gap up to ${version - 1})`,
        stream,
      );
  return { version, readableFrom: readableFrom ?? version, migrate: steps };
}

/** The header fields a writer of `schema` stores: none at version 1, else the version, and readableFrom when below it. */
export function schemaFields(schema: ResolvedSchema): Pick<FrameHeader, 'schemaVersion' | 'readableFrom'> {
  if (schema.version < 2) return {};
  return schema.readableFrom < schema.version
    ? { schemaVersion: schema.version, readableFrom: schema.readableFrom }
    : { schemaVersion: schema.version };
}

/** The schema version and readable-from a frame header records (1 and 1 when it records none). */
export function storedSchema(header: FrameHeader): { version: number; readableFrom: number } {
  const version = header.schemaVersion ?? 1;
  return { version, readableFrom: header.readableFrom ?? version };
}

/** Whether two headers record the same schema version and readable-from (a chain holds one). */
export function sameSchema(a: FrameHeader, b: FrameHeader): boolean {
  const x = storedSchema(a);
  const y = storedSchema(b);
  return x.version === y.version && x.readableFrom === y.readableFrom;
}

/** Where a stored state is, for errors. */
export interface SchemaOrigin {
  op: string;
  stream: string;
  seq: number;
  key?: string | undefined;
}

/**
 * SCHEMA_TOO_NEW unless code of `schema` may read a state stored as `header` says: its version is
 * at most the code's, or its writer declared it readable from the code's version or older.
 */
export function assertReadable(header: FrameHeader, schema: ResolvedSchema | 'stored', at: SchemaOrigin): void {
  if (schema === 'stored') return;
  const stored = storedSchema(header);
  if (stored.version <= schema.version || stored.readableFrom <= schema.version) return;
  throw new StatefoldError(
    'SCHEMA_TOO_NEW',
    `${at.op} stream ${JSON.stringify(at.stream)} seq ${at.seq}: written in schema version ${stored.version}, readable from version ${stored.readableFrom}; this code reads up to version ${schema.version} (deploy the newer code, or have its writers declare readableFrom ${schema.version})`,
    { stream: at.stream, seq: at.seq, ...(at.key !== undefined && { key: at.key }) },
  );
}

/**
 * The state stored as `header` says, in the code's version: upcast one migration at a time from
 * its stored version (a state newer but declared readable, or `'stored'`, as it is).
 * MIGRATION_FAILED, naming stream, seq and the version, when a migration is missing, throws or
 * returns undefined. `state` is the caller's own copy: a migration may change it.
 */
export async function upcast(
  state: unknown,
  header: FrameHeader,
  schema: ResolvedSchema | 'stored',
  at: SchemaOrigin,
): Promise<unknown> {
  if (schema === 'stored') return state;
  assertReadable(header, schema, at);
  const from = storedSchema(header).version;
  const where = { stream: at.stream, seq: at.seq, ...(at.key !== undefined && { key: at.key }) };
  const prefix = `${at.op} stream ${JSON.stringify(at.stream)} seq ${at.seq}`;
  for (let v = from; v < schema.version; v++) {
    const step = schema.migrate.get(v);
    if (step === undefined)
      throw new StatefoldError(
        'MIGRATION_FAILED',
        `${prefix}: stored in schema version ${v}, and this code has no migration from version ${v} to ${v + 1}`,
        where,
      );
    let next: unknown;
    try {
      next = await step(state);
    } catch (err) {
      throw new StatefoldError(
        'MIGRATION_FAILED',
        `${prefix}: the migration from schema version ${v} to ${v + 1} threw: ${String(err)}`,
        { ...where, cause: err },
      );
    }
    if (next === undefined)
      throw new StatefoldError(
        'MIGRATION_FAILED',
        `${prefix}: the migration from schema version ${v} to ${v + 1} returned undefined (it must return the new state)`,
        where,
      );
    state = next;
  }
  return state;
}

/** CORRUPT when a delta records another schema version than its base: a chain holds one (patches are never upcast). */
export function mixedSchema(
  delta: FrameHeader,
  base: FrameHeader,
  at: { stream: string; seq: number; key: string },
): StatefoldError | undefined {
  if (sameSchema(delta, base)) return undefined;
  const [a, b] = [storedSchema(delta), storedSchema(base)];
  return corrupt(
    at.stream,
    at.seq,
    at.key,
    `a delta in schema version ${a.version} (readable from ${a.readableFrom}) on a base in ${b.version} (readable from ${b.readableFrom})`,
  );
}

/** `fn` of each item, one after the other (a migration may keep state between calls): the results in order. */
export async function inOrder<T, R>(items: T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (const item of items) out.push(await fn(item));
  return out;
}
