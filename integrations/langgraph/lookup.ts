/**
 * getTuple of an older checkpoint: its seq found through the stream's index (locate.ts, viaIndex)
 * beside the read of the newest seq, else by today's search; then its state with its writes.
 */
import type { ThreadMeta, ThreadState } from './codec.js';
import { checkpointOf } from './history.js';
import { newestAnswers, type Entry } from './locate.js';
import type { Thread } from './thread.js';

/**
 * Checkpoint `id` of thread `t` with its own writes and meta, or undefined when the thread holds
 * none. The newest seq and the index are read together (two dependent rounds on a store that
 * scans); when the index cannot tell, the stream is searched.
 */
export async function checkpointById(
  t: Thread,
  id: string,
): Promise<{ state: ThreadState; meta: ThreadMeta } | undefined> {
  const newestRead = t.newest();
  // (Also when this process saw where the checkpoint is: the index reads it in as few rounds.)
  const indexed = t.indexed ? t.viaIndex(id, newestRead) : undefined;
  indexed?.catch(() => undefined); // (unused when the newest answers)
  // Without an index, the oldest seq bounds the search: read beside the newest, not after it.
  const oldest = t.searches(id) && indexed === undefined ? t.oldest() : undefined;
  oldest?.catch(() => undefined);
  const newest = await newestRead;
  if (indexed !== undefined && !newestAnswers(id, newest)) {
    const found = await indexed;
    if (found === 'absent') return undefined;
    if (found !== undefined) return checkpointOf(t.stream, id, found.seq, found.meta, found.at, found.next);
  }
  // (The metas the lookup read are this checkpoint's and the next seq's: not read again.)
  const probed = new Map<number, Entry>();
  const seq = await t.locate(id, newest, probed, oldest);
  if (seq === undefined) return undefined;
  return t.checkpointAt(id, seq, probed.get(seq)?.meta, probed.get(seq + 1) ?? newest);
}
