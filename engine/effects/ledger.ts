/**
 * Effects: a ledger of side effects carried in the stream's checkpoints, so that a resumed agent
 * skips the ones it already made. Each token is recorded `pending` (durably, before the effect
 * runs), then `done` with its result or `failed` with its error. Bases carry the whole ledger;
 * deltas carry what changed since the seq before.
 */
import { StatefoldError, describeValue } from '../errors.js';
import type { LedgerEntry, StoredRecord } from '../format/header.js';

export type { LedgerEntry } from '../format/header.js';

/** Where an effect stands. */
export type EffectStatus = 'pending' | 'done' | 'failed';

/** One token of the ledger. */
export interface EffectRecord {
  token: string;
  status: EffectStatus;
  /** When the intent was recorded (ms since the epoch). */
  startedAt: number;
  /** When the outcome was recorded; absent while pending. */
  settledAt?: number;
  /** `done`: the value `fn` resolved (as stored). */
  result?: unknown;
  /** `failed`: what `fn` threw; `done` with an unencodable result: why the result is missing. */
  error?: { name: string; message: string; code?: string };
}

/** What to do with a token found `pending` (a crash came after its intent, before its outcome). */
export type PendingPolicy<T = unknown> =
  /** Call `fn` again with the same token: right for services that honour idempotency keys. */
  | 'retry'
  /** Reject with code EFFECT_PENDING; `fn` is not called. */
  | 'throw'
  /** Ask the caller: its answer is recorded as the result; if it throws, the token stays pending. */
  | ((token: string, record: EffectRecord) => T | Promise<T>);

/** How long settled tokens are kept (pending ones never expire). */
export interface EffectRetention {
  /** Settled tokens older than this many milliseconds are dropped. Default 24 hours. */
  keepForMs?: number;
  /** At most this many settled tokens are kept, the newest. Default 10,000. */
  keepLast?: number;
}

/** Defaults of EffectRetention. */
export const DEFAULT_EFFECT_RETENTION: Required<EffectRetention> = Object.freeze({
  keepForMs: 24 * 3_600_000,
  keepLast: 10_000,
});

/** An immutable ledger: replaced, never changed, so a capture can hold it by reference. */
export type Ledger = ReadonlyMap<string, EffectRecord>;

export const EMPTY_LEDGER: Ledger = new Map();

/** Encodes a record for a header. */
export function storeRecord(r: EffectRecord): StoredRecord {
  const out: StoredRecord = { s: r.status, t0: r.startedAt };
  if (r.settledAt !== undefined) out.t1 = r.settledAt;
  if (r.result !== undefined) out.r = r.result;
  if (r.error !== undefined) out.e = r.error;
  return out;
}

/** Decodes a stored record; throws when malformed. */
export function loadRecord(token: string, s: StoredRecord): EffectRecord {
  if (
    s === null ||
    typeof s !== 'object' ||
    (s.s !== 'pending' && s.s !== 'done' && s.s !== 'failed') ||
    typeof s.t0 !== 'number'
  ) {
    throw new Error(`malformed effect record for token ${JSON.stringify(token)}`);
  }
  const r: EffectRecord = { token, status: s.s, startedAt: s.t0 };
  if (s.t1 !== undefined) r.settledAt = s.t1;
  if (s.r !== undefined) r.result = s.r;
  if (s.e !== undefined) r.error = s.e;
  return r;
}

/** Applies stored entries to a ledger, returning a new one. */
export function applyEntries(ledger: Ledger, entries: readonly LedgerEntry[] | undefined): Ledger {
  if (entries === undefined || entries.length === 0) return ledger;
  const next = new Map(ledger);
  for (const entry of entries) {
    if (!Array.isArray(entry) || typeof entry[0] !== 'string') throw new Error('malformed effect ledger entry');
    const [token, stored] = entry;
    if (stored === null) next.delete(token);
    else next.set(token, loadRecord(token, stored));
  }
  return next;
}

/** The whole ledger as stored entries (for a base). */
export function ledgerEntries(ledger: Ledger): LedgerEntry[] {
  return [...ledger.values()].map((r) => [r.token, storeRecord(r)]);
}

/** Drops settled records beyond the retention; returns the tokens dropped. */
export function expired(ledger: Ledger, retention: Required<EffectRetention>, now: number): string[] {
  const settled = [...ledger.values()].filter((r) => r.status !== 'pending');
  if (settled.length === 0) return [];
  settled.sort((a, b) => (a.settledAt ?? a.startedAt) - (b.settledAt ?? b.startedAt));
  const drop = new Set<string>();
  const overCount = settled.length - retention.keepLast;
  for (let i = 0; i < overCount; i++) drop.add(settled[i]!.token);
  for (const r of settled) if (now - (r.settledAt ?? r.startedAt) > retention.keepForMs) drop.add(r.token);
  return [...drop];
}

/** Throws INVALID_ARGUMENT unless `token` is a non-empty string of at most 1,024 characters. */
export function assertToken(token: unknown, stream: string): asserts token is string {
  if (typeof token !== 'string' || token.length === 0 || token.length > 1024) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `effect on stream ${JSON.stringify(stream)}: token ${describeValue(token)} must be a non-empty string of at most 1,024 characters`,
      { stream },
    );
  }
}

/** Resolves an EffectRetention with defaults; INVALID_ARGUMENT when malformed. */
export function resolveEffectRetention(r: EffectRetention | undefined): Required<EffectRetention> {
  if (r === undefined) return DEFAULT_EFFECT_RETENTION;
  if (r === null || typeof r !== 'object' || Array.isArray(r))
    throw new StatefoldError('INVALID_ARGUMENT', `effectRetention: must be an object, not ${describeValue(r)}`);
  const out = { ...DEFAULT_EFFECT_RETENTION };
  if (r.keepForMs !== undefined) {
    if (typeof r.keepForMs !== 'number' || !(r.keepForMs >= 0))
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `effectRetention.keepForMs: ${describeValue(r.keepForMs)} is not a non-negative number`,
      );
    out.keepForMs = r.keepForMs;
  }
  if (r.keepLast !== undefined) {
    if (!(Number.isSafeInteger(r.keepLast) && r.keepLast >= 0) && r.keepLast !== Infinity)
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `effectRetention.keepLast: ${describeValue(r.keepLast)} is not a non-negative integer`,
      );
    out.keepLast = r.keepLast;
  }
  return out;
}
