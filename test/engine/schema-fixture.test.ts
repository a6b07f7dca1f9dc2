import { createHash } from 'node:crypto';
import { cp, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { unpack } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { FileStore, SnapshotEngine, restore, verifyStream } from 'statefold';
import { V5_KEY, V5_STREAMS, fixtureSchema, toV3, v5Seqs } from '../fixtures/v5-states.mjs';
import { tempDir } from '../support/stores.js';

/**
 * The frozen fixture of format version 5 (checkpoints that record a schema version), written once
 * by test/fixtures/generate-v5.mjs: sessions of schema versions 1, 2 and 3 (one declaring its
 * states readable from 2), plain, sealed and with span deltas. Every seq must restore, upcast to
 * version 3, forever.
 */

const DIR = fileURLToPath(new URL('../fixtures/v5', import.meta.url));

/** SHA-256 of every committed file: a regenerated fixture cannot quietly take this one's place. */
const DIGESTS: Record<string, string> = {
  '@layout': '3d309028b66a8f19dbfc9da3f4ed0a30cfdcac0db6899700020c66cbc65db6c5',
  's.fixture~2fv5~20schema/hint/00000000000000@/000000000000000c':
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000001':
    '567f69cf294f0ae5785e2b21c5e928f8e19eb2339fe8eb0f781d0618f75dd8fc',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000001.0000000000000001':
    '705eaf96e65a3142922eda07b2305e77564e997db397de1eddc7174b9524826c',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000002':
    '3138eafc823138368e681b8966de305b9cd76c3a8880ed956a6250536f841f9f',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000003':
    '5ac41202521b5db1571a798a151edd97e3ea717191d8e54d3676a596933c37db',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000004':
    'e72e9a3f3b76d7ec6c442e6b70405e65f58089ff57b95edd39dc19b16f362396',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000005':
    'f5ac17f84d0b1ea202ae8c09b336c7d7060f04c8b3e07a249c98bff678d109d6',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000005.0000000000000002':
    '0dd93f8a61898acc19903c5762519de5ab1608ec5d360c10ff78d3035f603c3d',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000006':
    'fa4c27f21d4c9c044ed836351cd42be6d2d56cfd6f903b51d9717095a69ac5d1',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000007':
    'ce87c35b79b7290efff17689251ff1f32d287e83bf053653d11806d76d941146',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000008':
    '0743a8173f2a8f8fd8868776f59e6d8910b55b199f7b84d0798abc6bce1d8064',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000009':
    '18ff3d7fc5c2bd87c0a1c78e8c9835cc7fde681f7e98401ff8d3b39060e0ab8f',
  's.fixture~2fv5~20schema/log/00000000000000@/0000000000000009.0000000000000003':
    'ea55e9da45f73badb6e3f359884d8caeb0c4b1d94d25b7fc90d4d496a91cc16b',
  's.fixture~2fv5~20schema/log/00000000000000@/000000000000000a':
    'fd03f8fbd99fb02d74a1a0435284ae557d9168eaf252d285707849ac88cf4d7c',
  's.fixture~2fv5~20schema/log/00000000000000@/000000000000000b':
    '918a01b1ab5a36c2a2f750428b7192b1d41e2a24c9c3273a0b9137c7c3e419d2',
  's.fixture~2fv5~20schema/log/00000000000000@/000000000000000c':
    '7c775552d889fba42cf965442a638afdabd18e9a302d746035d6ea1f21bd0bb6',
  's.fixture~2fv5~20sealed/hint/00000000000000@/0000000000000006':
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000001':
    '9ec47d7bbdb547f58c6d2710d2bf9d07096159c9d20aed79935fac3d572e3183',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000001.0000000000000001':
    '20b987a85020af024f7dde2559bdcf198048f816d573961cdaa901f75ceaec81',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000002':
    'ad1ef65feef5f26325efffbc1a192e6bf807684ac65da7cf4e49ecab53a418f9',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000003':
    'bc16ac3a226f4764ea14cc30993297b8173b1bbb7d549b2fdf3b254a5a179378',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000003.0000000000000002':
    '9094451dd91ba03b78489b1c06f6d9716fee1dd73a384821b6d20544be48ddd6',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000004':
    '8d29e91ec4582faf408acd3e22b754a72fe8db0512f201718fc2e89a921b9e0e',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000005':
    '70cf1a75f7db75df786afd256b098866f8761b4385e7cf135bf6d2edd3c7e06c',
  's.fixture~2fv5~20sealed/log/00000000000000@/0000000000000006':
    '67ccdf51788924d4406cc719c8789d9175298e614ad08d25c5dd50d356604f8e',
  's.fixture~2fv5~20spans/hint/00000000000000@/0000000000000006.0000000000000003':
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000001':
    'e398b843474a2236ec46df3f60553c726b57ac9bc13a7281eeecc379226ca555',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000001.0000000000000001':
    'ada68270ad07c30af9c345faf4a644ca3d33542daedec80d258c9395d5600f12',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000002':
    '3d14e3ee3b707bf26245d6bad5210b6d17620975fe72cff1d1343b518e735386',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000003':
    'bcf93a3d5eb7ed170274ccf6372ac71164abc6084583d5d61e8be9e7cc17d10f',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000004':
    '0a68922b32b6e8bc50eda8a47e693437647b2bdc863d6fea29682a139b9a6efa',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000005':
    'e8833430e47d825dbc809566cbfd2971d8a32c7ecb28775a71eabf28d498b35e',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000006':
    'f68d041c1e8cbc339577cbfbeec0839fc7b02a0c825babf62770e3bd586d22c6',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000006.0000000000000002':
    '16cd511f85a1423edd89359b4cd401d3f3f95b1092e6e1c25ea9e7769331e118',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000007':
    '1ffc3cbcb9ec7c288943c4fd84a55024dac3c044e67e8c7629e781086408c0f4',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000008':
    '5a4b471eb335550affd3db8b15db045cf8c134787c95cdd4487223c017744f50',
  's.fixture~2fv5~20spans/log/00000000000000@/0000000000000009':
    '89e98837b84d317df118cfc71b91834a27047c53b690d36ae2966cc110737f0d',
  's.fixture~2fv5~20spans/log/00000000000000@/000000000000000a':
    'e83a365586582322d520eb2a63aa13ee53392606dc4e8925db1b00eebbbdfdd0',
};

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

const encryption = { keys: V5_KEY, current: 'fixture-key-5' };

describe('format fixture v5: schema versions', () => {
  it('every file is the one committed; v5 frames hold v (and o), span deltas a jump', async () => {
    const found = await files(DIR);
    const digests = Object.fromEntries(
      [...found].map(([file, bytes]) => [file, createHash('sha256').update(bytes).digest('hex')]),
    );
    expect(digests).toEqual(DIGESTS);
    let spans = 0;
    let readable = 0;
    for (const [file, bytes] of found) {
      if (!file.includes('/log/') || bytes[4] !== 5) continue;
      const header = unpack(bytes.subarray(20, 20 + bytes.readUInt32LE(8))) as Record<string, unknown>;
      expect(header.v, file).toBeGreaterThanOrEqual(2);
      if (header.j !== undefined) spans++;
      if (header.o !== undefined) readable++;
    }
    expect(spans).toBeGreaterThan(0);
    expect(readable).toBeGreaterThan(0);
  });

  it.each(V5_STREAMS.map((f) => [f.stream, f] as const))(
    '%s: every seq restores as version 3, and as stored; a new engine continues it',
    async (stream, fixture) => {
      const dir = await tempDir();
      await cp(DIR, dir, { recursive: true });
      const store = new FileStore({ dir, ioThreads: 0 });
      const enc = fixture.key ? { encryption } : {};
      for (const { seq, version, state } of v5Seqs(fixture)) {
        const r = await restore(store, stream, { seq, schema: fixtureSchema(3), ...enc });
        expect([r.schemaVersion, r.state], `seq ${seq}`).toEqual([version, toV3(state, version)]);
        expect((await restore(store, stream, { seq, schema: 'stored', ...enc })).state).toEqual(state);
      }
      expect((await verifyStream(store, stream, enc)).damaged).toEqual([]);
      const last = v5Seqs(fixture).at(-1)!;
      const engine = await SnapshotEngine.open({ store, stream, schema: fixtureSchema(3), ...enc });
      expect(engine.state).toEqual(last.state);
      await engine.checkpoint({ data: { step: 99, notes: [] }, steps: [] });
      await engine.close();
      expect((await restore(store, stream, { schema: fixtureSchema(3), ...enc })).seq).toBe(last.seq + 1);
    },
  );
});
