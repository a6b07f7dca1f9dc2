import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MemoryStore, SnapshotEngine, sizeReport, isStatefoldError } from 'statefold';
import { sizeOf } from '../../engine/format/sizes.js';
import { encodeValue } from '../../engine/format/values.js';

// sizeReport: the state sized by path as stored (msgpack), repeated values, the retained objects'
// bytes split by kind, and the growth over the last checkpoints.

describe('sizeOf', () => {
  it('is the length of what encodeValue writes, for any JSON value and the values it tags', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(sizeOf(v)).toBe(encodeValue(v).byteLength);
      }),
      { numRuns: 2000 },
    );
    const edges: unknown[] = [
      'a'.repeat(31),
      'a'.repeat(32),
      'a'.repeat(255),
      'a'.repeat(256),
      'é'.repeat(20),
      'x'.repeat(70_000),
      '\ud800 lone',
      -0,
      2 ** 40,
      -(2 ** 40),
      1.5,
      127,
      128,
      -32,
      -33,
      65_535,
      65_536,
      [new Date(0), undefined],
      { d: new Uint8Array(300), u: undefined },
      { ['__proto__']: 1 },
      Object.defineProperty({ a: 1 }, '__proto__', { value: undefined, enumerable: true }),
      Array(20).fill(1),
      Array(70_000).fill(0),
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, i])),
    ];
    for (const v of edges) expect(sizeOf(v)).toBe(encodeValue(v).byteLength);
  });
});

