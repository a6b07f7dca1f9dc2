/** The head: what a writing engine knows of its stream's last committed checkpoint. */
import type { SpanState } from '../log/chain.js';

/** What the engine knows of the stream's last committed checkpoint. */
export interface Head {
  seq: number;
  /** CRC-32 of its frame: the next delta's `parent`. */
  crc: number;
  /** Its captured state; undefined for a new stream, or when unknown (then the next checkpoint must be a base). */
  state: unknown;
  /** Its meta, encoded. */
  meta: Uint8Array | undefined;
  baseSeq: number;
  /** Stored sizes of its chain's base and of the deltas since (the base policy's size trigger). */
  baseBytes: number;
  deltaBytes: number;
  /** A chain written with span deltas: what its next span delta needs. */
  span?: SpanState | undefined;
}

/** The head of a stream with no checkpoint. */
export const EMPTY_HEAD: Head = Object.freeze({
  seq: 0,
  crc: 0,
  state: undefined,
  meta: undefined,
  baseSeq: 0,
  baseBytes: 0,
  deltaBytes: 0,
});
