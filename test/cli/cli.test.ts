import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileStore, SnapshotEngine, restore } from 'statefold';
import { fromJson, toJson } from '../../dist/cli/json.js';
import { cli } from '../support/cli.js';
import { flipByte } from '../support/damage.js';
import { tempDir } from '../support/stores.js';

/** A file store with `agent-42` (10 steps, a charge at step 6, typed values) and `tenant/other`; returns the keys of agent-42. */
async function demo(
  dir: string,
  encryption?: { keys: Record<string, Uint8Array>; current: string },
): Promise<string[]> {
  const store = new FileStore({ dir });
  const e = await SnapshotEngine.open({
    store,
    stream: 'agent-42',
    policy: { baseEvery: 4, maxDeltaRatio: Infinity },
    ...(encryption && { encryption }),
  });
  const s = {
    step: 0,
    when: new Date(0),
    vec: new Float32Array([1.5, -0, NaN]),
    neg: -0,
    messages: [] as { id: number; text: string }[],
  };
  const keys: string[] = [];
  for (let i = 1; i <= 10; i++) {
    s.step = i;
    s.messages.push({ id: i, text: `message ${i}` });
    if (s.messages.length > 3) s.messages.shift();
    if (i === 6) await e.effect('charge:order-7', async () => ({ receipt: 'r-7' }));
    keys.push((await e.checkpoint(s, { meta: { step: i } })).key);
  }
  await e.close();
  const other = await SnapshotEngine.open({ store, stream: 'tenant/other' });
  await other.checkpoint({ ok: true });
  await other.close();
  return keys;
}

