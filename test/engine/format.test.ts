import { cp } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  FileStore,
  MemoryStore,
  SnapshotEngine,
  StatefoldError,
  listCheckpoints,
  restore,
  type Store,
} from 'statefold';
import { V1_SEQS, V1_STREAM, v1Meta, v1State } from '../fixtures/v1-states.mjs';
import { checkpointKey, forgeFrame, frameChecksum } from '../support/forge-frame.js';
import { firstDifference } from '../support/same.js';
import { tempDir } from '../support/stores.js';
import { verified } from '../support/checkpoints.js';

const fixtureDir = fileURLToPath(new URL('../fixtures/v1', import.meta.url));

describe('format v1: the committed fixture', () => {
  it('decodes every seq of the committed v1 stream to its expected state and meta', async () => {
    const dir = await tempDir();
    await cp(fixtureDir, dir, { recursive: true });
    const store = new FileStore({ dir });
    for (let seq = 1; seq <= V1_SEQS; seq++) {
      const r = await restore(store, V1_STREAM, { seq });
      expect(firstDifference(r.state, v1State(seq)), `seq ${seq}`).toBeUndefined();
      expect(r.meta).toEqual(v1Meta(seq));
    }
    const list = verified(await listCheckpoints(store, V1_STREAM));
    expect(list.map((c) => c.kind)).toEqual(['base', 'delta', 'delta', 'delta', 'base', 'delta', 'delta']);
    // A new engine continues the old stream.
    const engine = await SnapshotEngine.open({ store, stream: V1_STREAM });
    expect(engine.seq).toBe(V1_SEQS);
    expect((await engine.checkpoint(v1State(V1_SEQS + 1))).seq).toBe(V1_SEQS + 1);
    await engine.close();
    expect(firstDifference((await restore(store, V1_STREAM)).state, v1State(V1_SEQS + 1))).toBeUndefined();
  });

  it('starts every object with the magic "SFLD" and format version 1', async () => {
    const store = new FileStore({ dir: fixtureDir });
    const keys = await store.list('');
    // One object per seq, and in slot 1 also the fence the generator's engine wrote when it opened
    // the new stream (its base then went to the key after the fence's).
    expect(keys).toHaveLength(V1_SEQS + 1);
    expect(new Set(keys.map((k) => parseInt(/\/log\/([0-9a-f]{16})/.exec(k)![1]!, 16)))).toEqual(
      new Set(Array.from({ length: V1_SEQS }, (_, i) => i + 1)),
    );
    for (const key of keys) {
      const bytes = Buffer.from((await store.get(key))!);
      expect(bytes.subarray(0, 4).toString('latin1')).toBe('SFLD');
      expect(bytes[4]).toBe(1);
    }
  });
});

/** A stream of 6 checkpoints (bases at 1 and 4) on a memory store, with its keys by seq. */
async function sample(): Promise<{ store: MemoryStore; keyOf: (seq: number) => string }> {
  const store = new MemoryStore();
  const engine = await SnapshotEngine.open({ store, stream: 'dmg', policy: { baseEvery: 3, maxDeltaRatio: Infinity } });
  const keys = new Map<number, string>();
  for (let i = 1; i <= 6; i++) keys.set(i, (await engine.checkpoint({ i, text: `step ${i}`.repeat(20) })).key);
  await engine.close();
  return { store, keyOf: (seq) => keys.get(seq)! };
}

async function replace(store: Store, key: string, bytes: Uint8Array): Promise<void> {
  await store.delete(key);
  await store.putIfAbsent(key, bytes);
}

function expectCorrupt(err: unknown, seq: number, key: string, why: RegExp): void {
  expect(err).toBeInstanceOf(StatefoldError);
  expect(err).toMatchObject({ code: 'CORRUPT', stream: 'dmg', seq, key });
  expect((err as Error).message).toMatch(why);
  expect((err as Error).message).toContain(key);
}

