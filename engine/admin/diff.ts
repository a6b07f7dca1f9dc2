/**
 * diffCheckpoints: what changed between two checkpoints of a stream, as RFC 6902 operations,
 * computed by the same diff that writes deltas (arrays aligned, not rewritten by position).
 */
import jsonpatch from 'fast-json-patch';
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertSeq, assertStore, readingOf } from '../args.js';
import { createCapturer, thaw } from '../capture/index.js';
import { OP_ADD, OP_APPEND, OP_REMOVE, type Op } from '../format/ops.js';
import { restore } from '../restore/index.js';
import type { RestoreOptions } from '../restore/types.js';
import { StreamKeys } from '../log/keys.js';

/** One RFC 6902 operation. */
export type PatchOperation =
  | { op: 'add'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'replace'; path: string; value: unknown };

/** Options of `diffCheckpoints`: how both checkpoints are read (as `restore` reads). */
export type DiffOptions = Pick<
  RestoreOptions,
  'encryption' | 'signal' | 'storeTimeoutMs' | 'maxPayloadBytes' | 'concurrency' | 'schema'
>;

/**
 * The RFC 6902 operations that turn the state of checkpoint `seqA` of `stream` into that of
 * `seqB` (either may be the older one). Applied in order to a copy of A's state (fast-json-patch's
 * applyPatch, for one), they give B's. Values are fresh copies; Dates and typed arrays stay what
 * they are. Rejects as `restore` does for either seq (NOT_FOUND, CORRUPT, KEY_UNAVAILABLE).
 */
export async function diffCheckpoints(
  store: Store,
  stream: string,
  seqA: number,
  seqB: number,
  options: DiffOptions = {},
): Promise<PatchOperation[]> {
  assertStore(store, 'diffCheckpoints');
  const id = new StreamKeys(stream).stream;
  assertSeq(seqA, id, 'diffCheckpoints', 'seqA');
  assertSeq(seqB, id, 'diffCheckpoints', 'seqB');
  options = assertOptions(options, 'diffCheckpoints', id);
  readingOf(options, 'diffCheckpoints');
  const [a, b] = await Promise.all([
    // (Each upcast with `schema`; without one, as stored, in whatever version it was written in.)
    restore(store, stream, { ...options, seq: seqA, schema: options.schema ?? 'stored' }),
    restore(store, stream, { ...options, seq: seqB, schema: options.schema ?? 'stored' }),
  ]);
  const capturer = createCapturer('copy');
  capturer.seed(a.state);
  const ops = capturer.capture(b.state).ops;
  return ops.map((op) => toPatch(op, b.state));
}

/** A stored operation as RFC 6902 (an append becomes a replace with the whole new string). */
function toPatch(op: Op, after: unknown): PatchOperation {
  const [code, path] = op;
  if (code === OP_REMOVE) return { op: 'remove', path };
  if (code === OP_APPEND) return { op: 'replace', path, value: jsonpatch.getValueByPointer(after, path) };
  return { op: code === OP_ADD ? 'add' : 'replace', path, value: thaw(op[2]) };
}