describe('statefold CLI on the file store', () => {
  it('ls, log, show, diff: human and --json output', async () => {
    const dir = await tempDir();
    await demo(dir);
    expect(await cli(['ls', dir])).toMatchObject({ code: 0, stdout: 'agent-42\ntenant/other\n' });
    expect(JSON.parse((await cli(['ls', `file://${dir}`, '--prefix', 'tenant/', '--json'])).stdout)).toEqual([
      'tenant/other',
    ]);
    const log = await cli(['log', dir, 'agent-42', '--limit', '3']);
    expect(log.code).toBe(0);
    expect(log.stdout.trim().split('\n')).toHaveLength(4);
    const entries = JSON.parse((await cli(['log', dir, 'agent-42', '--all', '--json'])).stdout) as { seq: number }[];
    expect(entries.map((e) => e.seq)).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    const shown = await cli(['show', dir, 'agent-42', '--seq', '3', '--path', '/messages/2/text']);
    expect(shown).toMatchObject({ code: 0, stdout: '"message 3"\n' });
    const diff = await cli(['diff', dir, 'agent-42', '4', '5', '--json']);
    expect(JSON.parse(diff.stdout)).toContainEqual({ op: 'replace', path: '/step', value: 5 });
  });

  it('restore --out writes the state losslessly: Date, typed arrays, NaN and -0 come back', async () => {
    const dir = await tempDir();
    await demo(dir);
    // Outside the store's directory (a file there would be taken for a key), in a temp dir of its own.
    const out = path.join(await tempDir(), 'restored.json');
    const r = await cli(['restore', dir, 'agent-42', '--seq', '5', '--out', out]);
    expect(r).toMatchObject({ code: 0, stdout: `restored seq 5 (base) to ${out}\n` });
    const back = fromJson(JSON.parse(await readFile(out, 'utf8'))) as Record<string, unknown>;
    const want = (await restore(new FileStore({ dir }), 'agent-42', { seq: 5 })).state as Record<string, unknown>;
    expect(back).toEqual(want);
    expect(back.when).toBeInstanceOf(Date);
    expect(back.vec).toBeInstanceOf(Float32Array);
    expect(Object.is((back.vec as Float32Array)[1], -0)).toBe(true);
    expect(Number.isNaN((back.vec as Float32Array)[2])).toBe(true);
    expect(Object.is(back.neg, -0)).toBe(true);
  });

  it('verify and log on a damaged stream: exit 1, naming the damaged seq and what it breaks', async () => {
    const dir = await tempDir();
    const keys = await demo(dir);
    await flipByte(new FileStore({ dir }), keys[7]!); // step 8 is seq 10 (the effect took two): a delta of the chain based at 9
    const v = await cli(['verify', dir, 'agent-42']);
    expect(v.code).toBe(1);
    expect(v.stdout).toMatch(/^12 checked, 9 intact, 3 damaged; newest intact seq 9\n/);
    expect(v.stdout).toMatch(/seq 10: .*checksum mismatch/);
    expect(v.stdout).toMatch(/seq 12: .*chain is broken at seq 10/);
    const json = JSON.parse((await cli(['verify', dir, 'agent-42', '--json'])).stdout);
    expect(json.damaged.map((d: { seq: number }) => d.seq)).toEqual([10, 11, 12]);
    const log = await cli(['log', dir, 'agent-42', '--all']);
    expect(log.code).toBe(1);
    expect(log.stdout).toMatch(/ 10 {2}DAMAGED/);
    expect(await cli(['verify', dir, 'tenant/other'])).toMatchObject({ code: 0 });
  });

  it('gc, fork and rm change the store as they say', async () => {
    const dir = await tempDir();
    await demo(dir);
    const gc = await cli(['gc', dir, 'agent-42', '--keep-last', '2', '--min-age-ms', '0', '--json']);
    expect(JSON.parse(gc.stdout).oldestRetained).toBe(9);
    const fork = await cli(['fork', dir, 'agent-42', 'agent-42/retry']);
    expect(fork).toMatchObject({ code: 0 });
    expect(fork.stdout).toMatch(/1 effect records carried/);
    expect((await cli(['rm', dir, 'tenant/other'])).code, 'rm without --yes').toBe(2);
    expect(JSON.parse((await cli(['rm', dir, 'tenant/other', '--yes', '--json'])).stdout).deletedKeys).toBeGreaterThan(
      0,
    );
    expect((await cli(['ls', dir])).stdout).toBe('agent-42\nagent-42/retry\n');
    // A removed stream is gone for every command, though its tombstone stays in the store.
    expect((await cli(['log', dir, 'tenant/other'])).code).toBe(3);
    expect((await cli(['rm', dir, 'tenant/other', '--yes'])).code).toBe(3);
  });

  it('reads an encrypted stream with --key; without it, exit 3 naming the key', async () => {
    const dir = await tempDir();
    const key = randomBytes(32);
    await demo(dir, { keys: { k1: key }, current: 'k1' });
    const keyFile = path.join(await tempDir(), 'key');
    await writeFile(keyFile, key.toString('hex'));
    expect(await cli(['verify', dir, 'agent-42', '--key', `k1=${keyFile}`])).toMatchObject({ code: 0 });
    const locked = await cli(['show', dir, 'agent-42']);
    expect(locked.code).toBe(3);
    expect(locked.stderr).toMatch(/KEY_UNAVAILABLE.*"k1"/);
  });

  it('usage: exit 2 for unknown commands, options and missing arguments; --help per command; exit 3 for a missing stream', async () => {
    expect((await cli(['bogus'])).code).toBe(2);
    expect((await cli(['ls'])).code).toBe(2);
    expect((await cli(['ls', '/tmp', '--nope'])).code).toBe(2);
    expect((await cli(['show', '/tmp', 'x', '--seq', 'zero'])).code).toBe(2);
    expect((await cli([])).code).toBe(2);
    const help = await cli(['verify', '--help']);
    expect(help).toMatchObject({ code: 0 });
    expect(help.stdout).toMatch(/^Usage: statefold verify <store> <stream>/);
    const dir = await tempDir();
    const missing = await cli(['show', dir, 'nobody']);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/NOT_FOUND/);
  });

  it('exit 3 NOT_FOUND for a stream with no objects: log, verify, gc and rm (rm --if-exists: exit 0)', async () => {
    const dir = await tempDir();
    await demo(dir);
    for (const args of [
      ['log', dir, 'no-such-stream'],
      ['verify', dir, 'no-such-stream'],
      ['verify', dir, 'agent-4'], // a prefix of agent-42 is not agent-42
      ['gc', dir, 'no-such-stream', '--keep-last', '2'],
      ['rm', dir, 'no-such-stream', '--yes'],
    ]) {
      const r = await cli(args);
      expect(r, args.join(' ')).toMatchObject({ code: 3, stdout: '' });
      expect(r.stderr, args.join(' ')).toMatch(/^statefold \w+: NOT_FOUND: no stream "(no-such-stream|agent-4)" in /);
    }
    const idempotent = await cli(['rm', dir, 'no-such-stream', '--yes', '--if-exists', '--json']);
    expect(idempotent).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(idempotent.stdout)).toMatchObject({ deletedKeys: 0 });
    expect((await cli(['ls', dir])).stdout, 'nothing written for the missing stream').toBe('agent-42\ntenant/other\n');
  });

  it('a store directory that does not exist is NOT_FOUND (exit 3) for every command, and is not created', async () => {
    const parent = await tempDir();
    const gone = path.join(parent, 'no-such-dir');
    const file = path.join(parent, 'a-file');
    await writeFile(file, 'not a store');
    const out = path.join(parent, 'out.json');
    for (const store of [gone, `file://${gone}`, file]) {
      for (const args of [
        ['ls', store],
        ['log', store, 'agent-42'],
        ['show', store, 'agent-42'],
        ['diff', store, 'agent-42', '1', '2'],
        ['verify', store, 'agent-42'],
        ['restore', store, 'agent-42', '--out', out],
        ['gc', store, 'agent-42', '--keep-last', '1'],
        ['rm', store, 'agent-42', '--yes', '--if-exists'],
        ['fork', store, 'agent-42', 'copy'],
      ]) {
        const r = await cli(args);
        expect(r, args.join(' ')).toMatchObject({ code: 3, stdout: '' });
        expect(r.stderr, args.join(' ')).toMatch(/: NOT_FOUND: store .*: (no such directory|not a directory)\n$/);
      }
    }
    await expect(readFile(out)).rejects.toThrow(/ENOENT/);
    await expect(readFile(path.join(gone, 'x'))).rejects.toThrow(/ENOENT/); // not created
    expect(await cli(['ls', await tempDir()]), 'an empty store is no error').toEqual({
      code: 0,
      stdout: '',
      stderr: '',
    });
  });

  it('usage: an extra argument, an unknown option, a missing value: exit 2 in one line naming it', async () => {
    const dir = await tempDir();
    await demo(dir);
    const extra = await cli(['verify', dir, 'agent-42', 'agent-43']);
    expect(extra.code).toBe(2);
    expect(extra.stderr).toMatch(/^statefold verify: unexpected argument "agent-43"\n/);
    expect((await cli(['ls', dir, 'tenant/'])).code, 'ls takes no stream').toBe(2);
    expect((await cli(['diff', dir, 'agent-42', '4', '5', '6'])).code).toBe(2);
    expect(await cli(['ls', dir, '--nope'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'statefold ls: unknown option --nope; see statefold ls --help\n',
    });
    expect(await cli(['verify', dir, 'agent-42', '--seq', '5']), 'an option of another command').toEqual({
      code: 2,
      stdout: '',
      stderr: 'statefold verify: --seq is not an option of verify; see statefold verify --help\n',
    });
    expect(await cli(['--nope'])).toMatchObject({
      code: 2,
      stderr: 'statefold: unknown option --nope; see statefold --help\n',
    });
    expect(await cli(['log', dir, 'agent-42', '--limit'])).toMatchObject({
      code: 2,
      stderr: 'statefold log: --limit needs a value; see statefold log --help\n',
    });
    expect(await cli(['log', dir, 'agent-42', '--json=yes'])).toMatchObject({
      code: 2,
      stderr: 'statefold log: --json takes no value; see statefold log --help\n',
    });
    const dashed = await cli(['restore', dir, 'agent-42', '--out', '--json']);
    expect(dashed.code).toBe(2);
    expect(dashed.stderr).toMatch(
      /^statefold restore: --out needs a value \(got --json; write --out=--json to mean it\)/,
    );
  });

  it('usage: numbers are whole numbers in range; --limit -3 and --limit=-3 say so (exit 2)', async () => {
    const dir = await tempDir();
    await demo(dir);
    for (const [args, message] of [
      [['log', dir, 'agent-42', '--limit', '-3'], '--limit -3: must be 1 or more'],
      [['log', dir, 'agent-42', '--limit=-3'], '--limit -3: must be 1 or more'],
      [['log', dir, 'agent-42', '--limit', '0'], '--limit 0: must be 1 or more'],
      [['log', dir, 'agent-42', '--limit', '1e3'], '--limit 1e3: not a whole number'],
      [['log', dir, 'agent-42', '--before', '0x10'], '--before 0x10: not a whole number'],
      [['show', dir, 'agent-42', '--seq', '+5'], '--seq +5: not a whole number'],
      [['gc', dir, 'agent-42', '--keep-last', '2', '--keep-for-ms', '1.5'], '--keep-for-ms 1.5: not a whole number'],
      [['gc', dir, 'agent-42', '--keep-last', '2', '--min-age-ms', '-1'], '--min-age-ms -1: must be 0 or more'],
      [['diff', dir, 'agent-42', '4', '5e0'], '<seqB> 5e0: not a whole number'],
    ] as const) {
      const r = await cli([...args]);
      expect(r, args.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(r.stderr.split('\n')[0], args.join(' ')).toBe(`statefold ${args[0]}: ${message}`);
    }
    expect((await cli(['log', dir, 'agent-42', '--limit=2'])).code).toBe(0);
  });

  it('lossless JSON round-trips what JSON cannot hold', () => {
    const odd: Record<string, unknown> = {
      buf: Buffer.from([1, 2, 255]),
      offset: new Float32Array([9, 1.5, -0, NaN]).subarray(1),
      big: new BigInt64Array([-5n]),
      when: new Date(1_700_000_000_123),
      bad: new Date(NaN),
      lone: 'a\ud800b',
      inf: [Infinity, -Infinity, -0, NaN],
      mine: { $sf: 'Date', v: 'not a date' },
    };
    Object.defineProperty(odd, '__proto__', { value: { polluted: true }, enumerable: true });
    const back = fromJson(JSON.parse(JSON.stringify(toJson(odd)))) as Record<string, unknown>;
    expect(back).toEqual(odd);
    expect(Buffer.isBuffer(back.buf)).toBe(true);
    expect(Object.is((back.offset as Float32Array)[1], -0)).toBe(true);
    expect(back.mine).toEqual({ $sf: 'Date', v: 'not a date' });
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.hasOwn(back, '__proto__')).toBe(true);
  });

  it('lossless JSON reads back every typed array a state can hold, and no other class', () => {
    const arrays = [
      new Int8Array([-1, 2]),
      new Uint8Array([1, 255]),
      new Uint8ClampedArray([0, 255]),
      new Int16Array([-300]),
      new Uint16Array([65535]),
      new Int32Array([-70000]),
      new Uint32Array([4e9]),
      new Float32Array([1.5, -0]),
      new Float64Array([Math.PI]),
      new BigInt64Array([-5n]),
      new BigUint64Array([2n ** 64n - 1n]),
      Buffer.from([7, 8]),
    ];
    for (const a of arrays) {
      const back = fromJson(JSON.parse(JSON.stringify(toJson(a))));
      expect(back, a.constructor.name).toEqual(a);
      expect(Object.getPrototypeOf(back), a.constructor.name).toBe(Object.getPrototypeOf(a));
    }
    // A tag naming a global that is not a typed-array class stays a plain object.
    for (const tag of ['DataView', 'ArrayBuffer', 'Function', 'constructor', 'toString'])
      expect(fromJson({ $sf: tag, v: 'AAAA' }), tag).toEqual({ $sf: tag, v: 'AAAA' });
  });
});
