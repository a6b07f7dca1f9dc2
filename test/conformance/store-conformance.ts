import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StatefoldError, type Store } from 'statefold';

/** How a store test file hands its store to the shared suite (as langgraph's checkpoint-validation). */
export interface StoreInitializer {
  /** Shown in test names: `describe('<name> store: ...')`. */
  name: string;
  /** Once before the suite (start a server, make a bucket). */
  beforeAll?(): Promise<void>;
  /** A store whose keys do not overlap with any other store created by this initializer. */
  create(): Promise<Store>;
  /** Once after the suite. */
  afterAll?(): Promise<void>;
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

/** The contract every store keeps; each adapter's test file calls this and adds its own native checks. */
export function describeStoreConformance(init: StoreInitializer): void {
  describe(`${init.name} store: conformance`, () => {
    beforeAll(async () => {
      await init.beforeAll?.();
    }, 120_000);
    afterAll(async () => {
      await init.afterAll?.();
    }, 120_000);

    describe('get and putIfAbsent', () => {
      it('round-trips empty, small and large bodies byte for byte', async () => {
        const store = await init.create();
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
        const store = await init.create();
        expect(await store.get('missing/key')).toBeUndefined();
      });

      it('returns false and keeps the first body when the key already exists', async () => {
        const store = await init.create();
        expect(await store.putIfAbsent('once/k', bytes('first'))).toBe(true);
        expect(await store.putIfAbsent('once/k', bytes('second'))).toBe(false);
        expect(Buffer.from((await store.get('once/k'))!).toString()).toBe('first');
      });

      it('lets exactly one of many concurrent callers create a key', async () => {
        const store = await init.create();
        const results = await Promise.all(
          Array.from({ length: 16 }, (_, i) => store.putIfAbsent('race/k', bytes(`writer-${i}`))),
        );
        expect(results.filter(Boolean)).toHaveLength(1);
        const winner = results.indexOf(true);
        expect(Buffer.from((await store.get('race/k'))!).toString()).toBe(`writer-${winner}`);
      });

      it('is not changed by mutating the buffer that was written or read', async () => {
        const store = await init.create();
        const body = bytes('abc');
        await store.putIfAbsent('alias/k', body);
        body[0] = 0x7a;
        const read = (await store.get('alias/k'))!;
        read[1] = 0x7a;
        expect(Buffer.from((await store.get('alias/k'))!).toString()).toBe('abc');
      });

      it('rejects a malformed key with INVALID_ARGUMENT before touching storage', async () => {
        const store = await init.create();
        for (const key of ['', '../x', 'a//b', 'a/./b', 'sp ace', 'a\\b', '/abs']) {
          await expect(store.putIfAbsent(key, bytes('x')), key).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
          await expect(store.get(key), key).rejects.toBeInstanceOf(StatefoldError);
        }
      });
    });

    describe('list', () => {
      it('lists keys under a prefix in ascending order', async () => {
        const store = await init.create();
        const keys = ['l/0000000000000003', 'l/0000000000000001', 'l/000000000000000a', 'l/0000000000000002', 'l/0000000000000001.0000000000000002'];
        for (const key of keys) await store.putIfAbsent(key, bytes(key));
        await store.putIfAbsent('m/0000000000000001', bytes('other'));
        expect(await store.list('l/')).toEqual([...keys].sort());
      });

      it('lists only keys after startAfter, which need not exist', async () => {
        const store = await init.create();
        for (const n of [1, 2, 3, 4, 5]) await store.putIfAbsent(`sa/${n}`, bytes(String(n)));
        expect(await store.list('sa/', { startAfter: 'sa/2' })).toEqual(['sa/3', 'sa/4', 'sa/5']);
        expect(await store.list('sa/', { startAfter: 'sa/2.5' })).toEqual(['sa/3', 'sa/4', 'sa/5']);
        expect(await store.list('sa/', { startAfter: 'sa/5' })).toEqual([]);
        expect(await store.list('sa/', { startAfter: 'a' })).toEqual(['sa/1', 'sa/2', 'sa/3', 'sa/4', 'sa/5']);
      });

      it('keeps prefixes apart: a/b is not listed under a/bc, nor ab under a', async () => {
        const store = await init.create();
        for (const key of ['iso/a/b', 'iso/a/bc/d', 'iso/ab/c', 'iso/a-/x']) await store.putIfAbsent(key, bytes(key));
        expect(await store.list('iso/a/')).toEqual(['iso/a/b', 'iso/a/bc/d']);
        expect(await store.list('iso/a/bc/')).toEqual(['iso/a/bc/d']);
        expect(await store.list('iso/ab/')).toEqual(['iso/ab/c']);
        expect(await store.list('iso/a/b')).toEqual(['iso/a/b', 'iso/a/bc/d']);
        expect(await store.list('nothing/here/')).toEqual([]);
      });

      it('returns an empty list for an unknown prefix', async () => {
        const store = await init.create();
        expect(await store.list('never/written/')).toEqual([]);
      });
    });

    describe('delete', () => {
      it('removes an object so that get, list and putIfAbsent see it gone', async () => {
        const store = await init.create();
        await store.putIfAbsent('del/k', bytes('v1'));
        await store.delete('del/k');
        expect(await store.get('del/k')).toBeUndefined();
        expect(await store.list('del/')).toEqual([]);
        expect(await store.putIfAbsent('del/k', bytes('v2'))).toBe(true);
        expect(Buffer.from((await store.get('del/k'))!).toString()).toBe('v2');
      });

      it('resolves quietly when the key does not exist', async () => {
        const store = await init.create();
        await expect(store.delete('del/never')).resolves.toBeUndefined();
      });
    });
  });
}
