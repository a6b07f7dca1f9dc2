/**
 * How a FileStore lays keys out in directories.
 *
 * - `flat` (every store written before layouts existed): `<dir>/<key>`, one directory per key
 *   segment. A stream's log is then one directory with a file per checkpoint, and listing any of
 *   it reads the whole directory: at 100,000 checkpoints an open took 418 ms against 3 ms at 100.
 * - `sharded` (every store created since): the same, except that a last segment of 16 characters
 *   or more (statefold's seqs are 16 hex digits) goes into a shard directory named after its first
 *   14 characters and `@`: `<dir>/s/log/00000000000001@/0000000000000123`. A shard holds at most
 *   256 seqs and the keys after their fences, so a listing from a seq reads the log's directory of
 *   shards and the shards from that seq on, not the history. `@` never occurs in a key, so a shard
 *   is never taken for a key's directory. The delete that empties a shard removes it (dirs.ts), so
 *   that a stream whose old seqs retention deletes keeps a few shards, not one per 256 seqs.
 *
 * The layout is recorded once, in `<dir>/@layout` (not a valid key, so never listed), written
 * create-if-absent before the first object of an empty store. A directory that holds objects and no
 * marker is flat and stays flat; one whose marker names a layout this version does not know is refused.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';

export type Layout = 'flat' | 'sharded';

/** The marker file, at the top of the store's directory. */
export const LAYOUT_FILE = '@layout';
const SHARDED = 'statefold file layout: sharded 1\n';
/** Last segments this long or longer are sharded; their first SHARD_CHARS name the shard. */
const SHARD_FROM = 16;
const SHARD_CHARS = 14;
/** Ends every shard directory's name. */
const SHARD_MARK = '@';

/** The shard directory a last segment goes into in the sharded layout, or undefined when it is not sharded. */
export function shardOf(name: string): string | undefined {
  return name.length >= SHARD_FROM ? `${name.slice(0, SHARD_CHARS)}${SHARD_MARK}` : undefined;
}

/** Whether a directory entry is a shard (its files are keys of the directory above it). */
export function isShard(name: string): boolean {
  return name.endsWith(SHARD_MARK);
}

/** The key prefix every key in a shard starts with. */
export function shardPrefix(dirKey: string, shard: string): string {
  const head = shard.slice(0, -SHARD_MARK.length);
  return dirKey === '' ? head : `${dirKey}/${head}`;
}

/**
 * The layout of `dir`: from its marker; `flat` when it holds objects and no marker; undefined when
 * it is missing or holds nothing yet (the first write decides).
 */
export async function readLayout(dir: string): Promise<Layout | undefined> {
  // Bounded: a marker seen in the listing but not yet readable is read again, at most three times.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const text = await fs.readFile(path.join(dir, LAYOUT_FILE), 'utf8');
      if (text === SHARDED) return 'sharded';
      throw new Error(
        `${path.join(dir, LAYOUT_FILE)} names a layout this version of statefold does not know (${JSON.stringify(text.slice(0, 60))})`,
      );
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    let entries: string[];
    try {
      entries = await fs.readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    if (entries.includes(LAYOUT_FILE)) continue;
    // Temp files (a write in progress or crashed) are not objects.
    return entries.some((e) => !e.includes('#')) ? 'flat' : undefined;
  }
  throw new Error(`${path.join(dir, LAYOUT_FILE)} is listed but cannot be read`);
}

/**
 * Records the sharded layout in an empty `dir` (create-if-absent, as objects are: temp file, then
 * link), or finds what another writer recorded first. `syncDirs` makes the marker and the
 * directories durable.
 */
export async function createLayout(
  dir: string,
  fsync: boolean,
  ensureDir: (dir: string) => Promise<void>,
  syncDir: (dir: string) => Promise<void>,
): Promise<Layout> {
  await ensureDir(dir);
  const marker = path.join(dir, LAYOUT_FILE);
  const temp = `${marker}#${randomBytes(6).toString('hex')}.tmp`;
  try {
    await fs.writeFile(temp, SHARDED, { flag: 'wx' });
    if (fsync) {
      const handle = await fs.open(temp, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
    // Whoever links first decides; when objects were written flat meanwhile, readLayout still says so.
    const layout = await readLayout(dir);
    if (layout !== undefined) return layout;
    try {
      await fs.link(temp, marker);
      if (fsync) await syncDir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  } finally {
    await fs.rm(temp, { force: true }).catch(() => undefined);
  }
  const layout = await readLayout(dir);
  if (layout === undefined) throw new Error(`${marker} was written but is not there`);
  return layout;
}
