import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, restore } from 'statefold';
import { checkpointKey, forgeFrame, frameChecksum } from '../support/forge-frame.js';

/**
 * Text that grows stores what was added: a string that becomes itself plus more is an append
 * (format version 2), not a replace of the whole text. Seed: STATEFOLD_TEST_SEED (default 1).
 */
const SEED = Number(process.env.STATEFOLD_TEST_SEED ?? 1);

/** The format version byte of each checkpoint object, from the keys its commits named. */
async function versions(store: MemoryStore, keys: string[]): Promise<number[]> {
  return Promise.all(keys.map(async (key) => (await store.get(key))![4]!));
}

for (const updates of ['copy', 'immutable'] as const) {
  describe(`strings (${updates}): streamed tokens`, () => {
    it('stores each step as one append of the new tokens, in version 2 frames', async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open<{ reply: { role: string; text: string } }>({
        store,
        stream: 'tokens',
        updates,
        policy: { baseEvery: 1000, maxDeltaRatio: Infinity },
      });
      let text = 'The answer, in short: '.padEnd(40, '.');
      const keys = [(await engine.checkpoint({ reply: { role: 'assistant', text } })).key];
      for (let step = 0; step < 50; step++) {
        const tokens = ` token${step} and more words`;
        text += tokens;
        const info = await engine.checkpoint({ reply: { role: 'assistant', text } });
        keys.push(info.key);
        expect(info.ops, `step ${step}`).toBe(1);
        // The frame holds the tokens and its header, not the whole text so far.
        expect(info.bytes, `step ${step}`).toBeLessThan(tokens.length + 120);
      }
      await engine.close();
      expect((await restore(store, 'tokens')).state).toEqual({ reply: { role: 'assistant', text } });
      expect(await versions(store, keys)).toEqual([1, ...Array.from({ length: 50 }, () => 2)]);
    });

    it('keeps writing version 1 frames while nothing is appended (older readers can read them)', async () => {
      const store = new MemoryStore();
      const engine = await SnapshotEngine.open({ store, stream: 'v1', updates, policy: { baseEvery: 1000 } });
      const keys: string[] = [];
      for (let n = 0; n < 5; n++)
        keys.push((await engine.checkpoint({ n, text: `replaced whole, not appended ${n}`.repeat(3) })).key);
      await engine.close();
      expect(await versions(store, keys)).toEqual([1, 1, 1, 1, 1]);
    });

    it('restores every seq exactly under random appends, replaces, truncations and prepends', async () => {
      const change = fc.oneof(
        fc.record({ kind: fc.constant('append' as const), text: fc.string({ minLength: 1, maxLength: 20 }) }),
        fc.record({ kind: fc.constant('replace' as const), text: fc.string({ maxLength: 60 }) }),
        fc.record({ kind: fc.constant('truncate' as const), keep: fc.nat(80) }),
        fc.record({ kind: fc.constant('prepend' as const), text: fc.string({ minLength: 1, maxLength: 5 }) }),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.string({ minLength: 30, maxLength: 80 }),
          fc.array(fc.tuple(fc.nat(2), change), { minLength: 1, maxLength: 25 }),
          fc.integer({ min: 1, max: 6 }),
          async (start, steps, baseEvery) => {
            const store = new MemoryStore();
            const engine = await SnapshotEngine.open<{ texts: string[] }>({
              store,
              stream: 'p',
              updates,
              policy: { baseEvery },
            });
            let texts = [start, `${start}!`, 'short'];
            const reference: string[] = [];
            await engine.checkpoint({ texts });
            reference.push(JSON.stringify(texts));
            for (const [which, c] of steps) {
              const before = texts[which]!;
              const after =
                c.kind === 'append'
                  ? before + c.text
                  : c.kind === 'replace'
                    ? c.text
                    : c.kind === 'truncate'
                      ? before.slice(0, c.keep)
                      : c.text + before;
              texts = texts.map((t, i) => (i === which ? after : t));
              await engine.checkpoint({ texts });
              reference.push(JSON.stringify(texts));
            }
            await engine.close();
            for (let seq = 1; seq <= reference.length; seq++) {
              expect(
                JSON.stringify((await restore<{ texts: string[] }>(store, 'p', { seq })).state.texts),
                `seq ${seq}`,
              ).toBe(reference[seq - 1]);
            }
          },
        ),
        { seed: SEED, numRuns: 80 },
      );
    });
  });
}

describe('strings: appends are version 2 only', () => {
  async function streamWithDelta(version: number, kind: 'base' | 'delta' = 'delta'): Promise<MemoryStore> {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'forged', policy: { maxDeltaRatio: Infinity } });
    const first = await engine.checkpoint({ text: 'a'.repeat(40) });
    await engine.close();
    const base = (await store.get(first.key))!;
    const header = {
      stream: 'forged',
      seq: 2,
      epoch: 9,
      writer: 'ffffffffffffffff',
      createdAt: Date.now(),
      base: kind === 'base' ? 2 : 1,
      parent: frameChecksum(base),
    };
    const payload = kind === 'base' ? { text: 'b' } : [[3, '/text', 'tail']];
    await store.putIfAbsent(checkpointKey('forged', 2), forgeFrame(kind, header, payload, version));
    return store;
  }

  it('folds an append in a version 2 delta', async () => {
    expect((await restore(await streamWithDelta(2), 'forged')).state).toEqual({ text: `${'a'.repeat(40)}tail` });
  });

  it('rejects an append in a version 1 frame, and a version 2 base, as CORRUPT', async () => {
    await expect(restore(await streamWithDelta(1), 'forged')).rejects.toMatchObject({
      code: 'CORRUPT',
      seq: 2,
      message: expect.stringMatching(/append/),
    });
    await expect(restore(await streamWithDelta(2, 'base'), 'forged')).rejects.toMatchObject({
      code: 'CORRUPT',
      seq: 2,
      message: expect.stringMatching(/version 2/),
    });
  });

  it('rejects a frame of a version this statefold does not know', async () => {
    // Version 4 is the span delta (spans.test.ts), 5 a frame with a schema version (schema.test.ts); 6 is past what this statefold reads. The frame
    // is intact (its checksum holds): a newer statefold's, not damage.
    await expect(restore(await streamWithDelta(6), 'forged')).rejects.toMatchObject({
      code: 'UNSUPPORTED',
      message: expect.stringMatching(/version 6 is not supported/),
    });
  });
});
