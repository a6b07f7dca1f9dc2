/** What an engine opens with, once it has claimed its stream: its head, capturer and ledger. */
import type { Capturer } from '../capture/index.js';
import type { Ledger } from '../effects/ledger.js';
import type { StatefoldError } from '../errors.js';
import type { SealingKey } from '../format/keyring.js';
import type { Head } from '../writer/head.js';

/** What `SnapshotEngine.open({ repair: true })` did about a damaged newest chain (see `engine.repaired`). */
export interface Repair {
  /** The newest intact checkpoint: the engine's state is its state, its next checkpoint a base. */
  restoredSeq: number;
  /** The committed seqs after it that do not restore (they stay in the store; `verifyStream` lists them). */
  skipped: number[];
  /** The CORRUPT errors that made the engine pass them over. */
  damage: StatefoldError[];
}

/** What an engine opens with. */
export interface Opened {
  head: Head;
  capturer: Capturer;
  ledger: Ledger;
  sealing: SealingKey | undefined;
  /** The first checkpoint must be a base (part of the newest chain is sealed with a key other than the current one). */
  needBase: boolean;
  /** Opened with `repair` on a damaged newest chain: what it started from instead, and what it passed over. */
  repaired?: Repair;
}
