import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, listCheckpoints, restore, type ListedCheckpoint } from 'statefold';
import { HookStore, type StoreOp } from '../support/hook-store.js';

/** Counts reads, so that a test can tell a page read only what it returned. */
class CountingStore extends HookStore {
  gets = 0;
  protected override before(op: StoreOp): void {
    if (op === 'get') this.gets++;
  }
}

const seqsOf = (list: ListedCheckpoint[]): number[] => list.map((c) => c.seq);

async function stream30(): Promise<{ store: MemoryStore; keys: string[] }> {
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open({ store, stream: 'p', policy: { baseEvery: 8 } });
  const keys: string[] = [];
  for (let n = 1; n <= 30; n++) keys.push((await engine.checkpoint({ n }, { meta: { n } })).key);
  await engine.close();
  return { store, keys };
}

/** Replaces the object at `key` with one whose last byte is flipped (a damaged object). */
async function damage(store: MemoryStore, key: string): Promise<void> {
  const bytes = (await store.get(key))!;
  bytes[bytes.length - 1]! ^= 0xff;
  await store.delete(key);
  await store.putIfAbsent(key, bytes);
}

describe('listCheckpoints: pages', () => {
  it('pages forward with limit and after, and backward with reverse and before', async () => {
    const { store } = await stream30();
    expect(seqsOf(await listCheckpoints(store, 'p', { limit: 5 }))).toEqual([1, 2, 3, 4, 5]);
    expect(seqsOf(await listCheckpoints(store, 'p', { after: 5, limit: 5 }))).toEqual([6, 7, 8, 9, 10]);
    expect(seqsOf(await listCheckpoints(store, 'p', { reverse: true, limit: 3 }))).toEqual([30, 29, 28]);
    expect(seqsOf(await listCheckpoints(store, 'p', { reverse: true, before: 28, limit: 3 }))).toEqual([27, 26, 25]);
    expect(seqsOf(await listCheckpoints(store, 'p', { after: 10, before: 14 }))).toEqual([11, 12, 13]);
    expect(seqsOf(await listCheckpoints(store, 'p', { after: 30 }))).toEqual([]);
    const all = await listCheckpoints(store, 'p');
    expect(seqsOf(all)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(all.every((c) => !c.damaged && (c.meta as { n: number }).n === c.seq)).toBe(true);
  });

  it('reads only the objects it returns (and the newest, to tell it committed)', async () => {
    const { store } = await stream30();
    const counting = new CountingStore(store);
    await listCheckpoints(counting, 'p', { limit: 5 });
    expect(counting.gets).toBeLessThanOrEqual(6);
    counting.gets = 0;
    await listCheckpoints(counting, 'p', { reverse: true, limit: 2 });
    expect(counting.gets).toBeLessThanOrEqual(2);
    counting.gets = 0;
    await listCheckpoints(counting, 'p');
    expect(counting.gets).toBe(30);
  });

  it('rejects a malformed limit, after or before with INVALID_ARGUMENT', async () => {
    const store = new MemoryStore();
    for (const options of [
      { limit: 0 },
      { limit: 1.5 },
      { after: -1 },
      { before: 0 },
      { after: 'x' as unknown as number },
    ]) {
      await expect(listCheckpoints(store, 'p', options), JSON.stringify(options)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    }
  });
});

describe('listCheckpoints: damage is listed, not thrown', () => {
  it('lists a damaged object with damaged: true and its CORRUPT error, and every other entry as usual', async () => {
    const { store, keys } = await stream30();
    await damage(store, keys[6]!);
    const list = await listCheckpoints(store, 'p');
    expect(seqsOf(list)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    const bad = list.filter((c) => c.damaged);
    expect(bad).toHaveLength(1);
    expect(bad[0]).toMatchObject({ seq: 7, damaged: true, error: { code: 'CORRUPT', seq: 7, key: keys[6] } });
    // Restore still says CORRUPT for what needs it.
    await expect(restore(store, 'p', { seq: 7 })).rejects.toMatchObject({ code: 'CORRUPT' });
  });

  it('lists a damaged newest object as damaged, with the checkpoints below it', async () => {
    const { store, keys } = await stream30();
    await damage(store, keys[29]!);
    const list = await listCheckpoints(store, 'p', { reverse: true, limit: 3 });
    expect(list.map((c) => [c.seq, c.damaged])).toEqual([
      [30, true],
      [29, false],
      [28, false],
    ]);
  });
});
