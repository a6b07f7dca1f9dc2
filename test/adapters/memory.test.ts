import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStore } from 'statefold';
import { describeStoreConformance } from 'statefold/testing';

// The memory store has no storage that can fail, so it gives no createFailing: that check is skipped.
describeStoreConformance({
  name: 'memory',
  honoursListLimit: true,
  create: async () => new MemoryStore(),
});

describe('memory store: ordered keys', () => {
  it('lists as a sorted reference does after any mix of creates and deletes (fast-check)', async () => {
    const key = fc
      .tuple(fc.constantFrom('a', 'a/b', 'ab', 'z'), fc.integer({ min: 0, max: 40 }))
      .map(([dir, n]) => `${dir}/${n.toString(16).padStart(2, '0')}`);
    const op = fc.oneof(
      fc.record({ put: key }),
      fc.record({ del: key }),
      fc.record({
        prefix: fc.constantFrom('', 'a', 'a/', 'a/b/', 'ab/', 'z/0'),
        after: fc.option(key, { nil: undefined }),
        limit: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 120 }), async (ops) => {
        const store = new MemoryStore();
        const reference = new Set<string>();
        for (const o of ops) {
          if ('put' in o) {
            expect(await store.putIfAbsent(o.put, new Uint8Array([1]))).toBe(!reference.has(o.put));
            reference.add(o.put);
          } else if ('del' in o) {
            await store.delete(o.del);
            reference.delete(o.del);
          } else {
            const expected = [...reference]
              .filter((k) => k.startsWith(o.prefix) && (o.after === undefined || k > o.after))
              .sort()
              .slice(0, o.limit ?? Infinity);
            const options = {
              ...(o.after !== undefined ? { startAfter: o.after } : {}),
              ...(o.limit ? { limit: o.limit } : {}),
            };
            expect(await store.list(o.prefix, options)).toEqual(expected);
          }
        }
        expect(store.size).toBe(reference.size);
      }),
      { numRuns: 200, seed: Number(process.env.STATEFOLD_TEST_SEED ?? 1) },
    );
  });
});

describe('memory store: bodies', () => {
  it('rejects a detached body with STORAGE and stores nothing', async () => {
    const store = new MemoryStore();
    const body = new Uint8Array(new ArrayBuffer(8));
    structuredClone(body.buffer, { transfer: [body.buffer] });
    await expect(store.putIfAbsent('f/k', body)).rejects.toMatchObject({ code: 'STORAGE', key: 'f/k' });
    expect(await store.get('f/k')).toBeUndefined();
    expect(await store.putIfAbsent('f/k', Uint8Array.of(1, 2))).toBe(true);
  });

  it('stores a copy of a view into a larger buffer, not the buffer', async () => {
    const store = new MemoryStore();
    const whole = Uint8Array.of(9, 1, 2, 3, 9);
    await store.putIfAbsent('f/k', whole.subarray(1, 4));
    whole.fill(0);
    expect(Array.from((await store.get('f/k'))!)).toEqual([1, 2, 3]);
  });
});

describe('memory store: malformed arguments', () => {
  it('rejects a key or limit that cannot even be turned into text with INVALID_ARGUMENT, not a TypeError', async () => {
    const store = new MemoryStore();
    await expect(store.get(1n as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^get 1n \(a bigint\): not a valid store key/),
    });
    await expect(store.delete(Object.create(null) as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(store.list('a/', { limit: Object.create(null) as never })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'list "a/": limit an object with a null prototype is not a positive integer',
    });
  });
});