describe('sizeReport', () => {
  const text = (n: number, seed: string) => Array.from({ length: n }, (_, i) => `${seed} line ${i}\n`).join('');

  it('sizes the state by path, finds the same text held four times, and splits the stored bytes', async () => {
    const store = new MemoryStore();
    const doc = text(2000, 'readme'); // ~34 KB
    const engine = await SnapshotEngine.open({ store, stream: 'agent', policy: { baseEvery: 4 } });
    const state: { messages: string[]; files: Record<string, string>; tool: unknown[] } = {
      messages: [],
      files: { 'README.md': doc },
      tool: [{ result: doc }],
    };
    const infos = [];
    for (let step = 0; step < 10; step++) {
      state.messages.push(text(20, `step ${step}`));
      if (step === 5) state.tool.push({ result: doc, again: doc });
      infos.push(await engine.checkpoint(state));
    }
    await engine.close();
    const report = await sizeReport(store, 'agent', { top: 5, last: 4 });
    expect(report.seq).toBe(10);
    expect(report.stateBytes).toBe(encodeValue(state).byteLength);
    // The largest subtrees, largest first (ties: the one met first), each exactly its msgpack size.
    expect(report.paths.map((p) => p.path)).toEqual(['/tool', '/tool/1', '/files', '/tool/0', '/files/README.md']);
    expect(report.paths[0]!.bytes).toBe(encodeValue(state.tool).byteLength);
    expect(report.paths[2]!.ofState).toBeCloseTo(encodeValue(state.files).byteLength / report.stateBytes, 10);
    // The same text at four paths: found once, with three extra copies.
    const repeated = report.repeated[0]!;
    expect(repeated.copies).toBe(4);
    expect(repeated.extra).toBe(3 * sizeOf(doc));
    expect(new Set(repeated.paths)).toEqual(
      new Set(['/files/README.md', '/tool/0/result', '/tool/1/result', '/tool/1/again']),
    );
    // Stored: every retained object, by kind, adding up to what the commits reported.
    expect(report.stored.checkpoints).toBe(10);
    expect(report.stored.bases).toBe(infos.filter((i) => i.kind === 'base').length);
    expect(report.stored.totalBytes).toBe(infos.reduce((n, i) => n + i.bytes, 0));
    expect(report.stored.baseBytes + report.stored.deltaBytes).toBe(report.stored.totalBytes);
    expect(report.stored.headerBytes).toBeGreaterThan(0);
    // The README is in every base (3 of them), once per object: its stored share is real and below the whole.
    const readme = report.paths.find((p) => p.path === '/files/README.md')!;
    expect(readme.stored).toBeGreaterThan(0);
    expect(readme.ofStored).toBeLessThan(1);
    // The top-level paths split the state: their stored parts add up to nearly every payload byte
    // (what is left: the root's header and keys, and each delta's operation framing), never more.
    const all = await sizeReport(store, 'agent', { top: 100 });
    const payload = all.stored.totalBytes - all.stored.headerBytes;
    const split = all.paths.filter((p) => p.path.split('/').length === 2).reduce((n, p) => n + p.stored, 0);
    expect(
      all.paths
        .filter((p) => p.path.split('/').length === 2)
        .map((p) => p.path)
        .sort(),
    ).toEqual(['/files', '/messages', '/tool']);
    expect(split).toBeLessThanOrEqual(payload + 3);
    expect(split).toBeGreaterThan(0.9 * payload);
    // Growth: the last 4 checkpoints, each with its object, its state size, and what grew.
    expect(report.growth.map((g) => g.seq)).toEqual([7, 8, 9, 10]);
    for (const g of report.growth) {
      const info = infos[g.seq - 1]!;
      expect(g.kind).toBe(info.kind);
      expect(g.bytes).toBe(info.bytes);
      expect(g.grew[0]!.path).toBe(`/messages/${g.seq - 1}`);
    }
    expect(report.growth[3]!.growth).toBe(report.growth[3]!.stateBytes - report.growth[2]!.stateBytes);
    // At step 6 (seq 6) the tool result was added twice: that is what grew most then.
    const at6 = await sizeReport(store, 'agent', { seq: 6, last: 1 });
    expect(at6.growth).toHaveLength(1);
    expect(at6.growth[0]!.grew[0]!.path).toBe('/tool/1');
    expect(at6.growth[0]!.growth).toBe(
      at6.stateBytes - (await sizeReport(store, 'agent', { seq: 5, last: 0 })).stateBytes,
    );
  });

  it('reads sealed streams with their keys (KEY_UNAVAILABLE without), and span deltas', async () => {
    const store = new MemoryStore();
    const encryption = { keys: { k1: new Uint8Array(32).fill(7) }, current: 'k1' };
    const engine = await SnapshotEngine.open({ store, stream: 'sealed', encryption, policy: { spanEvery: 3 } });
    const state = { log: [] as string[] };
    for (let i = 0; i < 12; i++) {
      state.log.push(text(30, `entry ${i}`));
      await engine.checkpoint(state);
    }
    await engine.close();
    const code = await sizeReport(store, 'sealed').then(
      () => 'resolved',
      (e: unknown) => (isStatefoldError(e) ? e.code : e),
    );
    expect(code).toBe('KEY_UNAVAILABLE');
    const report = await sizeReport(store, 'sealed', { encryption, last: 12 });
    expect(report.stateBytes).toBe(encodeValue(state).byteLength);
    expect(report.growth.map((g) => g.grew[0]?.path)).toEqual([
      undefined,
      ...state.log.slice(1).map((_, i) => `/log/${i + 1}`),
    ]);
    // Span deltas store earlier deltas' operations again: counted in what /log stores.
    expect(report.paths[0]!.path).toBe('/log');
    expect(report.paths[0]!.stored).toBeGreaterThan(0.9 * (report.stored.totalBytes - report.stored.headerBytes));
  });

  it('rejects a stream without checkpoints or a seq not retained NOT_FOUND, and bad options INVALID_ARGUMENT', async () => {
    const store = new MemoryStore();
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'resolved',
        (e: unknown) => (isStatefoldError(e) ? e.code : e),
      );
    expect(await code(sizeReport(store, 'none'))).toBe('NOT_FOUND');
    const engine = await SnapshotEngine.open({ store, stream: 's' });
    await engine.checkpoint({ a: 1 });
    await engine.close();
    expect(await code(sizeReport(store, 's', { seq: 2 }))).toBe('NOT_FOUND');
    expect(await code(sizeReport(store, 's', { top: -1 }))).toBe('INVALID_ARGUMENT');
    expect(await code(sizeReport(store, 's', { seq: 0 }))).toBe('INVALID_ARGUMENT');
    const one = await sizeReport(store, 's');
    expect(one).toMatchObject({ seq: 1, stateBytes: encodeValue({ a: 1 }).byteLength, repeated: [] });
    expect(one.growth).toEqual([
      { seq: 1, kind: 'base', bytes: one.stored.totalBytes, stateBytes: one.stateBytes, growth: 0, grew: [] },
    ]);
  });
});
