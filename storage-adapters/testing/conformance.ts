import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StatefoldError } from '../errors.js';
import type { Store } from '../store.js';

/** How a store's test file hands its store to the shared suite (in the manner of langgraph's checkpoint-validation). */
export interface StoreInitializer<S extends Store = Store> {
  /** Shown in test names: `describe('<name> store: ...')`. */
  name: string;
  /** Once before the suite (start a server, make a bucket). */
  beforeAll?(): Promise<void>;
  /** A store whose keys do not overlap with any other store created by this initializer. */
  create(): Promise<S>;
  /** After each test, once for every store it created (close a client, remove a directory). */
  destroy?(store: S): Promise<void> | void;
  /**
   * A store whose storage fails every operation (a server that cannot be reached, a bucket that
   * does not exist, a directory that cannot be one). Without it the failure check is skipped.
   */
  createFailing?(): Promise<S>;
  /** Once after the suite. */
  afterAll?(): Promise<void>;
  /**
   * The store returns exactly `limit` keys when more exist, and rejects a `limit` that is not a
   * positive integer with INVALID_ARGUMENT (statefold's stores do). Without it the suite checks
   * only what callers rely on: a page is the start of the listing, at least `limit` long.
   */
  honoursListLimit?: boolean;
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

/** The contract every store keeps; each adapter's test file calls this and adds its own native checks. */
export function describeStoreConformance<S extends Store>(init: StoreInitializer<S>): void {
  describe(`${init.name} store: conformance`, () => {
    const created: S[] = [];
    const track = async (make: () => Promise<S>): Promise<S> => {
      const store = await make();
      created.push(store);
      return store;
    };
    const create = (): Promise<S> => track(() => init.create());

    beforeAll(async () => {
      await init.beforeAll?.();
    }, 120_000);
    afterEach(async () => {
      for (const store of created.splice(0)) await init.destroy?.(store);
    }, 120_000);
    afterAll(async () => {
      await init.afterAll?.();
    }, 120_000);

    describe('get and putIfAbsent', () => {
      it('round-trips empty, small and large bodies byte for byte', async () => {
        const store = await create();
        const large = new Uint8Array(3 * 1024 * 1024 + 17);
        for (let i = 0; i < large.length; i++) large[i] = (i * 2654435761) >>> 24;
        const cases: [string, Uint8Array][] = [
          ['rt/empty', new Uint8Array(0)],
          ['rt/small', bytes('hello, statefold')],
          ['rt/binary', Uint8Array.from([0, 255, 1, 254, 0, 0, 10, 13])],
          ['rt/large', large],
        ];
        for (const [key, body] of cases) expect(await store.putIfAbsent(key, body)).toBe(true);
        for (const [key, body] of cases) {
          const got = await store.get(key);
          expect(got, key).toBeInstanceOf(Uint8Array);
          expect(got!.byteLength, key).toBe(body.byteLength);
          expect(Buffer.compare(Buffer.from(got!), Buffer.from(body)), key).toBe(0);
        }
      }, 60_000);

      it('resolves undefined for a key that was never written', async () => {
        const store = await create();
        expect(await store.get('missing/key')).toBeUndefined();
      });

      it('returns false and keeps the first body when the key already exists', async () => {
        const store = await create();
        expect(await store.putIfAbsent('once/k', bytes('first'))).toBe(true);
        expect(await store.putIfAbsent('once/k', bytes('second'))).toBe(false);
        expect(Buffer.from((await store.get('once/k'))!).toString()).toBe('first');
      });

      it('lets exactly one of many concurrent callers create a key', async () => {
        const store = await create();
        const results = await Promise.all(
          Array.from({ length: 16 }, (_, i) => store.putIfAbsent('race/k', bytes(`writer-${i}`))),
        );
        expect(results.filter(Boolean)).toHaveLength(1);
        const winner = results.indexOf(true);
        expect(Buffer.from((await store.get('race/k'))!).toString()).toBe(`writer-${winner}`);
      });

      it('is not changed by mutating the buffer that was written or read', async () => {
        const store = await create();
        const body = bytes('abc');
        await store.putIfAbsent('alias/k', body);
        body[0] = 0x7a;
        const read = (await store.get('alias/k'))!;
        read[1] = 0x7a;
        expect(Buffer.from((await store.get('alias/k'))!).toString()).toBe('abc');
      });

      it('stores exactly the bytes of a body that is a view into a larger buffer', async () => {
        const store = await create();
        // As frames are: slices of a shared pool, with bytes of other objects on either side.
        const pool = Buffer.from('xxxxabcdefyyyy');
        await store.putIfAbsent('view/k', pool.subarray(4, 10));
        pool.fill(0x7a);
        expect(Buffer.from((await store.get('view/k'))!).toString()).toBe('abcdef');
      });

      it('rejects a malformed key with INVALID_ARGUMENT before touching storage', async () => {
        const store = await create();
        for (const key of ['', '../x', 'a//b', 'a/./b', 'sp ace', 'a\\b', '/abs']) {
          await expect(store.putIfAbsent(key, bytes('x')), key).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
          await expect(store.get(key), key).rejects.toBeInstanceOf(StatefoldError);
        }
      });
    });

    describe('list', () => {
      it('lists keys under a prefix in ascending order', async () => {
        const store = await create();
        const keys = [
          'l/0000000000000003',
          'l/0000000000000001',
          'l/000000000000000a',
          'l/0000000000000002',
          'l/0000000000000001.0000000000000002',
        ];
        for (const key of keys) await store.putIfAbsent(key, bytes(key));
        await store.putIfAbsent('m/0000000000000001', bytes('other'));
        expect(await store.list('l/')).toEqual([...keys].sort());
      });

      it('lists only keys after startAfter, which need not exist', async () => {
        const store = await create();
        for (const n of [1, 2, 3, 4, 5]) await store.putIfAbsent(`sa/${n}`, bytes(String(n)));
        expect(await store.list('sa/', { startAfter: 'sa/2' })).toEqual(['sa/3', 'sa/4', 'sa/5']);
        expect(await store.list('sa/', { startAfter: 'sa/2.5' })).toEqual(['sa/3', 'sa/4', 'sa/5']);
        expect(await store.list('sa/', { startAfter: 'sa/5' })).toEqual([]);
        expect(await store.list('sa/', { startAfter: 'a' })).toEqual(['sa/1', 'sa/2', 'sa/3', 'sa/4', 'sa/5']);
      });

      it('lists pages with limit, which continue with startAfter to the whole listing', async () => {
        const store = await create();
        const keys = Array.from({ length: 12 }, (_, i) => `pg/${String(i).padStart(2, '0')}`);
        for (const key of keys) await store.putIfAbsent(key, bytes(key));
        const first = await store.list('pg/', { limit: 5 });
        expect(first.length).toBeGreaterThanOrEqual(5);
        expect(first).toEqual(keys.slice(0, first.length));
        if (init.honoursListLimit) expect(first).toHaveLength(5);
        const paged: string[] = [];
        for (let page = 0, after: string | undefined; page < 20; page++) {
          const got = await store.list('pg/', { limit: 5, ...(after !== undefined ? { startAfter: after } : {}) });
          paged.push(...got);
          if (got.length < 5) break;
          after = got[got.length - 1];
        }
        expect(paged).toEqual(keys);
        expect(await store.list('pg/', { startAfter: 'pg/10', limit: 5 })).toEqual(['pg/11']);
        if (init.honoursListLimit) {
          for (const limit of [0, -1, 1.5, Number.NaN])
            await expect(store.list('pg/', { limit })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
        }
      });

      it('keeps prefixes apart: a/b is not listed under a/bc, nor ab under a', async () => {
        const store = await create();
        for (const key of ['iso/a/b', 'iso/a/bc/d', 'iso/ab/c', 'iso/a-/x']) await store.putIfAbsent(key, bytes(key));
        expect(await store.list('iso/a/')).toEqual(['iso/a/b', 'iso/a/bc/d']);
        expect(await store.list('iso/a/bc/')).toEqual(['iso/a/bc/d']);
        expect(await store.list('iso/ab/')).toEqual(['iso/ab/c']);
        expect(await store.list('iso/a/b')).toEqual(['iso/a/b', 'iso/a/bc/d']);
        expect(await store.list('nothing/here/')).toEqual([]);
      });

      it('returns an empty list for an unknown prefix', async () => {
        const store = await create();
        expect(await store.list('never/written/')).toEqual([]);
      });
    });

    describe('scan (optional)', () => {
      it("gives what list gives with each key's bytes, for the same options, when the store scans", async () => {
        const store = await create();
        if (typeof store.scan !== 'function') return; // (optional: the engine lists and reads instead)
        const keys = Array.from({ length: 12 }, (_, i) => `sc/${String(i).padStart(2, '0')}`);
        for (const [i, key] of keys.entries()) await store.putIfAbsent(key, bytes(`${key} `.repeat(i * 300)));
        await store.putIfAbsent('sc0/other', bytes('beside'));
        for (const options of [
          {},
          { startAfter: 'sc/03' },
          { startAfter: 'sc/035' },
          { limit: 4 },
          { startAfter: 'sc/09', limit: 2 },
        ]) {
          const listed = await store.list('sc/', options);
          const scanned = await store.scan('sc/', options);
          expect(scanned.map((o) => o.key)).toEqual(listed);
          for (const { key, body } of scanned)
            expect(Buffer.from(body).equals(Buffer.from((await store.get(key))!))).toBe(true);
        }
        expect(await store.scan('nothing/here/')).toEqual([]);
        await store.delete('sc/05');
        expect((await store.scan('sc/', { startAfter: 'sc/04', limit: 2 })).map((o) => o.key)).toEqual([
          'sc/06',
          'sc/07',
        ]);
        const reason = new Error('aborted by the conformance suite');
        const err = await outcome(() => store.scan!('sc/', { signal: AbortSignal.abort(reason) }));
        expect((err as StatefoldError).code).toBe('ABORTED');
      });
    });

    describe('delete', () => {
      it('removes an object so that get, list and putIfAbsent see it gone', async () => {
        const store = await create();
        await store.putIfAbsent('del/k', bytes('v1'));
        await store.delete('del/k');
        expect(await store.get('del/k')).toBeUndefined();
        expect(await store.list('del/')).toEqual([]);
        expect(await store.putIfAbsent('del/k', bytes('v2'))).toBe(true);
        expect(Buffer.from((await store.get('del/k'))!).toString()).toBe('v2');
      });

      it('resolves quietly when the key does not exist', async () => {
        const store = await create();
        await expect(store.delete('del/never')).resolves.toBeUndefined();
      });
    });

    // deleteStream calls removeLeftovers once a stream's keys are deleted; it must never take a key.
    describe('removeLeftovers', () => {
      const keys = ['lo/a', 'lo/b/c', 'lo/b/d/e', 'lo2/f', 'l/g'];

      it('removes no key, under the prefix or beside it', async () => {
        const store = await create();
        for (const key of keys) await store.putIfAbsent(key, bytes(key));
        await store.removeLeftovers('lo/');
        expect(await store.list('l')).toEqual([...keys].sort());
        for (const key of keys) expect(Buffer.from((await store.get(key))!).toString(), key).toBe(key);
      });

      it('leaves a prefix whose keys were all deleted empty, and writable again', async () => {
        const store = await create();
        for (const key of keys) await store.putIfAbsent(key, bytes(key));
        for (const key of keys.filter((k) => k.startsWith('lo/'))) await store.delete(key);
        await store.removeLeftovers('lo/');
        expect(await store.list('lo/')).toEqual([]);
        expect(await store.list('l')).toEqual(['l/g', 'lo2/f']);
        expect(await store.putIfAbsent('lo/b/d/e', bytes('again'))).toBe(true);
        expect(Buffer.from((await store.get('lo/b/d/e'))!).toString()).toBe('again');
      });

      it('resolves for a prefix that was never written', async () => {
        const store = await create();
        await expect(store.removeLeftovers('never/')).resolves.toBeUndefined();
      });
    });

    describe('failures', () => {
      it.skipIf(init.createFailing === undefined)(
        'rejects every operation with STORAGE naming the operation and key, with a cause, when storage fails',
        async () => {
          const store = await track(() => init.createFailing!());
          const calls: [op: string, key: string, call: () => Promise<unknown>][] = [
            ['get', 'fail/get', () => store.get('fail/get')],
            ['putIfAbsent', 'fail/put', () => store.putIfAbsent('fail/put', bytes('x'))],
            ['list', 'fail/', () => store.list('fail/')],
            ['delete', 'fail/delete', () => store.delete('fail/delete')],
          ];
          for (const [op, key, call] of calls) {
            const err = await outcome(call);
            expect(err, `${op} should reject`).toBeInstanceOf(StatefoldError);
            expect((err as StatefoldError).code, op).toBe('STORAGE');
            expect((err as StatefoldError).cause, `${op} error has a cause`).toBeDefined();
            const message = (err as StatefoldError).message;
            expect(
              message.startsWith(`${op} ${key}: `),
              `${op}: the message "${message}" names the operation and key`,
            ).toBe(true);
          }
        },
        60_000,
      );
    });

    describe('abort', () => {
      it('rejects every operation given an already aborted signal, with the reason as cause, and writes nothing', async () => {
        const store = await create();
        const reason = new Error('aborted by the conformance suite');
        const signal = AbortSignal.abort(reason);
        await store.putIfAbsent('abort/there', bytes('kept'));
        const calls: [op: string, call: () => Promise<unknown>][] = [
          ['get', () => store.get('abort/there', { signal })],
          ['putIfAbsent', () => store.putIfAbsent('abort/new', bytes('x'), { signal })],
          ['list', () => store.list('abort/', { signal })],
          ['delete', () => store.delete('abort/there', { signal })],
          ['removeLeftovers', () => store.removeLeftovers('abort/', { signal })],
        ];
        for (const [op, call] of calls) {
          const err = await outcome(call);
          expect(err, `${op} should reject`).toBeInstanceOf(StatefoldError);
          expect((err as StatefoldError).code, op).toBe('ABORTED');
          expect((err as StatefoldError).cause, op).toBe(reason);
        }
        expect(await store.get('abort/new')).toBeUndefined();
        expect(await store.list('abort/')).toEqual(['abort/there']);
      });
    });
  });
}

/** What a call rejected with, or a marker object when it resolved (so that the assertions fail). */
async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  return call().then(
    (value) => ({ resolved: value }),
    (err: unknown) => err,
  );
}
