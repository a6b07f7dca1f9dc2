/**
 * readCheckpointMeta: the meta of one checkpoint, without listing the stream or folding a state.
 * An integration that keeps its own index in the meta (the LangGraph saver binary-searches on it)
 * probes many seqs; each probe is one read of the seq's first object, as a checkpoint there was
 * created only if absent and so is committed. Only when an engine's fence holds that key (the
 * checkpoint follows it) or the object is gone does it fall back to a listing.
 */
import type { Store } from '../../storage-adapters/store.js';
import { assertOptions, assertSeq, assertStore, readingOf } from '../args.js';
import { StatefoldError, isStatefoldError } from '../errors.js';
import { decodeMeta } from '../format/frame.js';
import { guardStore, resolveStoreTimeout } from '../log/guard.js';
import { StreamKeys } from '../log/keys.js';
import { readFrame } from '../log/read.js';
import { listCheckpoints } from './list.js';
import type { ListCheckpointsOptions } from './types.js';

/** Options of `readCheckpointMeta`. */
export type ReadMetaOptions = Pick<
  ListCheckpointsOptions,
  'signal' | 'storeTimeoutMs' | 'maxPayloadBytes' | 'encryption'
>;

/**
 * Reads the meta of committed checkpoint `seq` of `stream` (what was given to `checkpoint`),
 * usually in one store read; NOT_FOUND when the stream holds no checkpoint at `seq`, CORRUPT when
 * it is damaged, KEY_UNAVAILABLE for an encrypted stream read without its key.
 */
export async function readCheckpointMeta(
  store: Store,
  stream: string,
  seq: number,
  options: ReadMetaOptions = {},
): Promise<unknown> {
  assertStore(store, 'readCheckpointMeta');
  const keys = new StreamKeys(stream);
  options = assertOptions(options, 'readCheckpointMeta', keys.stream);
  assertSeq(seq, keys.stream, 'readCheckpointMeta');
  const reading = readingOf(options, 'readCheckpointMeta');
  const guarded = guardStore(store, resolveStoreTimeout(options.storeTimeoutMs, 'readCheckpointMeta'));
  const key = keys.slot(seq);
  try {
    const frame = await readFrame(guarded, keys, seq, key, reading, options.signal);
    if (frame.kind !== 'fence') return decodeMeta(frame, { stream: keys.stream, seq, key });
  } catch (err) {
    if (!isStatefoldError(err, 'NOT_FOUND')) throw err;
  }
  const [listed] = await listCheckpoints(store, keys.stream, { ...options, before: seq + 1, limit: 1, reverse: true });
  if (listed?.seq !== seq)
    throw new StatefoldError('NOT_FOUND', `stream ${JSON.stringify(keys.stream)} seq ${seq}: no checkpoint`, {
      stream: keys.stream,
      seq,
    });
  if (listed.damaged) throw listed.error;
  return listed.meta;
}
