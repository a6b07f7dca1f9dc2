import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import {
  FileStore,
  MemoryStore,
  SnapshotEngine,
  gc,
  listCheckpoints,
  restore,
  type Encryption,
  type KeyProvider,
  type Store,
} from 'statefold';
import { CANARY, filesUnder, holdingCanary, storedObjects, writeCanaryStream } from '../support/canary.js';
import { forgeFrame } from '../support/forge-frame.js';
import { engineStores, tempDir } from '../support/stores.js';

const STREAM = 'agent/encrypted';
const K1 = randomBytes(32);
const K2 = randomBytes(32);
const ENC: Encryption = { keys: { k1: K1 }, current: 'k1' };

/** Rejects with a StatefoldError of `code` whose message contains each of `parts`. */
async function expectError(p: Promise<unknown>, code: string, ...parts: string[]): Promise<Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string },
  );
  expect(err, `expected ${code}`).toBeDefined();
  expect(err!.code, err!.message).toBe(code);
  for (const part of parts) expect(err!.message).toContain(part);
  return err!;
}

/** Writes `n` checkpoints of a small evolving state; returns the states by seq. */
async function writeStates(
  store: Store,
  encryption: Encryption | undefined,
  n: number,
  baseEvery = 4,
  stream = STREAM,
): Promise<Map<number, unknown>> {
  return (await writeStream(store, encryption, n, baseEvery, stream)).states;
}

/** As writeStates, with the store key of each seq too. */
async function writeStream(
  store: Store,
  encryption: Encryption | undefined,
  n: number,
  baseEvery = 4,
  stream = STREAM,
): Promise<{ states: Map<number, unknown>; keys: Map<number, string> }> {
  const engine = await SnapshotEngine.open<{ step: number; log: string[]; pad: string }>({
    store,
    stream,
    policy: { baseEvery },
    ...(encryption && { encryption }),
  });
  const states = new Map<number, unknown>();
  const keys = new Map<number, string>();
  // A state large enough that a step's delta is far smaller than a base (else the size trigger writes bases).
  const pad = Array.from({ length: 200 }, (_, i) => `line ${i} of a tool result`).join('\n');
  const state = engine.state ?? { step: 0, log: [], pad };
  for (let i = 0; i < n; i++) {
    state.step++;
    state.log.push(`step ${state.step}`);
    const info = await engine.checkpoint(state, { meta: { step: state.step } });
    states.set(info.seq, structuredClone(state));
    keys.set(info.seq, info.key);
  }
  await engine.close();
  return { states, keys };
}

describe('encryption at rest: no stored byte holds the state', () => {
  for (const { name, create } of engineStores) {
    it(`${name}: the canary in state, meta and effects is in no stored object, and restores`, async () => {
      const store = await create();
      const state = await writeCanaryStream(store, STREAM, ENC);
      const objects = name === 'file' ? await filesUnder((store as FileStore).dir) : await storedObjects(store);
      expect(objects.length).toBeGreaterThan(5);
      expect(holdingCanary(objects)).toEqual([]);
      const r = await restore(store, STREAM, { encryption: ENC });
      expect(r.state).toEqual(state);
      expect(JSON.stringify(r.meta)).toContain(CANARY);
      expect(r.effects.map((e) => e.token)).toEqual([`charge:${CANARY}`]);
      expect(r.effects[0]!.result).toEqual({ receipt: `${CANARY} receipt` });
    });
  }

  it('the same stream written without encryption does hold the canary (the scan can fail)', async () => {
    const store = new MemoryStore();
    await writeCanaryStream(store, STREAM, undefined);
    expect(holdingCanary(await storedObjects(store)).length).toBeGreaterThan(5);
    const dir = await tempDir();
    await writeCanaryStream(new FileStore({ dir }), STREAM, undefined);
    expect(holdingCanary(await filesUnder(dir)).length).toBeGreaterThan(5);
  });

  it('every frame is format version 3, flagged sealed, fences included', async () => {
    const store = new MemoryStore();
    await writeStates(store, ENC, 6);
    await writeStates(store, ENC, 1); // a second open: a fence, then a checkpoint
    const listed = await listCheckpoints(store, STREAM, { encryption: ENC });
    expect(listed.map((c) => (c.damaged ? 'damaged' : c.keyId))).toEqual(Array(7).fill('k1'));
    let fences = 0;
    for (const { bytes } of await storedObjects(store)) {
      if (Buffer.from(bytes).toString('latin1', 0, 4) !== 'SFLD') continue;
      if (bytes[5] === 3) {
        fences++;
        expect([bytes[4], bytes[7]]).toEqual([3, 1]); // sealed: an empty body, the header authenticated
      } else expect([bytes[4], bytes[7]]).toEqual([3, 3]); // sealed, with meta in the secret header
    }
    expect(fences).toBe(2);
  });
});

