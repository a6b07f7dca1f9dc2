/**
 * The one error type statefold throws, with its codes. It lives with the stores because every
 * layer throws it and the stores are the bottom of the dependency graph: the engine imports the
 * stores, never the other way round (the engine's errors module re-exports this file).
 */

/** The string codes a StatefoldError can carry; each names one kind of failure. */
export type ErrorCode =
  /** The state (or meta, or an effect result) holds a value statefold cannot checkpoint. */
  | 'INVALID_STATE'
  /** An argument is malformed: a stream id, a seq, an option. */
  | 'INVALID_ARGUMENT'
  /** The stream, checkpoint or key does not exist (or was removed by retention). */
  | 'NOT_FOUND'
  /** A stored object failed verification: checksum, length, identity, chain, or (encrypted streams) authentication. */
  | 'CORRUPT'
  /**
   * A stored frame is intact (its length and checksum hold) but in a format this statefold does
   * not read: a format version, frame kind or compression of a newer statefold. Never taken for
   * damage: `repair` and `skipDamaged` stop at it rather than step over newer checkpoints.
   */
  | 'UNSUPPORTED'
  /** An encrypted frame's key (named in the message) is not available: no `encryption` given, or its keys lack that id. */
  | 'KEY_UNAVAILABLE'
  /** Another engine has opened the stream since this one did; this engine may not commit. */
  | 'FENCED'
  /** The store failed (I/O error, network, throttling) after its retries, or answered something that is not what a Store answers. */
  | 'STORAGE'
  /** A store call did not settle within `storeTimeoutMs`; like STORAGE, its outcome is unknown. */
  | 'TIMEOUT'
  /** The caller's AbortSignal cancelled the operation. */
  | 'ABORTED'
  /** The engine was closed; it accepts no more calls. */
  | 'CLOSED'
  /** An effect token was found pending (intent recorded, outcome not) and the policy is 'throw'. */
  | 'EFFECT_PENDING'
  /** An effect token's recorded outcome is a failure; the effect is not run again. */
  | 'EFFECT_FAILED'
  /** A checkpoint went over `policy.budget` with `onExceed: 'reject'`: nothing was written (the message names the paths that grew). */
  | 'BUDGET_EXCEEDED'
  /**
   * A checkpoint was written in a schema version newer than the reading code's (`schema.version`),
   * and its writer did not declare it readable by that version (`readableFrom`): the fix is to
   * deploy the newer code, not to upgrade statefold. Never taken for damage.
   */
  | 'SCHEMA_TOO_NEW'
  /** A schema migration threw (or returned nothing, or is missing) while a stored state was upcast; nothing stored changed. */
  | 'MIGRATION_FAILED';

/** Details a StatefoldError may carry besides its message. */
export interface StatefoldErrorDetails {
  cause?: unknown;
  stream?: string;
  seq?: number;
  key?: string;
  path?: string;
}

/** The one error class statefold throws: a string `code` plus the stream, seq, key or path concerned. */
export class StatefoldError extends Error {
  readonly code: ErrorCode;
  readonly stream?: string;
  readonly seq?: number;
  readonly key?: string;
  readonly path?: string;

  constructor(code: ErrorCode, message: string, details: StatefoldErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'StatefoldError';
    this.code = code;
    if (details.stream !== undefined) this.stream = details.stream;
    if (details.seq !== undefined) this.seq = details.seq;
    if (details.key !== undefined) this.key = details.key;
    if (details.path !== undefined) this.path = details.path;
  }
}

/** True when `err` is a StatefoldError, optionally of the given code. */
export function isStatefoldError(err: unknown, code?: ErrorCode): err is StatefoldError {
  return err instanceof StatefoldError && (code === undefined || err.code === code);
}

/** Short text of any thrown value, for messages that wrap it. */
export function describeCause(err: unknown): string {
  if (err instanceof Error) return err.message;
  try {
    return String(err);
  } catch {
    // An object without a usable toString (Object.create(null), a hostile Proxy).
    return Object.prototype.toString.call(err);
  }
}

/**
 * Short text of any value, for a message that says what was given: `-1`, `"5s"`, `1n (a bigint)`,
 * `an object with a null prototype`. It never throws: not on a BigInt (JSON.stringify does), a
 * symbol (a template literal does), an object without a usable toString, or a Proxy whose traps throw.
 */
export function describeValue(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}...` : v);
    case 'number':
      return Object.is(v, -0) ? '-0' : String(v);
    case 'bigint':
      return `${v}n (a bigint)`;
    case 'symbol':
      return `${String(v)} (a symbol)`;
    case 'function':
      return 'a function';
    case 'boolean':
    case 'undefined':
      return String(v);
  }
  if (v === null) return 'null';
  try {
    if (Array.isArray(v)) return 'an array';
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto === null) return 'an object with a null prototype';
    if (proto === Object.prototype) return 'an object';
    const name: unknown = (proto as { constructor?: { name?: unknown } }).constructor?.name;
    return typeof name === 'string' && name !== '' ? `an instance of ${name}` : 'an object';
  } catch {
    // A Proxy whose traps throw (or a revoked one).
    return 'an object';
  }
}
