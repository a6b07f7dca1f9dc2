import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  deleteStream,
  gc,
  listCheckpoints,
  MemoryStore,
  restore,
  SnapshotEngine,
  verifyStream,
  type Store,
} from 'statefold';
import { checkpointKey } from '../support/forge-frame.js';

// A frame of a newer statefold (a format version, kind or compression this one does not know,
// with its checksum intact) is UNSUPPORTED, never damage: the paths built to step over damage
// (repair, skipDamaged, verify, gc) must stop at it, not roll the stream back to what they can
// read. A frame whose checksum fails is damage (CORRUPT), whatever its version byte says.

const STREAM = 's';

/** 10 checkpoints, bases at 1, 5 and 9. */
async function written(): Promise<MemoryStore> {
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open<{ n: number; pad: string }>({
    store,
    stream: STREAM,
    policy: { baseEvery: 4, maxDeltaRatio: Infinity },
  });
  for (let n = 1; n <= 10; n++) await engine.checkpoint({ n, pad: 'p'.repeat(200) });
  await engine.close();
  return store;
}

/** Edits a byte of seq's checkpoint, then (when `intact`) makes its checksum hold again. */
async function edit(store: Store, seq: number, at: number, value: number, intact = true): Promise<void> {
  const key = (await store.list(checkpointKey(STREAM, seq))).at(-1)!;
  const frame = Buffer.from((await store.get(key))!);
  frame[at] = value;
  if (intact) frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
  await store.delete(key);
  await store.putIfAbsent(key, frame);
}

async function contents(store: Store): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const key of await store.list('')) out.set(key, Buffer.from((await store.get(key))!).toString('hex'));
  return out;
}

describe('a frame of a newer statefold', () => {
  it('is UNSUPPORTED everywhere a damaged one would be stepped over, and nothing is written or deleted', async () => {
    const store = await written();
    await edit(store, 10, 4, 6); // format version 6 (past what this statefold reads)
    const before = await contents(store);
    const newer = { code: 'UNSUPPORTED', seq: 10, message: expect.stringMatching(/version 6 .*newer statefold/) };
    await expect(restore(store, STREAM)).rejects.toMatchObject(newer);
    await expect(restore(store, STREAM, { skipDamaged: true })).rejects.toMatchObject(newer);
    await expect(SnapshotEngine.open({ store, stream: STREAM, repair: true })).rejects.toMatchObject(newer);
    await expect(listCheckpoints(store, STREAM)).rejects.toMatchObject(newer);
    await expect(verifyStream(store, STREAM)).rejects.toMatchObject(newer);
    await expect(gc(store, STREAM, { keepLast: 2, minAgeMs: 0 })).rejects.toMatchObject({ code: 'UNSUPPORTED' });
    // Nothing written, nothing deleted.
    expect(await contents(store)).toEqual(before);
    await expect(restore(store, STREAM)).rejects.toMatchObject(newer);
    // Older seqs that do not fold through it still restore.
    expect((await restore<{ n: number }>(store, STREAM, { seq: 9 })).state.n).toBe(9);
  });

  it('in the middle of a chain it stops restores through it; deleteStream still deletes the stream', async () => {
    const store = await written();
    await edit(store, 6, 4, 6); // a delta of the chain from base 5
    for (const seq of [6, 7, 8])
      await expect(restore(store, STREAM, { seq, skipDamaged: true })).rejects.toMatchObject({
        code: 'UNSUPPORTED',
        seq: 6,
      });
    expect((await restore<{ n: number }>(store, STREAM, { seq: 5 })).state.n).toBe(5);
    expect((await restore<{ n: number }>(store, STREAM)).state.n).toBe(10); // (chain from base 9)
    await expect(listCheckpoints(store, STREAM, { reverse: true, limit: 10 })).rejects.toMatchObject({
      code: 'UNSUPPORTED',
    });
    // A stream you cannot read can still be deleted: the delete fences above every listed slot.
    const top = await written();
    await edit(top, 10, 4, 6);
    await deleteStream(top, STREAM);
    await expect(restore(top, STREAM)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('a kind or compression this statefold does not know, intact, is UNSUPPORTED too', async () => {
    for (const [at, value, why] of [
      [5, 9, /unknown frame kind 9/],
      [6, 7, /unknown compression 7/],
    ] as const) {
      const store = await written();
      await edit(store, 10, at, value);
      await expect(restore(store, STREAM)).rejects.toMatchObject({
        code: 'UNSUPPORTED',
        seq: 10,
        message: expect.stringMatching(why),
      });
      await expect(restore(store, STREAM, { skipDamaged: true })).rejects.toMatchObject({ code: 'UNSUPPORTED' });
    }
  });

  it('with a checksum that fails, the same version byte is damage: CORRUPT, and repair steps over it', async () => {
    const store = await written();
    await edit(store, 10, 4, 6, false);
    await expect(restore(store, STREAM)).rejects.toMatchObject({ code: 'CORRUPT', seq: 10 });
    expect((await restore<{ n: number }>(store, STREAM, { skipDamaged: true })).state.n).toBe(9);
    const engine = await SnapshotEngine.open<{ n: number }>({ store, stream: STREAM, repair: true });
    expect(engine.repaired?.restoredSeq).toBe(9);
    await engine.close();
  });
});
