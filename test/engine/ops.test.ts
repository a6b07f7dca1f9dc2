import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import jsonpatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, diffCheckpoints, verifyStream, type Encryption, type Store } from 'statefold';
import { mulberry32 } from '../support/prng.mjs';
import { flipByte } from '../support/damage.js';
import { engineStores } from '../support/stores.js';

const { applyPatch } = jsonpatch;
const STREAM = 'agent/ops';

interface State {
  step: number;
  reply: string;
  messages: { id: number; role: string; text: string }[];
  plan: string[];
  notes: Record<string, string>;
}

/** A JSON state evolved by the edits agents make: a sliding window, appends, plan edits, keys added and removed. */
function evolve(s: State, rand: () => number): void {
  s.step++;
  s.reply += ` token${Math.floor(rand() * 100)}`;
  if (rand() < 0.3) s.reply = `new reply ${s.step} `.repeat(3);
  s.messages.push({ id: s.step, role: s.step % 2 ? 'user' : 'assistant', text: `message ${s.step} `.repeat(8) });
  if (s.messages.length > 6) s.messages.shift();
  if (rand() < 0.3 && s.plan.length > 0) s.plan.splice(Math.floor(rand() * s.plan.length), 1);
  if (rand() < 0.4) s.plan.splice(Math.floor(rand() * (s.plan.length + 1)), 0, `task ${s.step}`);
  if (rand() < 0.3) s.notes[`n${s.step}`] = `note ${s.step}`;
  const keys = Object.keys(s.notes);
  if (rand() < 0.2 && keys.length > 0) delete s.notes[keys[Math.floor(rand() * keys.length)]!];
}

/** Writes `n` checkpoints (a base every `baseEvery`); returns the states and keys by seq. */
async function write(
  store: Store,
  n: number,
  baseEvery: number,
  encryption?: Encryption,
): Promise<{ states: Map<number, State>; keys: Map<number, string> }> {
  const engine = await SnapshotEngine.open<State>({
    store,
    stream: STREAM,
    policy: { baseEvery, maxDeltaRatio: Infinity },
    ...(encryption && { encryption }),
  });
  const rand = mulberry32(7);
  const state: State = { step: 0, reply: 'hello', messages: [], plan: ['read', 'edit'], notes: {} };
  const states = new Map<number, State>();
  const keys = new Map<number, string>();
  for (let i = 0; i < n; i++) {
    evolve(state, rand);
    const info = await engine.checkpoint(state);
    states.set(info.seq, structuredClone(state));
    keys.set(info.seq, info.key);
  }
  await engine.close();
  return { states, keys };
}

