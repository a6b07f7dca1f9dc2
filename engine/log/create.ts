/**
 * Create-if-absent, and what holds the key when the create did not: the one write every commit,
 * fence, floor, fork and tombstone is made of.
 */
import type { Store } from '../../storage-adapters/store.js';

/** Reads of a key that "exists" with nothing to read, before giving up. */
const READ_BACK_TRIES = 5;

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** What a caller of createOrRead learns besides the result, and how its failures read. */
export interface CreateHooks {
  /** Runs when this call's own create landed (not when an earlier try's is found there). */
  created?: () => Promise<void>;
  /**
   * The error to throw for a store failure: of the create (`create`: its outcome unknown, and it
   * did not read back as ours) or of reading back a key found taken (`read-back`). Default: as is.
   */
  fail?: (err: unknown, phase: 'create' | 'read-back') => unknown;
}

/**
 * Creates `key` with `body`, or says what holds it: 'ours' when `body` is there (created now, or by
 * an earlier try whose answer was lost), else the bytes another write put there. A create that
 * fails may have landed: the key is read back before the error is rethrown. "Exists" with nothing
 * to read is a create that lost a race to a write still landing, or to one that then failed (S3's
 * 409 ConditionalRequestConflict): the key is read again, then created again, a few times with
 * backoff; undefined when it never reads back.
 */
export async function createOrRead(
  store: Store,
  key: string,
  body: Uint8Array,
  signal?: AbortSignal,
  hooks: CreateHooks = {},
): Promise<'ours' | Uint8Array | undefined> {
  const opt = signal ? { signal } : undefined;
  const fail = hooks.fail ?? ((err: unknown) => err);
  for (let attempt = 0; ; attempt++) {
    let created: boolean;
    try {
      created = await store.putIfAbsent(key, body, opt);
    } catch (err) {
      const there = await store.get(key, opt).catch(() => undefined);
      if (there !== undefined && Buffer.compare(there, body) === 0) return 'ours';
      throw fail(err, 'create');
    }
    if (created) {
      await hooks.created?.();
      return 'ours';
    }
    let there: Uint8Array | undefined;
    try {
      there = await store.get(key, opt);
    } catch (err) {
      throw fail(err, 'read-back');
    }
    if (there !== undefined) return Buffer.compare(there, body) === 0 ? 'ours' : there;
    if (attempt + 1 >= READ_BACK_TRIES) return undefined;
    await sleep(10 * 2 ** attempt * (0.5 + Math.random()));
  }
}
