import { copyFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore } from 'statefold/sqlite';
import { describeStoreSweep } from '../support/store-sweep.js';

/**
 * Crash points of SqliteStore. A store operation is one SQLite transaction, which lands whole or
 * not at all, so a crash can fall: before the transaction reaches the database (nothing landed),
 * inside it before COMMIT (nothing: SQLite rolls it back, see sqlite-kill.test.ts), while COMMIT
 * appends its frames to the WAL (torn: the frames after the last whole commit frame are ignored),
 * or after COMMIT and before the reply (landed, not acknowledged). The first part cuts the WAL of
 * a real group commit at every frame boundary and inside frames and opens each copy; the second
 * runs the engine's crash-point sweep (test/crash/crash-sweep.test.ts) on a SqliteStore, every
 * operation crashing both before and after it lands.
 */

const dirs: string[] = [];
const stores: SqliteStore[] = [];
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'statefold-sqlite-crash-'));
  dirs.push(dir);
  return dir;
}

const body = (key: string, size: number): Buffer => {
  const b = Buffer.alloc(size, key.length);
  b.write(key, 0);
  return b;
};

/** Every key of a store and its body, in key order. */
async function contents(store: SqliteStore): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for (const key of await store.list('')) out.push([key, Buffer.from((await store.get(key))!).toString('base64')]);
  return out;
}

describe('sqlite crash points: a commit torn anywhere in its WAL frames', () => {
  it('opens every cut of the last group commit as before it or, cut after its commit frame, as after it', async () => {
    const dir = await freshDir();
    const file = path.join(dir, 'torn.db');
    const store = new SqliteStore({ path: file });
    stores.push(store);
    for (let i = 0; i < 5; i++) await store.putIfAbsent(`t/${i}`, body(`t/${i}`, 3000));
    const before = await contents(store);
    const walStart = (await stat(`${file}-wal`)).size;
    const tx = store.stats().transactions;
    // One group commit: creates across many pages, an existing key, a delete.
    const results = await Promise.all([
      store.putIfAbsent('t/a', body('t/a', 9000)),
      store.putIfAbsent('t/0', body('x', 10)),
      store.delete('t/1'),
      store.putIfAbsent('t/b', body('t/b', 20000)),
    ]);
    expect(results).toEqual([true, false, undefined, true]);
    expect(store.stats().transactions - tx, 'the four writes were one transaction').toBe(1);
    const after = await contents(store);
    const wal = await readFile(`${file}-wal`);
    const pageSize = wal.readUInt32BE(8);
    const frame = 24 + pageSize;
    const frames = (wal.length - walStart) / frame;
    expect(Number.isInteger(frames) && frames > 3, `whole frames after the earlier commits (${frames})`).toBe(true);
    // The last frame is the commit frame: its header holds the database size after the commit.
    expect(wal.readUInt32BE(wal.length - frame + 4)).toBeGreaterThan(0);
    for (let f = 0; f < frames - 1; f++) expect(wal.readUInt32BE(walStart + f * frame + 4), `frame ${f}`).toBe(0);

    const cuts = new Set<number>([walStart, walStart + 1, wal.length - 1, wal.length]);
    for (let f = 0; f < frames; f++) {
      const at = walStart + f * frame;
      for (const c of [at, at + 12, at + 24, at + 24 + (pageSize >> 1)]) cuts.add(c);
    }
    let whole = 0;
    let none = 0;
    const check = async (wal2: Buffer, what: string, expected: [string, string][]): Promise<void> => {
      const copy = path.join(await freshDir(), 'copy.db');
      await copyFile(file, copy);
      await writeFile(`${copy}-wal`, wal2);
      const reopened = new SqliteStore({ path: copy });
      try {
        expect(await contents(reopened), what).toEqual(expected);
        // The copy takes writes again: the torn frames are gone for good.
        expect(await reopened.putIfAbsent('t/after', body('t/after', 100)), what).toBe(true);
        expect(await reopened.putIfAbsent('t/a', body('t/a', 100)), what).toBe(expected !== after);
      } finally {
        await reopened.close();
      }
    };
    for (const cut of [...cuts].sort((a, b) => a - b)) {
      const landed = cut === wal.length;
      await check(wal.subarray(0, cut), `WAL cut at byte ${cut} of ${wal.length}`, landed ? after : before);
      if (landed) whole++;
      else none++;
    }
    // A commit frame whose bytes were damaged (its checksum fails) does not count either.
    const flipped = Buffer.from(wal);
    flipped[wal.length - (pageSize >> 1)]! ^= 0x40;
    await check(flipped, 'the commit frame damaged', before);
    expect(none).toBeGreaterThan(4 * frames);
    expect(whole).toBe(1);
  });
});

// The engine's crash-point sweep, on a SqliteStore: one database file per seed, one stream per case.
describeStoreSweep({
  name: 'sqlite',
  seeds: [1, 2, 3, 4, 5, 6, 7, 8],
  create: async () => {
    const store = new SqliteStore({ path: path.join(await freshDir(), 'sweep.db') });
    stores.push(store);
    return store;
  },
});
