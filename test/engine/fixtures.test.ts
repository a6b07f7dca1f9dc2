import { createHash } from 'node:crypto';
import { cp, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { unpack } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { FileStore, SnapshotEngine, listCheckpoints, restore, verifyStream, type Encryption } from 'statefold';
import {
  FIXTURES,
  fixtureEncryption,
  fixtureSeqs,
  fixtureState,
  type StreamFixture,
} from '../fixtures/v2-4-states.mjs';
import { firstDifference } from '../support/same.js';
import { tempDir } from '../support/stores.js';
import { verified } from '../support/checkpoints.js';

/**
 * The frozen fixtures of format versions 2 (appends), 3 (sealed) and 4 (span deltas, plain and
 * sealed), written once by test/fixtures/generate-v2-4.mjs: every version a statefold ever wrote
 * must read forever. Version 1 has its own test in format.test.ts; its digests are checked here too.
 */

const FIXTURES_DIR = fileURLToPath(new URL('../fixtures', import.meta.url));

/**
 * SHA-256 of every committed fixture file, by directory. Written by hand once, from the generated
 * files: a regenerated fixture (other nonces, writer ids and times) cannot quietly take an old one's place.
 */
const DIGESTS: Record<string, Record<string, string>> = {
  v1: {
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000001':
      'deea002a934421c33cf9bd127dab7464a01a7d0f95cc41c073bbaa6b74a3eacf',
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000001.0000000000000001':
      '1a06a5c505fe404dab9ae642c5a0828d62967b7224451214da119e5d5098d055',
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000002':
      '99a7c32ffc8a898fbf2fe0a6609b72cbbe88f8d9230f34c7d44fbe2f8879eb11',
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000003':
      '09a46a911465c3491a30160b0c6f57c6fee36246705dcd2c089dbb28e16ca4cb',
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000004':
      '83834a94bd776cf0786a11fd1ecfe7fd115f3eee700ed553f48ac4a20a9ba530',
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000005':
      'e6183903dcd83bce524c8a332487c4e9f01acdd39d62dffbcca119bd5f21df67',
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000006':
      '42f13376ffe8135c0b1af43f01c3faadae2f9f19444cceca36320eee75d22a53',
    's.fixture~2fv1~20~c3~bcn~c3~afc~c3~b8d~c3~a9/log/0000000000000007':
      'aee86a8ac70163cf9b568ae5bba5c83215bf76bf85cedda104e4334384547be8',
  },
  v2: {
    '@layout': '3d309028b66a8f19dbfc9da3f4ed0a30cfdcac0db6899700020c66cbc65db6c5',
    's.fixture~2fv2~20appends/hint/00000000000000@/0000000000000009':
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000001':
      'c19bfa351463af6969540bdf56fb683ac93d1dcb6e17af2804d2d468c55752f4',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000001.0000000000000001':
      'b6e2a0b26161416e2972a531bb62655b5bf79b866cde1fe3590ab907b06dabc9',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000002':
      '8b4293436471ed30a761251f07b3bd2d060cdd19527371db352ee29c6c0559a5',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000003':
      '8ae2a0dcea58518be7f21f6e4a6733c1388588fbcf5b5895d274f00af85b633f',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000004':
      'd0c05a6f5120ee354365c3d551a05161eb22fa36f00b0a3f5fa8d2c8e3369c24',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000005':
      'ec42f4399e1000f5e8358f4fc78dc22728d77db20f1478d60765011cdf71d724',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000006':
      '6164821962a8991cbc4471c79a48d225266983d2aa64c08343dc319002d4b4e3',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000007':
      '0600e16c6e64b7cde1de29c0fa551b5471a409df34ffb5eba3407a2dc82f1f75',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000008':
      'ac45f7f3680e398abe913049168c7ec55e371f72c94d824d47be3d75d45bfd0b',
    's.fixture~2fv2~20appends/log/00000000000000@/0000000000000009':
      'e0a48fa27a6ba495cb7c8749446cc09804ec93b0d073ea69601233d05ee31d8a',
  },
  v3: {
    '@layout': '3d309028b66a8f19dbfc9da3f4ed0a30cfdcac0db6899700020c66cbc65db6c5',
    's.fixture~2fv3~20sealed/hint/00000000000000@/000000000000000a':
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000001':
      'd70cffe93f9bfc3539a540f76e9d41d9def762ea55cee2df0389c2b26d60333f',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000001.0000000000000001':
      '6c50c5f807969f474a5dd181afcc5de2c0e7b77b97ef8c3154a708a2d7f05d2a',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000002':
      'a15d60cb9bf37e5c2e812d2ad9bca99db042d488e6c34822d8c2e6fe87aa8273',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000003':
      'c7bb90eb2d4ab794a6843af799b846200e6b557ca2a5609bd7747a260e61321f',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000004':
      'fb3f9e8edd91d142b5c8fb016622dfc60e00cdbdc35abd6e449faf8d835dcfa6',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000005':
      '96209d1bd369a6c5a1c4077d7af6b69aa4315aadac9e6a332d97f1947da06050',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000006':
      '516fe9a27e1f0f9eb2bec1010d7be335cb2d917d32d5988d4c3fcc70c3e85c50',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000007':
      '871dee874b04bdc9d9a51eeaf56d2d024c767ba896406209ed1ed0b0efb223de',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000007.0000000000000002':
      'b59de89fc27fbdbee405cd2c0f13e82cec94ff7d487322397d87191cfc295957',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000008':
      '5a13ee160fb332e2972f27a4b726228ca6bfd01ba586bd87481232650e090620',
    's.fixture~2fv3~20sealed/log/00000000000000@/0000000000000009':
      '45af29e47dd85423a499feff2cbe3fecdc6aef56467f70fe0da94f153269e9d8',
    's.fixture~2fv3~20sealed/log/00000000000000@/000000000000000a':
      'df02ec2790a943ab3f8a451a61628228b8c98b0c5077f0726c88cda6df405d8b',
    's.fixture~2fv3~20sealed/log/00000000000000@/000000000000000b':
      '15eed2a9b0c09bb21ca0aea5ff6c0e752fea29d2b2cc90f9c36fcf87db1ebcb7',
  },
  v4: {
    '@layout': '3d309028b66a8f19dbfc9da3f4ed0a30cfdcac0db6899700020c66cbc65db6c5',
    's.fixture~2fv4~20sealed~20spans/hint/00000000000000@/0000000000000008.0000000000000004':
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000001':
      '3703abdc922f3ceb2cca911f9e972d6240b837968c44e1c2f123af2e4b8123e1',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000001.0000000000000001':
      '1d76cd6360246905f6a1aace43a081b26fafaf9031a4dad2e7fe0e1ae2fba5cb',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000002':
      'a43d082f13fae485ed7a6bbf62944e524c20040f6ce94fe057c652ea184e59f8',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000003':
      'da813f56324f5b5696367839495fd1b2c7a2ef755b5f97611853e1df17117459',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000004':
      '991dae6b15da3f6ce0c18bd278354af7da106bf4fc350cd575583a1ef0e6dd74',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000005':
      'bbcd492f2f929624d035a8b806e56fc98b9e9cd469cc826794c41d12e12ff2ca',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000006':
      'dbab370cd2a1cd3f53bdb229002c018754083153bc974927765a3ccd4c21eb5a',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000007':
      '752b1031cb1177b19a74efc31017403962e0f30bdb10624eac507ecf0b308348',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000008':
      'b601d98e024b8a0a12cc13c7e565c117f9dc5bb940260bd82e0b86e60955d8f0',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000008.0000000000000002':
      '5a085fb68a1bf6d567b262f095dcec79ca4ea2b0acdadb25e4c390ae0767bcf8',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/0000000000000009':
      '9157f61d132e0afe3a2d2e2ecc5978b6b3732b0e139faf157adc5d9170097e76',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/000000000000000a':
      '354db40dc325e62cdbf797985b11fc9f652064915359fbbc2077b5d541ae1606',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/000000000000000b':
      'fd7bd4a7fe6254631d4492cd04392317c828dde6fd984a46f56bfde01e170989',
    's.fixture~2fv4~20sealed~20spans/log/00000000000000@/000000000000000c':
      'f07d6e72c708da40687c8ce8807061dd220df63bba599078a474c561ee22fbdd',
    's.fixture~2fv4~20spans/hint/00000000000000@/0000000000000001.0000000000000003':
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000001':
      'e7fa1f8d1ccd49b2dea90eeb7281cbaea2b803de493fd8b129ff920390fb7efa',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000001.0000000000000001':
      '5ce0ee8f587722964a1f10abfa5097f046b264678a8221c9f1c4efcfd4f5a16a',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000002':
      '0b8a2b9013e69b56a7266e3a4c3956d16b0582f89ce3f77014077ff2507cb688',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000003':
      '4ea0152f3cf1b24a8f32f51affcd8e814ef9a943530971384cecee183934500c',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000004':
      'f8d7baf232aebf0ed3d041c429f35f468171fb6664097b25c153355ddd61a603',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000005':
      '2ddc1a1ee6c94ee7c00d39b22f69551d80a590a3f86939c6b7543fee4b199244',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000006':
      'ee929221b1d8482fdabe5f5f245422c7fac1a3591ff08e372609732a23020c60',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000007':
      '43dbc33e65725a198ac46271eae1694dc341890cc3f673e6c9170c4718fe2123',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000008':
      'df1cd7c68d63aae6ff27d2e1b22139cf2a1a05c234f884483b1eef172eb8f658',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000008.0000000000000002':
      'd7c4232455a16435964f028bef4d68641e116b1957b644daae7204799350fcd5',
    's.fixture~2fv4~20spans/log/00000000000000@/0000000000000009':
      'd92800a303d3c685fa3f083ec1c55471c06dd25d6e0968081b660ac8b44d285b',
    's.fixture~2fv4~20spans/log/00000000000000@/000000000000000a':
      'c417241af8a5c1ca0c9d2b8f54f3f66029573c13eea8197c5be47bb17aef55f8',
    's.fixture~2fv4~20spans/log/00000000000000@/000000000000000b':
      '077d2bd9acbbffcfd0ea99b546040a7f29db13f3a8e0b7bb023b456a00f8aca9',
  },
};

/**
 * What each fixture's log objects are, as "v<version> <kind> flags <flags>" with how many: what the
 * fixture was made to cover, so that it cannot quietly cover less.
 */
const FRAMES: Record<string, Record<string, number>> = {
  v2: { 'v1 fence flags 0': 1, 'v1 base flags 0': 3, 'v1 delta flags 0': 4, 'v2 delta flags 0': 2 },
  v3: {
    'v3 fence flags 1': 2,
    'v3 base flags 1': 1,
    'v3 base flags 3': 3,
    'v3 delta flags 1': 1,
    'v3 delta flags 3': 6,
  },
  v4: {
    // fixture/v4 spans: plaintext, span deltas at seqs 4, 7 and 10 (the last one after a reopen).
    'v1 fence flags 0': 2,
    'v1 base flags 0': 1,
    'v1 delta flags 0': 4,
    'v2 delta flags 0': 3,
    'v4 delta flags 0': 3,
    // fixture/v4 sealed spans: span deltas at seqs 5 and 12, in two chains sealed with two keys.
    'v3 fence flags 1': 2,
    'v3 base flags 3': 2,
    'v3 delta flags 1': 1,
    'v3 delta flags 3': 7,
    'v4 delta flags 3': 2,
  },
};

const KINDS = ['', 'base', 'delta', 'fence'];

/** Every file under `dir`, by path relative to it (with '/'). */
async function files(dir: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = path.join(entry.parentPath, entry.name);
    out.set(path.relative(dir, full).split(path.sep).join('/'), await readFile(full));
  }
  return out;
}

