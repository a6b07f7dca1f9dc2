/**
 * Commit: one create-if-absent write of a seq's key is the commit (Delta Lake's `N.json`). The
 * hard part is the write whose outcome is unknown (the store failed, but the write may have
 * landed, or may land later): read back before reporting failure, recognise our own frame when a
 * retry finds the key taken, and never let a late write of ours resurrect deleted history.
 */
import type { Store } from '../../storage-adapters/store.js';
import { failure, wrapStorage } from '../errors.js';
import { createOrRead } from '../log/create.js';
import { decodeFrame, type Frame, type FrameReading } from '../format/frame.js';
import type { StreamKeys } from '../log/keys.js';
import { unlockFrame } from '../log/read.js';

/** Commits one engine's frames, each to its seq's key, remembering the key of a write whose outcome is unknown. */
export class Committer {
  /** The key of a write whose outcome is unknown (it may yet land, or have landed). */
  #uncertainKey: string | undefined;

  constructor(
    private readonly store: Store,
    private readonly keys: StreamKeys,
    private readonly identity: { epoch: number; writer: string },
    private readonly limits: FrameReading,
  ) {}

  /**
   * Creates `key`. Resolves 'ours' when our frame is there (created now, or by an earlier try
   * whose answer was lost), the landed frame when an earlier failed write of this engine is
   * there, and throws FENCED when another engine's frame is there.
   */
  async commit(key: string, seq: number, frame: Uint8Array): Promise<'ours' | Frame> {
    const stream = this.keys.stream;
    const there = await createOrRead(this.store, key, frame, undefined, {
      created: async () => {
        if (this.#uncertainKey === key) await this.#checkNotStale(key, seq);
        this.#uncertainKey = undefined;
      },
      fail: (err, phase) => {
        if (phase === 'read-back') return wrapStorage(err, stream, seq, key, 'commit (reading back a key found taken)');
        // It may still land (a request that timed out), or have landed and later be deleted.
        this.#uncertainKey = key;
        return wrapStorage(err, stream, seq, key, 'commit');
      },
    });
    if (there === 'ours') return 'ours';
    if (there === undefined)
      throw failure(
        'STORAGE',
        { op: 'commit', stream, seq, key },
        'the store keeps reporting the key exists but it cannot be read',
      );
    const origin = { stream, key, seq };
    const other = decodeFrame(there, origin, this.limits);
    // Ours (an earlier try that landed): the caller rebuilds its state from it, so open it.
    if (other.header.writer === this.identity.writer && other.kind !== 'fence')
      return unlockFrame(other, origin, this.limits);
    throw failure(
      'FENCED',
      { op: 'commit', stream, seq, key },
      `taken by another engine (its epoch ${other.header.epoch}, ours ${this.identity.epoch}); this engine may no longer write`,
    );
  }

  /**
   * After creating a key that an earlier write of ours may have landed on: if that write landed,
   * the stream moved on past it and retention deleted it, this create succeeded on a freed key of
   * deleted history. Retention always records a floor above a seq before deleting it, so a floor
   * above ours tells exactly; then we are stale: take the object back (it is below the floor,
   * invisible to every reader) and fail FENCED. Newer keys alone prove nothing: a claim that jumped
   * ahead of this engine leaves its fence above a slot this engine may still commit, and may
   * already have built fillers on this very commit. Only runs after an unknown outcome.
   */
  async #checkNotStale(key: string, seq: number): Promise<void> {
    const keys = this.keys;
    const floors = await this.store.list(keys.floors);
    if (!floors.some((k) => (keys.parseFloor(k) ?? 0) > seq)) return;
    await this.store.delete(key).catch(() => undefined);
    throw failure(
      'FENCED',
      { op: 'commit', stream: keys.stream, seq, key },
      "the stream has moved past this engine (newer seqs exist, and this seq's earlier copy was deleted by retention); this engine may no longer write",
    );
  }
}