describe('encryption: keys', () => {
  it('restores and lists every seq with the key; meta and effects come back', async () => {
    const store = new MemoryStore();
    const states = await writeStates(store, ENC, 9);
    for (const [seq, state] of states) {
      const r = await restore(store, STREAM, { seq, encryption: ENC });
      expect(r.state).toEqual(state);
      expect(r.meta).toEqual({ step: seq });
    }
    const listed = await listCheckpoints(store, STREAM, { encryption: ENC, limit: 3, reverse: true });
    expect(listed.map((c) => (c.damaged ? 0 : (c.meta as { step: number }).step))).toEqual([9, 8, 7]);
  });

  it('an encrypted stream read without encryption is KEY_UNAVAILABLE naming the key id; nothing is written', async () => {
    const store = new MemoryStore();
    await writeStates(store, ENC, 5);
    const before = (await store.list('')).sort();
    await expectError(restore(store, STREAM), 'KEY_UNAVAILABLE', '"k1"', 'without `encryption`');
    await expectError(restore(store, STREAM, { seq: 2 }), 'KEY_UNAVAILABLE', '"k1"');
    await expectError(listCheckpoints(store, STREAM), 'KEY_UNAVAILABLE', '"k1"');
    expect((await store.list('')).sort()).toEqual(before);
    // An open without the keys fails before it fences anyone: the engine that has them goes on.
    const writer = await SnapshotEngine.open<{ step: number; log: string[] }>({
      store,
      stream: STREAM,
      encryption: ENC,
    });
    const during = (await store.list('')).sort();
    await expectError(SnapshotEngine.open({ store, stream: STREAM }), 'KEY_UNAVAILABLE', '"k1"');
    expect((await store.list('')).sort(), 'no fence written').toEqual(during);
    expect((await writer.checkpoint({ ...writer.state!, step: 6 })).seq).toBe(6);
    await writer.close();
    expect((await restore(store, STREAM, { encryption: ENC })).seq).toBe(6);
  });

  it("keys are copied: zeroing the caller's key after open changes nothing", async () => {
    const store = new MemoryStore();
    const key = new Uint8Array(K1);
    const engine = await SnapshotEngine.open({
      store,
      stream: STREAM,
      encryption: { keys: { k1: key }, current: 'k1' },
    });
    key.fill(0);
    await engine.checkpoint({ text: 'after the caller zeroed its key' });
    await engine.close();
    expect((await restore(store, STREAM, { encryption: ENC })).state).toEqual({
      text: 'after the caller zeroed its key',
    });
  });

  it('a key id missing from the keys is KEY_UNAVAILABLE naming it; open with a current key it lacks writes nothing', async () => {
    const store = new MemoryStore();
    await writeStates(store, ENC, 3);
    const other: Encryption = { keys: { k2: K2 }, current: 'k2' };
    await expectError(restore(store, STREAM, { encryption: other }), 'KEY_UNAVAILABLE', '"k1"', 'seq 3');
    const before = (await store.list('')).sort();
    const noKey: KeyProvider = () => undefined;
    await expectError(
      SnapshotEngine.open({ store, stream: STREAM, encryption: { keys: noKey, current: 'k9' } }),
      'KEY_UNAVAILABLE',
      '"k9"',
    );
    expect((await store.list('')).sort(), 'no fence was written').toEqual(before);
  });

  it('a wrong key under the right id fails authentication: CORRUPT, never a wrong state', async () => {
    const store = new MemoryStore();
    await writeStates(store, ENC, 3);
    const wrong: Encryption = { keys: { k1: K2 }, current: 'k1' };
    await expectError(restore(store, STREAM, { encryption: wrong }), 'CORRUPT', 'authentication failed', '"k1"');
    const listed = await listCheckpoints(store, STREAM, { encryption: wrong });
    expect(listed.every((c) => c.damaged)).toBe(true);
  });

  it('rotation: new frames use the new key, old ones decrypt with theirs, and a base lets the old key go', async () => {
    const store = new MemoryStore();
    await writeStates(store, ENC, 6, 32);
    const both: Encryption = { keys: { k1: K1, k2: K2 }, current: 'k2' };
    const engine = await SnapshotEngine.open<{ step: number; log: string[] }>({
      store,
      stream: STREAM,
      policy: { baseEvery: 32 },
      encryption: both,
    });
    const state = engine.state!;
    state.step++;
    const first = await engine.checkpoint(state);
    expect(first.kind, 'the first checkpoint after a rotation is a base').toBe('base');
    state.step++;
    expect((await engine.checkpoint(state)).kind).toBe('delta');
    await engine.close();
    const listed = await listCheckpoints(store, STREAM, { encryption: both });
    expect(listed.map((c) => (c.damaged ? 'damaged' : c.keyId))).toEqual([...Array(6).fill('k1'), 'k2', 'k2']);
    // The newest chain needs only k2; history before the rotation still needs k1.
    const onlyNew: Encryption = { keys: { k2: K2 }, current: 'k2' };
    expect((await restore(store, STREAM, { encryption: onlyNew })).state).toEqual(state);
    expect((await restore(store, STREAM, { seq: 4, encryption: both })).seq).toBe(4);
    await expectError(restore(store, STREAM, { seq: 4, encryption: onlyNew }), 'KEY_UNAVAILABLE', '"k1"');
    // A reopen with the same current key does not force another base.
    const again = await SnapshotEngine.open<{ step: number }>({ store, stream: STREAM, encryption: both });
    expect((await again.checkpoint({ ...again.state!, step: 99 })).kind).toBe('delta');
    await again.close();
  });

  it('per-stream keys from a provider: destroying one stream key makes that stream unreadable, and only it', async () => {
    const store = new MemoryStore();
    const perStream = new Map<string, Uint8Array>([
      ['tenant-a', randomBytes(32)],
      ['tenant-b', randomBytes(32)],
    ]);
    const calls: string[] = [];
    const provider: KeyProvider = async (keyId, stream) => {
      calls.push(`${keyId}@${stream}`);
      return keyId === 'v1' ? perStream.get(stream) : undefined;
    };
    const enc: Encryption = { keys: provider, current: 'v1' };
    await writeStates(store, enc, 6, 4, 'tenant-a');
    await writeStates(store, enc, 6, 4, 'tenant-b');
    expect(calls, 'one provider call per engine and stream, not per frame').toEqual(['v1@tenant-a', 'v1@tenant-b']);
    // Streams sealed with one stream's key do not open with another's (the provider is asked per stream).
    expect((await restore(store, 'tenant-a', { encryption: enc })).seq).toBe(6);
    perStream.delete('tenant-a'); // crypto-erasure
    await expectError(restore(store, 'tenant-a', { encryption: enc }), 'KEY_UNAVAILABLE', '"v1"', 'no such key');
    await expectError(restore(store, 'tenant-a', { seq: 1, encryption: enc }), 'KEY_UNAVAILABLE');
    expect((await restore(store, 'tenant-b', { encryption: enc })).seq).toBe(6);
  });

  it('a provider that throws is KEY_UNAVAILABLE with its error as cause, and is asked again next time', async () => {
    const store = new MemoryStore();
    await writeStates(store, ENC, 2);
    let fail = true;
    const provider: KeyProvider = async () => {
      if (fail) throw new Error('KMS throttled');
      return K1;
    };
    const err = await expectError(
      restore(store, STREAM, { encryption: { keys: provider, current: 'k1' } }),
      'KEY_UNAVAILABLE',
      'KMS throttled',
    );
    expect((err.cause as Error).message).toBe('KMS throttled');
    fail = false;
    expect((await restore(store, STREAM, { encryption: { keys: provider, current: 'k1' } })).seq).toBe(2);
  });

  it('malformed encryption options are INVALID_ARGUMENT before anything is read or written', async () => {
    const store = new MemoryStore();
    const bad = [
      [{ keys: { k1: randomBytes(16) }, current: 'k1' }, '16 bytes'],
      [{ keys: { k1: K1 }, current: 'k2' }, 'not one of .keys'],
      [{ keys: { k1: K1 }, current: '' }, 'non-empty'],
      [{ keys: { k1: 'x'.repeat(32) }, current: 'k1' }, 'a string'],
      [{ keys: [K1], current: '0' }, '.keys must be'],
      [{ keys: { ['k'.repeat(200)]: K1 }, current: 'k'.repeat(200) }, 'longer than 128'],
      ['secret', 'must be an object'],
    ] as const;
    for (const [encryption, part] of bad) {
      const e = encryption as unknown as Encryption;
      await expectError(SnapshotEngine.open({ store, stream: STREAM, encryption: e }), 'INVALID_ARGUMENT', part);
      await expectError(restore(store, STREAM, { encryption: e }), 'INVALID_ARGUMENT', part);
      await expectError(listCheckpoints(store, STREAM, { encryption: e }), 'INVALID_ARGUMENT', part);
    }
    expect(await store.list('')).toEqual([]);
    const wrongSize: KeyProvider = () => randomBytes(31);
    await expectError(
      SnapshotEngine.open({ store, stream: STREAM, encryption: { keys: wrongSize, current: 'k1' } }),
      'KEY_UNAVAILABLE',
      '31 bytes',
    );
  });

  it('gc needs no keys: it reads only what frames keep readable', async () => {
    const store = new MemoryStore();
    await writeStates(store, ENC, 12, 4);
    const report = await gc(store, STREAM, { keepLast: 2, minAgeMs: 0 });
    expect(report.oldestRetained, 'bases at 1, 5, 9: seq 11 needs 9').toBe(9);
    const r = await restore(store, STREAM, { seq: 11, encryption: ENC });
    expect(r.seq).toBe(11);
  });
});