describe('damage: every object is verified when read', () => {
  it('reports a flipped byte anywhere in an object as CORRUPT with stream, seq and key', async () => {
    const { store, keyOf } = await sample();
    const key = keyOf(5);
    const good = Buffer.from((await store.get(key))!);
    for (const at of [0, 4, 5, 9, 20, 40, Math.floor(good.length / 2), good.length - 5, good.length - 1]) {
      const bad = Buffer.from(good);
      bad[at] = bad[at]! ^ 0x20;
      await replace(store, key, bad);
      const err = await restore(store, 'dmg', { seq: 6 }).catch((e: unknown) => e);
      expectCorrupt(err, 5, key, /checksum|magic|version|declares|kind|codec/);
    }
    // Seqs whose chain does not include the damaged object still restore.
    expect((await restore(store, 'dmg', { seq: 3 })).state).toMatchObject({ i: 3 });
  });

  it('reports a truncated or extended object as CORRUPT', async () => {
    const { store, keyOf } = await sample();
    const key = keyOf(2);
    const good = Buffer.from((await store.get(key))!);
    for (const bad of [
      good.subarray(0, good.length - 1),
      good.subarray(0, 10),
      Buffer.alloc(0),
      Buffer.concat([good, Buffer.from([0])]),
    ]) {
      await replace(store, key, bad);
      expectCorrupt(await restore(store, 'dmg', { seq: 3 }).catch((e: unknown) => e), 2, key, /short|declares/);
    }
  });

  it('reports a delta missing from the middle of a chain as CORRUPT, not as a shorter state', async () => {
    const { store, keyOf } = await sample();
    await store.delete(keyOf(5));
    const err = await restore(store, 'dmg', { seq: 6 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CORRUPT', seq: 5, message: expect.stringContaining('gap') });
  });

  it('reports an object copied in from another seq or another stream as CORRUPT', async () => {
    const { store, keyOf } = await sample();
    const other = new MemoryStore();
    const engine = await SnapshotEngine.open({ store: other, stream: 'other' });
    const foreign = (await engine.checkpoint({ i: 2 })).key;
    await engine.close();
    // Another seq of the same stream (a valid frame, in the wrong place).
    await replace(store, keyOf(3), (await store.get(keyOf(2)))!);
    expectCorrupt(await restore(store, 'dmg', { seq: 3 }).catch((e: unknown) => e), 3, keyOf(3), /seq 2, not 3/);
    // Another stream.
    await replace(store, keyOf(3), (await other.get(foreign))!);
    expectCorrupt(await restore(store, 'dmg', { seq: 3 }).catch((e: unknown) => e), 3, keyOf(3), /another stream/);
  });

  it('reports a delta that was rewritten by another writer as CORRUPT (its parent checksum differs)', async () => {
    const { store, keyOf } = await sample();
    // Same stream and seqs, different content: a second history written elsewhere.
    const twin = new MemoryStore();
    const engine = await SnapshotEngine.open({
      store: twin,
      stream: 'dmg',
      policy: { baseEvery: 3, maxDeltaRatio: Infinity },
    });
    for (let i = 1; i <= 3; i++) await engine.checkpoint({ i, text: 'different' });
    const key2 = verified(await listCheckpoints(twin, 'dmg'))[1]!;
    await engine.close();
    expect(key2.kind).toBe('delta');
    await replace(store, keyOf(2), (await twin.get(keyOf(2)))!);
    const err = await restore(store, 'dmg', { seq: 2 }).catch((e: unknown) => e);
    expectCorrupt(err, 2, keyOf(2), /parent checksum/);
  });

  it('never allocates what a damaged header claims: a huge declared length is CORRUPT', async () => {
    const { store, keyOf } = await sample();
    const key = keyOf(4);
    const frame = Buffer.from((await store.get(key))!);
    // Claim 4 GiB - 1 uncompressed bytes and fix up the checksum, as a malicious writer would.
    frame.writeUInt32LE(0xffffffff, 16);
    frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
    await replace(store, key, frame);
    expectCorrupt(
      await restore(store, 'dmg', { seq: 4 }).catch((e: unknown) => e),
      4,
      key,
      /exceeds the limit|more than/,
    );
    // And a smaller limit is honoured too.
    const { store: s2 } = await sample();
    await expect(restore(s2, 'dmg', { seq: 4, maxPayloadBytes: 16 })).rejects.toMatchObject({
      code: 'CORRUPT',
      message: expect.stringContaining('limit of 16'),
    });
  });

  it('reports an object that is not a frame at all as CORRUPT', async () => {
    const { store, keyOf } = await sample();
    await replace(store, keyOf(6), Buffer.from('{"json": "not a frame at all, sorry"}'));
    expectCorrupt(await restore(store, 'dmg').catch((e: unknown) => e), 6, keyOf(6), /magic/);
  });
});

describe('forged frames: objects written from the format spec, not by statefold', () => {
  it('restores a forged base and a forged delta on it, and an engine continues the stream', async () => {
    const store = new MemoryStore();
    const header = { stream: 'forged', epoch: 1, writer: '0123456789abcdef', createdAt: Date.UTC(2026, 0, 2) };
    const base = forgeFrame('base', { ...header, seq: 1, base: 1 }, { a: { b: [1, 2] }, n: 1 });
    expect(await store.putIfAbsent(checkpointKey('forged', 1), base)).toBe(true);
    // RFC 6902 operations as [code, pointer, value]: 0 add, 1 remove, 2 replace.
    const delta = forgeFrame('delta', { ...header, seq: 2, base: 1, parent: frameChecksum(base) }, [
      [0, '/a/c', 'added'],
      [2, '/n', 2],
      [1, '/a/b/0'],
    ]);
    expect(await store.putIfAbsent(checkpointKey('forged', 2), delta)).toBe(true);
    expect(verified(await listCheckpoints(store, 'forged')).map((c) => [c.seq, c.kind])).toEqual([
      [1, 'base'],
      [2, 'delta'],
    ]);
    expect((await restore(store, 'forged', { seq: 1 })).state).toEqual({ a: { b: [1, 2] }, n: 1 });
    expect((await restore(store, 'forged')).state).toEqual({ a: { b: [2], c: 'added' }, n: 2 });
    const engine = await SnapshotEngine.open<Record<string, unknown>>({ store, stream: 'forged' });
    expect(engine.seq).toBe(2);
    expect((await engine.checkpoint({ ...engine.state, n: 3 })).seq).toBe(3);
    await engine.close();
    expect((await restore(store, 'forged')).state).toEqual({ a: { b: [2], c: 'added' }, n: 3 });
  });

  it('rejects a forged delta whose checksum does not match as CORRUPT (the forger must get it right)', async () => {
    const store = new MemoryStore();
    const header = { stream: 'forged', epoch: 1, writer: '0123456789abcdef', createdAt: Date.UTC(2026, 0, 2) };
    const base = forgeFrame('base', { ...header, seq: 1, base: 1 }, { n: 1 });
    await store.putIfAbsent(checkpointKey('forged', 1), base);
    const delta = forgeFrame('delta', { ...header, seq: 2, base: 1, parent: frameChecksum(base) }, [[2, '/n', 2]]);
    delta[delta.length - 1] = delta[delta.length - 1]! ^ 0xff;
    await store.putIfAbsent(checkpointKey('forged', 2), delta);
    await expect(restore(store, 'forged')).rejects.toMatchObject({
      code: 'CORRUPT',
      seq: 2,
      message: expect.stringContaining('checksum'),
    });
  });
});

describe('prototype pollution: no stored patch can reach a prototype', () => {
  /** An engine's base { a: {} } at seq 1 and, at seq 2, a delta forged as a malicious writer with the format would. */
  async function withForgedDelta(ops: unknown[]): Promise<MemoryStore> {
    const store = new MemoryStore();
    const engine = await SnapshotEngine.open({ store, stream: 'pp', policy: { maxDeltaRatio: Infinity } });
    const base = await engine.checkpoint({ a: {} });
    await engine.close();
    const header = {
      stream: 'pp',
      seq: 2,
      epoch: 9,
      writer: 'ffffffffffffffff',
      createdAt: Date.UTC(2026, 0, 2),
      base: 1,
      parent: frameChecksum((await store.get(base.key))!),
    };
    expect(await store.putIfAbsent(checkpointKey('pp', 2), forgeFrame('delta', header, ops))).toBe(true);
    return store;
  }

  it('folds a benign forged delta: the attacks below reach the fold, not only the frame checks', async () => {
    const store = await withForgedDelta([[0, '/a/polluted', 'yes']]);
    expect(await restore(store, 'pp')).toMatchObject({ seq: 2, state: { a: { polluted: 'yes' } } });
  });

  it('treats __proto__ and constructor.prototype in delta paths as data or as damage, never as prototypes', async () => {
    const attacks: unknown[][] = [
      [[0, '/__proto__/polluted', 'yes']],
      [[0, '/constructor/prototype/polluted', 'yes']],
      [[2, '/__proto__', { polluted: 'yes' }]],
      [[0, '/a/__proto__/polluted', 'yes']],
      [[0, '/__proto__', { polluted: 'yes' }]],
      [[0, '/a/__proto__', { polluted: 'yes' }]],
    ];
    const seen = { data: 0, damage: 0 };
    for (const ops of attacks) {
      const store = await withForgedDelta(ops);
      const outcome = await restore(store, 'pp').then(
        (r) => r.state as Record<string, unknown>,
        (e: unknown) => e,
      );
      if (outcome instanceof StatefoldError) {
        seen.damage++;
        expect(outcome.code).toBe('CORRUPT');
      } else {
        seen.data++;
        expect(Object.getPrototypeOf(outcome)).toBe(Object.prototype);
        expect(Object.getPrototypeOf((outcome as Record<string, unknown>).a)).toBe(Object.prototype);
      }
      expect(({} as Record<string, unknown>).polluted, JSON.stringify(ops)).toBeUndefined();
      expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
    }
    // Both branches ran: adding a __proto__ key is data, a path through a prototype is damage.
    expect(seen.data, 'attacks restored as data').toBeGreaterThan(0);
    expect(seen.damage, 'attacks rejected as damage').toBeGreaterThan(0);
  });
});
