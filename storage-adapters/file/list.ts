/**
 * How FileStore lists keys: it walks only the deepest directory a prefix names (its last partial
 * segment filters names), in key order, reads a directory's shards only from `startAfter` on, and
 * stops once a page of `limit` keys is sure.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { isValidKey } from '../kit/index.js';
import { isShard, shardPrefix } from './layout.js';

/**
 * Lists the keys under `prefix` in the store at `root` that sort after `after`, unsorted; with
 * `limit`, at least the first `limit` of them (some after those may be left out). A prefix that
 * runs through an object has none; a `root` that is not a directory rejects.
 */
export async function listKeys(root: string, prefix: string, after?: string, limit?: number): Promise<string[]> {
  const slash = prefix.lastIndexOf('/');
  const keys: string[] = [];
  await walk(root, slash < 0 ? '' : prefix.slice(0, slash), prefix, keys, after, limit);
  return keys;
}

async function walk(
  root: string,
  dirKey: string,
  prefix: string,
  out: string[],
  after?: string,
  limit?: number,
): Promise<void> {
  const dir = dirKey === '' ? root : path.join(root, ...dirKey.split('/'));
  let entries;
  try {
    entries = await fs.readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (isMissing(err)) return;
    // A prefix that runs through an object's file has nothing under it; but when the store's
    // own dir is not a directory, listing it failed and must not look empty.
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR' && dirKey !== '' && (await isDirectory(root))) return;
    throw err;
  }
  const shards: string[] = [];
  // In key order (a directory's keys sort as its name and '/'), so that a page can stop early:
  // every key of a later entry sorts after every key already collected.
  const ordered = entries
    .map((entry) => ({ entry, order: entry.isDirectory() && !isShard(entry.name) ? `${entry.name}/` : entry.name }))
    .sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
  for (const { entry } of ordered) {
    if (limit !== undefined && shards.length === 0 && out.length >= limit) break;
    const key = dirKey === '' ? entry.name : `${dirKey}/${entry.name}`;
    if (entry.isDirectory()) {
      if (isShard(entry.name)) {
        shards.push(entry.name);
        continue;
      }
      // Descend only where keys below could start with the prefix, and not where every key sorts at or before `after`.
      const asDir = `${key}/`;
      if (after !== undefined && asDir < after && !after.startsWith(asDir)) continue;
      if (asDir.startsWith(prefix) || prefix.startsWith(asDir)) await walk(root, key, prefix, out, after, limit);
    } else if (entry.isFile() && key.startsWith(prefix) && isValidKey(key) && (after === undefined || key > after)) {
      out.push(key);
    }
  }
  if (shards.length > 0) await walkShards(dir, dirKey, shards.sort(), prefix, out, after, limit);
}

/**
 * The keys in a directory's shards, in order: a shard whose keys all sort at or before `after`
 * is not read, and once `limit` keys after `after` sort before the next shard, the rest are not.
 */
async function walkShards(
  dir: string,
  dirKey: string,
  shards: string[],
  prefix: string,
  out: string[],
  after?: string,
  limit?: number,
): Promise<void> {
  for (let i = 0; i < shards.length; i++) {
    const head = shardPrefix(dirKey, shards[i]!);
    if (!head.startsWith(prefix) && !prefix.startsWith(head)) continue;
    if (after !== undefined && head < after && !after.startsWith(head)) continue;
    let names: string[];
    try {
      names = await fs.readdir(path.join(dir, shards[i]!));
    } catch (err) {
      if (isMissing(err)) continue;
      throw err;
    }
    for (const name of names) {
      const key = dirKey === '' ? name : `${dirKey}/${name}`;
      if (key.startsWith(prefix) && isValidKey(key) && (after === undefined || key > after)) out.push(key);
    }
    const next = shards[i + 1];
    if (limit !== undefined && next !== undefined) {
      const bound = shardPrefix(dirKey, next);
      if (out.filter((k) => k < bound && (after === undefined || k > after)).length >= limit) return;
    }
  }
}

async function isDirectory(dir: string): Promise<boolean> {
  return fs.stat(dir).then(
    (stat) => stat.isDirectory(),
    () => false,
  );
}

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}
