/**
 * Operations: a delta's payload is a list of RFC 6902 operations, stored compactly as
 * `[code, JSON Pointer, value?]`. Capture writes them, fold reads them; both import them from here.
 */

/** RFC 6902 operation codes as stored: add, remove, replace (never renumber). */
export const OP_ADD = 0;
export const OP_REMOVE = 1;
export const OP_REPLACE = 2;
/**
 * Not RFC 6902: append the value (a string) to the string at the pointer, so that text that grows
 * (streamed tokens) stores only what was added. Frames holding one are format version 2.
 */
export const OP_APPEND = 3;

/** Strings shorter than this are replaced whole: an append would save next to nothing. */
export const MIN_APPEND_BASE = 32;

/** The frame format version a delta with these ops needs: 2 when it appends, else 1. */
export function opsVersion(ops: readonly Op[]): 1 | 2 {
  for (const op of ops) if (op[0] === OP_APPEND) return 2;
  return 1;
}

/** One operation: [code, JSON Pointer, value] (no value for remove). */
export type Op = [number, string] | [number, string, unknown];
