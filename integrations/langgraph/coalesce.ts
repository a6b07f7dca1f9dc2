/**
 * One listing for reads that ask for the same one together. A getTuple by checkpoint id reads the
 * thread's newest entry and looks the id up in the stream's index at once (lookup.ts), and both
 * begin by listing the stream's hints and floors: the same two calls, made twice in one round
 * (on S3 two more LIST requests, billed as PUTs; on SQLite two more queries).
 */
import type { ListOptions, Store } from '../../engine/index.js';

/**
 * `store` with its `list` calls shared: a call made with the same prefix, `startAfter` and `limit`
 * as one already made, before the microtasks queued ahead of that first call have run (the same
 * synchronous run of code, in practice), gets that call's keys instead of asking the store again.
 * No caller that shares can have seen an answer the store gave after the shared call was sent (such
 * answers reach it only after those microtasks), so the one answer is what each could have got; a
 * call made later asks the store. A call with an abort signal, or with options this does not know,
 * is never shared. Every other method is the store's own.
 */
export function coalescing(store: Store): Store {
  const calls = new Map<string, Promise<string[]>>();
  const list = (prefix: string, options?: ListOptions): Promise<string[]> => {
    const { signal, startAfter, limit, ...other } = options ?? {};
    if (signal !== undefined || Object.keys(other).length > 0) return store.list(prefix, options);
    const id = JSON.stringify([prefix, startAfter ?? null, limit ?? null]);
    let call = calls.get(id);
    if (call === undefined) {
      if (calls.size === 0) queueMicrotask(() => calls.clear());
      call = store.list(prefix, options);
      calls.set(id, call);
    }
    // (Each caller its own array: one may sort or change what it got.)
    return call.then((keys) => keys.slice());
  };
  return {
    get: (key, options) => store.get(key, options),
    putIfAbsent: (key, body, options) => store.putIfAbsent(key, body, options),
    list,
    delete: (key, options) => store.delete(key, options),
    removeLeftovers: (prefix, options) => store.removeLeftovers(prefix, options),
    ...(typeof store.scan === 'function' && { scan: (prefix, options) => store.scan!(prefix, options) }),
  };
}
