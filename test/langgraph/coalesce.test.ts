import { describe, expect, it } from 'vitest';
import { MemoryStore, type ListOptions, type Store } from 'statefold';
import { coalescing } from '../../integrations/langgraph/coalesce.js';

/** A memory store that counts its list calls. */
function counted(): { store: Store; lists: () => number } {
  const inner = new MemoryStore();
  let lists = 0;
  const store: Store = {
    get: (k, o) => inner.get(k, o),
    putIfAbsent: (k, b, o) => inner.putIfAbsent(k, b, o),
    list: (p: string, o?: ListOptions) => {
      lists++;
      return inner.list(p, o);
    },
    delete: (k, o) => inner.delete(k, o),
    removeLeftovers: (p, o) => inner.removeLeftovers(p, o),
  };
  return { store, lists: () => lists };
}

const body = new Uint8Array([1]);

describe('coalescing (the saver: one listing for reads that ask for it together)', () => {
  it('shares a list made again in the same turn, each caller with its own array', async () => {
    const { store, lists } = counted();
    await store.putIfAbsent('s/a', body);
    await store.putIfAbsent('s/b', body);
    const shared = coalescing(store);
    const [one, two, other] = await Promise.all([shared.list('s/'), shared.list('s/', {}), shared.list('t/')]);
    expect(one).toEqual(['s/a', 's/b']);
    expect(two).toEqual(['s/a', 's/b']);
    expect(other).toEqual([]);
    expect(lists()).toBe(2);
    one.pop();
    expect(two).toEqual(['s/a', 's/b']);
  });

  it('asks the store again after an await: a later list sees what was written since', async () => {
    const { store, lists } = counted();
    const shared = coalescing(store);
    expect(await shared.list('s/')).toEqual([]);
    await store.putIfAbsent('s/a', body);
    expect(await shared.list('s/')).toEqual(['s/a']);
    // Made in the same turn as a write, but after an await of it: not shared with the earlier list.
    const first = shared.list('s/');
    await shared.putIfAbsent('s/b', body);
    expect(await shared.list('s/')).toEqual(['s/a', 's/b']);
    expect(await first).toEqual(['s/a']);
    expect(lists()).toBe(4);
  });

  it('shares only the same prefix, startAfter and limit, and never a call with a signal', async () => {
    const { store, lists } = counted();
    for (const k of ['s/a', 's/b', 's/c']) await store.putIfAbsent(k, body);
    const shared = coalescing(store);
    const signal = new AbortController().signal;
    const got = await Promise.all([
      shared.list('s/', { startAfter: 's/a' }),
      shared.list('s/', { startAfter: 's/a', limit: 1 }),
      shared.list('s/', { limit: 1 }),
      shared.list('s/', { startAfter: 's/a', signal }),
      shared.list('s/', { startAfter: 's/a' }),
      // (An option this does not know may change the answer: asked again.)
      shared.list('s/', { startAfter: 's/a', reverse: true } as ListOptions),
    ]);
    expect(got).toEqual([['s/b', 's/c'], ['s/b'], ['s/a'], ['s/b', 's/c'], ['s/b', 's/c'], ['s/b', 's/c']]);
    expect(lists()).toBe(5);
  });

  it('gives a failure to every caller that shared the call, and lists again after it', async () => {
    let fail = true;
    const inner = new MemoryStore();
    const store: Store = {
      ...inner,
      get: (k, o) => inner.get(k, o),
      putIfAbsent: (k, b, o) => inner.putIfAbsent(k, b, o),
      delete: (k, o) => inner.delete(k, o),
      removeLeftovers: (p, o) => inner.removeLeftovers(p, o),
      list: (p, o) => (fail ? Promise.reject(new Error('down')) : inner.list(p, o)),
    };
    const shared = coalescing(store);
    const results = await Promise.allSettled([shared.list('s/'), shared.list('s/')]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await shared.list('s/')).toEqual([]);
  });

  it('keeps scan only where the store has it', () => {
    expect(typeof coalescing(new MemoryStore()).scan).toBe('function');
    expect(coalescing(counted().store).scan).toBeUndefined();
  });
});
