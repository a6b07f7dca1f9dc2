/**
 * Operations: a delta's payload is a list of RFC 6902 operations, stored compactly as
 * `[code, JSON Pointer, value?]`. Capture writes them, fold reads them; both import them from here.
 */

/** RFC 6902 operation codes as stored: add, remove, replace (never renumber). */
export const OP_ADD = 0;
export const OP_REMOVE = 1;
export const OP_REPLACE = 2;

/** One operation: [code, JSON Pointer, value] (no value for remove). */
export type Op = [number, string] | [number, string, unknown];
