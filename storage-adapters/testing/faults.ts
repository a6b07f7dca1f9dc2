/** The vocabulary of FaultStore: which operations a fault matches, what it does, and what the store records. */

/** The operations of a Store. */
export type StoreOp = 'get' | 'putIfAbsent' | 'list' | 'delete' | 'removeLeftovers';

/** Which operations a fault applies to; every field given must match. */
export interface FaultMatch {
  /** The operation with this number (0-based, counted over every operation of the wrapper). */
  at?: number;
  /** Only operations of this kind (or kinds). */
  op?: StoreOp | readonly StoreOp[];
  /** Only this key (for `list` and `removeLeftovers`: the prefix), keys matching this pattern, or keys this function accepts. */
  key?: string | RegExp | ((key: string) => boolean);
  /** Only the nth operation (0-based) among those the other fields match. */
  nth?: number;
  /** How many matching operations the fault applies to (default 1; Infinity for all). */
  times?: number;
}

/** What happens to a matched operation. */
export type Fault =
  /** Rejects with STORAGE. `landed`: the operation is first performed on the inner store (the caller cannot tell). */
  | { type: 'fail'; landed?: boolean }
  /** Rejects with STORAGE at once, but the operation is performed on the inner store later, at `release()` (a request that timed out and landed late). */
  | { type: 'timeout' }
  /** The caller waits until `release()`. `landed`: performed now, answered at release; otherwise performed at release. */
  | { type: 'hold'; landed?: boolean }
  /** Waits `ms` milliseconds (or what `ms(index)` returns) before performing the operation. */
  | { type: 'delay'; ms: number | ((index: number) => number) }
  /** `get`: flips bits (`mask`, default 0x01) of the byte at `offset` (negative counts from the end; default a seeded random byte). */
  | { type: 'corrupt'; offset?: number; mask?: number }
  /** `get`: cuts the object to its first `keep` bytes (negative: drops that many from the end; default a seeded random shorter length). */
  | { type: 'truncate'; keep?: number };

/** One operation as the wrapper saw it. */
export interface OpRecord {
  index: number;
  op: StoreOp;
  key: string;
  /** The fault applied, if any ('crash' when it came at or after the crash point). */
  fault?: Fault['type'] | 'crash';
  /** Whether the operation reached the inner store (so far: a held one reaches it at release). */
  reached: boolean;
  /** How it ended for the caller. */
  outcome: 'pending' | 'ok' | 'error';
}

/** Options of `new FaultStore(...)`. */
export interface FaultStoreOptions {
  /** Seed of the choices left to chance (which byte to corrupt, where to truncate). Default 1. */
  seed?: number;
  /** Keep `log` (default true; turn off for very long runs). */
  log?: boolean;
}

/** A fault rule as FaultStore keeps it (internal). */
export interface Rule {
  match: FaultMatch;
  fault: Fault;
  /** Matching operations seen so far (for `nth`). */
  seen: number;
  /** Applications left. */
  left: number;
}

/** An operation held until release (internal). */
export interface Held {
  index: number;
  op: StoreOp;
  key: string;
  /** Lets the held operation go on; resolves when it has completed (or failed). */
  release(): Promise<void>;
  /** Drops it, as a crash does: nothing more reaches the inner store, a waiting caller is rejected. */
  drop(): void;
}