describe('diffCheckpoints', () => {
  it('gives RFC 6902 operations that turn one checkpoint into the other, both ways', async () => {
    const store = new MemoryStore();
    const { states } = await write(store, 24, 8);
    const pairs = [
      [1, 2],
      [2, 1],
      [3, 11],
      [11, 3],
      [5, 24],
      [24, 5],
      [9, 9],
      [8, 9],
    ];
    for (const [a, b] of pairs) {
      const ops = await diffCheckpoints(store, STREAM, a!, b!);
      for (const op of ops) expect(['add', 'remove', 'replace']).toContain(op.op);
      const applied = applyPatch(structuredClone(states.get(a!)!), structuredClone(ops), true, true).newDocument;
      expect(applied, `seq ${a} -> ${b}`).toEqual(states.get(b!));
      if (a === b) expect(ops).toEqual([]);
    }
  });

  it('aligns a sliding window: one step costs a few operations, not a rewrite of every message', async () => {
    const store = new MemoryStore();
    await write(store, 12, 32);
    const ops = await diffCheckpoints(store, STREAM, 10, 11);
    const onMessages = ops.filter((o) => o.path.startsWith('/messages'));
    expect(onMessages.map((o) => o.op).sort()).toEqual(['add', 'remove']);
  });

  it('rejects a seq that is not there (NOT_FOUND) and a malformed one (INVALID_ARGUMENT)', async () => {
    const store = new MemoryStore();
    await write(store, 3, 8);
    await expect(diffCheckpoints(store, STREAM, 1, 9)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(diffCheckpoints(store, STREAM, 0, 1)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});

describe('verifyStream', () => {
  it('reports every seq intact on an intact stream, with progress', async () => {
    const store = new MemoryStore();
    await write(store, 20, 8);
    const progress: number[] = [];
    const report = await verifyStream(store, STREAM, { onProgress: (p) => progress.push(p.checked * 100 + p.total) });
    expect(report.intact).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(report.damaged).toEqual([]);
    expect(report.newestIntact).toBe(20);
    expect(report.checked).toBe(20);
    expect(progress).toEqual(Array.from({ length: 20 }, (_, i) => (i + 1) * 100 + 20));
  });

  for (const { name, create } of engineStores) {
    it(`${name}: a damaged delta breaks the rest of its chain, and the next base restores again`, async () => {
      const store = await create();
      const { keys } = await write(store, 20, 8); // bases at 1, 9, 17
      await flipByte(store, keys.get(5)!);
      const report = await verifyStream(store, STREAM);
      expect(report.damaged.map((d) => d.seq)).toEqual([5, 6, 7, 8]);
      expect(report.damaged[0]!.error.message).toMatch(/checksum/);
      for (const d of report.damaged.slice(1)) expect(d.error.message).toMatch(/chain is broken at seq 5/);
      expect(report.intact).toEqual([1, 2, 3, 4, ...Array.from({ length: 12 }, (_, i) => i + 9)]);
      expect(report.newestIntact).toBe(20);
    });
  }

  it('reports a damaged newest checkpoint and a missing one, never throwing', async () => {
    const store = new MemoryStore();
    const { keys } = await write(store, 12, 8);
    await flipByte(store, keys.get(12)!);
    await store.delete(keys.get(3)!);
    const report = await verifyStream(store, STREAM);
    expect(report.damaged.map((d) => d.seq)).toEqual([3, 4, 5, 6, 7, 8, 12]);
    expect(report.damaged[0]!.error.message).toMatch(/missing from the log/);
    expect(report.damaged.every((d) => d.error.code === 'CORRUPT')).toBe(true);
    expect(report.intact).toEqual([1, 2, 9, 10, 11]);
    expect(report.newestIntact).toBe(11);
  });

  it('a delta whose ops do not apply, with a valid checksum, is damaged', async () => {
    const store = new MemoryStore();
    const { keys } = await write(store, 4, 8);
    // Rewrite seq 3's parent link to another checksum (and fix the frame's own CRC): it no longer applies to seq 2.
    const frame = Buffer.from((await store.get(keys.get(3)!))!);
    const at = frame.indexOf(Buffer.from([0xa1, 0x70]), 20); // msgpack "p", the parent checksum
    frame[at + 3]! ^= 1;
    frame.writeUInt32LE(crc32(frame.subarray(0, frame.length - 4)), frame.length - 4);
    await store.delete(keys.get(3)!);
    await store.putIfAbsent(keys.get(3)!, frame);
    const report = await verifyStream(store, STREAM);
    expect(report.damaged.map((d) => d.seq)).toEqual([3, 4]);
    expect(report.damaged[0]!.error.message).toMatch(
      /seq 3 .*does not apply to the stored seq 2 \(parent checksum differs\)/,
    );
    expect(report.damaged[1]!.error.message).toMatch(/seq 4 .*chain is broken at seq 3/);
  });

  it('an encrypted stream verifies with its keys; without them it rejects KEY_UNAVAILABLE', async () => {
    const store = new MemoryStore();
    const encryption: Encryption = { keys: { k: randomBytes(32) }, current: 'k' };
    await write(store, 10, 4, encryption);
    expect((await verifyStream(store, STREAM, { encryption })).intact).toHaveLength(10);
    await expect(verifyStream(store, STREAM)).rejects.toMatchObject({ code: 'KEY_UNAVAILABLE' });
    expect((await diffCheckpoints(store, STREAM, 2, 7, { encryption })).length).toBeGreaterThan(0);
  });

  it('an unknown stream has nothing to check', async () => {
    const report = await verifyStream(new MemoryStore(), 'nobody');
    expect(report).toEqual({ stream: 'nobody', checked: 0, intact: [], damaged: [], newestIntact: 0 });
  });
});