describe('encryption: moved, edited and forged objects are CORRUPT', () => {
  /** Two encrypted streams of 6 checkpoints, and the key of each seq of each. */
  async function twoStreams(): Promise<{ store: MemoryStore; mine: Map<number, string>; theirs: Map<number, string> }> {
    const store = new MemoryStore();
    const mine = (await writeStream(store, ENC, 6, 4, STREAM)).keys;
    const theirs = (await writeStream(store, ENC, 6, 4, 'agent/other')).keys;
    return { store, mine, theirs };
  }
  /** Puts `bytes` at `key` in place of what is there. */
  async function replace(store: Store, key: string, bytes: Uint8Array): Promise<void> {
    await store.delete(key);
    expect(await store.putIfAbsent(key, bytes)).toBe(true);
  }

  it('an object swapped in from another seq of the stream', async () => {
    const { store, mine } = await twoStreams();
    await replace(store, mine.get(6)!, (await store.get(mine.get(5)!))!);
    await expectError(restore(store, STREAM, { encryption: ENC }), 'CORRUPT', 'seq 6', 'copied in from another seq');
  });

  it('an object copied in from another stream under the same key', async () => {
    const { store, mine, theirs } = await twoStreams();
    await replace(store, mine.get(6)!, (await store.get(theirs.get(6)!))!);
    await expectError(restore(store, STREAM, { encryption: ENC }), 'CORRUPT', 'another stream');
  });

  it('a header edited in the clear (seq, base, parent), checksum recomputed: authentication fails', async () => {
    const { store, mine } = await twoStreams();
    const k6 = mine.get(6)!;
    const frame = Buffer.from((await store.get(k6))!);
    // The header's createdAt ('t') is readable; change one byte of it and fix the CRC, as an attacker could.
    const headLength = frame.readUInt32LE(8);
    const at = frame.indexOf(Buffer.from([0xa1, 0x74]), 20); // msgpack "t"
    expect(at).toBeGreaterThan(20);
    expect(at).toBeLessThan(20 + headLength);
    frame[at + 3] = frame[at + 3]! ^ 1;
    frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
    await replace(store, k6, frame);
    await expectError(restore(store, STREAM, { encryption: ENC }), 'CORRUPT', 'authentication failed');
  });

  it('a flipped ciphertext byte is caught (by the checksum, and by authentication when the checksum is fixed)', async () => {
    const { store, mine } = await twoStreams();
    const k6 = mine.get(6)!;
    const frame = Buffer.from((await store.get(k6))!);
    frame[frame.length - 30] = frame[frame.length - 30]! ^ 0x40; // in the ciphertext, before the 16-byte tag
    await replace(store, k6, frame);
    await expectError(restore(store, STREAM, { encryption: ENC }), 'CORRUPT', 'checksum');
    frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
    await replace(store, k6, frame);
    await expectError(restore(store, STREAM, { encryption: ENC }), 'CORRUPT', 'authentication failed');
  });

  it('a plaintext frame forged in place of a sealed one is CORRUPT, never restored', async () => {
    const { store, mine } = await twoStreams();
    // A well-formed plaintext base for seq 6 (format v1, valid checksum): what anyone with write access can put.
    const forged = forgeFrame(
      'base',
      { stream: STREAM, seq: 6, epoch: 1, writer: 'ff', createdAt: Date.now(), base: 6 },
      { step: 666, log: ['forged'] },
    );
    await replace(store, mine.get(6)!, forged);
    await expectError(restore(store, STREAM, { encryption: ENC }), 'CORRUPT', 'plaintext checkpoint', 'seq 6');
    const after = await listCheckpoints(store, STREAM, { encryption: ENC, reverse: true, limit: 1 });
    expect(after[0]!.damaged).toBe(true);
    // The forged state is what a reader without encryption would see: encryption is what refuses it.
    expect((await restore<{ step: number }>(store, STREAM)).state.step).toBe(666);
  });

  it('the version and the flags byte must agree: a sealed flag outside version 3, or version 3 without it, is CORRUPT', async () => {
    for (const [version, flags] of [
      [1, 1],
      [3, 0],
      [3, 2],
      [3, 5],
    ] as const) {
      const store = new MemoryStore();
      const { keys } = await writeStream(store, undefined, 1);
      const frame = Buffer.from((await store.get(keys.get(1)!))!);
      frame[4] = version;
      frame[7] = flags;
      frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
      await replace(store, keys.get(1)!, frame);
      await expectError(restore(store, STREAM), 'CORRUPT', `flags ${flags} are not valid in format version ${version}`);
    }
  });

  it('a plaintext fence forged over the newest checkpoint is CORRUPT, not a silent rollback', async () => {
    const { store, mine } = await twoStreams();
    const fence = forgeFrame('fence', { stream: STREAM, seq: 6, epoch: 9, writer: 'ff', createdAt: Date.now() }, null);
    await replace(store, mine.get(6)!, fence);
    await expectError(restore(store, STREAM, { encryption: ENC }), 'CORRUPT', 'plaintext fence', 'seq 6');
    await expectError(SnapshotEngine.open({ store, stream: STREAM, encryption: ENC }), 'CORRUPT', 'plaintext fence');
  });

  it('a key id in a header that no key option could name (empty, too long) is CORRUPT before its key is asked for', async () => {
    for (const keyId of ['', 'k'.repeat(129)]) {
      const { store, mine } = await twoStreams();
      const frame = withHeader(Buffer.from((await store.get(mine.get(6)!))!), (h) => ({ ...h, k: keyId }));
      await replace(store, mine.get(6)!, frame);
      const asked: string[] = [];
      const provider: KeyProvider = (id) => {
        asked.push(id);
        return K1;
      };
      await expectError(
        restore(store, STREAM, { encryption: { keys: provider, current: 'k1' } }),
        'CORRUPT',
        'no valid key id',
      );
      expect(asked, 'the provider is never asked for the bad id').not.toContain(keyId);
    }
  });
});

/** A frame with its msgpack header rewritten by `edit` (lengths and checksum fixed, the body kept). */
function withHeader(frame: Buffer, edit: (h: Record<string, unknown>) => Record<string, unknown>): Buffer {
  const headLength = frame.readUInt32LE(8);
  const packr = new Packr({ useRecords: false, useFloat32: 0, variableMapSize: true });
  const head = packr.pack(edit(packr.unpack(frame.subarray(20, 20 + headLength)) as Record<string, unknown>));
  const out = Buffer.concat([frame.subarray(0, 20), head, frame.subarray(20 + headLength)]);
  out.writeUInt32LE(head.length, 8);
  out.writeUInt32LE(crc32(out.subarray(0, out.length - 4)), out.length - 4);
  return out;
}