/** The fixture `name` copied to a temp directory, so that no test can change the committed bytes. */
async function copyOf(name: string): Promise<FileStore> {
  const dir = await tempDir();
  await cp(path.join(FIXTURES_DIR, name), dir, { recursive: true });
  return new FileStore({ dir });
}

/** The keys a fixture stream was sealed with, as the `encryption` option (current: its last one), if sealed. */
function encryptionOf(fixture: StreamFixture): Encryption | undefined {
  const last = fixture.sessions.at(-1)!.key;
  return last === undefined ? undefined : fixtureEncryption(last);
}

describe('format fixtures: the committed bytes', () => {
  it.each(Object.keys(DIGESTS))(
    '%s: every file is the one committed, and no file is missing or added',
    async (name) => {
      const found = await files(path.join(FIXTURES_DIR, name));
      const digests = Object.fromEntries(
        [...found].map(([file, bytes]) => [file, createHash('sha256').update(bytes).digest('hex')]),
      );
      expect(digests).toEqual(DIGESTS[name]);
    },
  );

  it.each(Object.keys(FRAMES))('%s: holds the frame versions, kinds and flags it was made to cover', async (name) => {
    const counts: Record<string, number> = {};
    for (const [file, bytes] of await files(path.join(FIXTURES_DIR, name))) {
      if (!file.includes('/log/')) continue;
      expect(bytes.subarray(0, 4).toString('latin1'), file).toBe('SFLD');
      const what = `v${bytes[4]} ${KINDS[bytes[5]!]} flags ${bytes[7]}`;
      counts[what] = (counts[what] ?? 0) + 1;
    }
    expect(counts).toEqual(FRAMES[name]);
  });

  it('stores a plaintext span delta with its jump, the checksum it jumps from and the ledger changes it spans', async () => {
    const found = await files(path.join(FIXTURES_DIR, 'v4'));
    const [, bytes] = [...found].find(
      ([file]) => file.startsWith('s.fixture~2fv4~20spans/') && file.endsWith('/0000000000000007'),
    )!;
    expect(bytes[4]).toBe(4);
    const header = unpack(bytes.subarray(20, 20 + bytes.readUInt32LE(8))) as Record<string, unknown>;
    // Seq 7 jumps from the span delta at 4, over seq 5 (the outcome of the effect begun at 4) and 6.
    expect(header).toMatchObject({ q: 7, b: 1, l: 3, j: 4, c: expect.any(Number) });
    expect(header.y).toEqual([['book-flight', expect.objectContaining({ s: 'done' })]]);
  });
});

for (const { dir: name, streams } of FIXTURES) {
  describe(`format fixture ${name}`, () => {
    it.each(streams.map((f) => [f.stream, f] as const))(
      '%s: restores every seq to its state, meta, effects and key',
      async (stream, fixture) => {
        const store = await copyOf(name);
        const encryption = encryptionOf(fixture);
        const seqs = fixtureSeqs(fixture);
        for (const expected of seqs) {
          const r = await restore(store, stream, { seq: expected.seq, ...(encryption && { encryption }) });
          expect(firstDifference(r.state, fixtureState(expected.step)), `seq ${expected.seq}`).toBeUndefined();
          expect(r.meta, `seq ${expected.seq}`).toEqual(expected.meta);
          const effects = r.effects.map(({ token, status, result }) => ({
            token,
            status,
            ...(result !== undefined && { result }),
          }));
          expect(effects, `seq ${expected.seq}`).toEqual(expected.effects);
        }
        const listed = verified(await listCheckpoints(store, stream, { ...(encryption && { encryption }) }));
        expect(listed.map((c) => c.seq)).toEqual(seqs.map((s) => s.seq));
        expect(listed.map((c) => c.keyId)).toEqual(seqs.map((s) => s.keyId));
        // verifyStream folds every chain, and compares each span delta's operations with the plain deltas it spans.
        const report = await verifyStream(store, stream, { ...(encryption && { encryption }) });
        expect(report.damaged).toEqual([]);
        expect(report.intact).toEqual(seqs.map((s) => s.seq));
      },
    );

    it.each(streams.map((f) => [f.stream, f] as const))('%s: a new engine continues it', async (stream, fixture) => {
      const store = await copyOf(name);
      const encryption = encryptionOf(fixture);
      const last = fixtureSeqs(fixture).at(-1)!;
      const engine = await SnapshotEngine.open({ store, stream, ...(encryption && { encryption }) });
      expect(engine.seq).toBe(last.seq);
      expect(firstDifference(engine.state, fixtureState(last.step))).toBeUndefined();
      expect((await engine.checkpoint(fixtureState(last.step + 1))).seq).toBe(last.seq + 1);
      await engine.close();
      const r = await restore(store, stream, { ...(encryption && { encryption }) });
      expect(firstDifference(r.state, fixtureState(last.step + 1))).toBeUndefined();
    });

    for (const fixture of streams.filter((f) => encryptionOf(f) !== undefined)) {
      it(`${fixture.stream}: is unreadable without its keys, and with the wrong key`, async () => {
        const store = await copyOf(name);
        const last = fixtureSeqs(fixture).at(-1)!;
        await expect(restore(store, fixture.stream)).rejects.toMatchObject({
          code: 'KEY_UNAVAILABLE',
          message: expect.stringContaining(last.keyId!),
        });
        const wrong = { keys: { [last.keyId!]: new Uint8Array(32).fill(7) }, current: last.keyId! };
        await expect(restore(store, fixture.stream, { encryption: wrong })).rejects.toMatchObject({
          code: 'CORRUPT',
          message: expect.stringContaining('authentication failed'),
        });
      });
    }
  });
}
