import { promises as fs, constants as fsConstants } from 'node:fs';
import * as path from 'node:path';
import type { ListOptions, Store, StoreOptions } from '../store.js';
import { StatefoldError, describeValue } from '../errors.js';
import { abortedError, assertKey, assertPrefix, isValidKey, storageError, throwIfAborted } from '../kit/index.js';
import { removeTemps, tempOf } from './temps.js';
import { createLayout, isShard, readLayout, shardOf, type Layout } from './layout.js';
import { listKeys } from './list.js';
import { DEFAULT_IO_THREADS, IoThreadUnavailable, ioPool } from './io-pool.js';
import { Dirs, shards, syncDir, syncUnlinked } from './dirs.js';

/**
 * How many times a create makes its directory again when the open of its temp file finds it
 * missing: once for a new directory, and once more each time another process removed it (an
 * emptied shard) between the `mkdir` and the open.
 */
const MAKE_ATTEMPTS = 8;

/** Options of `new FileStore(...)`. */
export interface FileStoreOptions {
  /** The directory that holds the objects; created on first write. */
  dir: string;
  /**
   * Whether writes are fsynced (file, then directory) before they resolve. Default `true`: a
   * checkpoint that resolved survives a power loss. `false` survives a process crash only.
   */
  fsync?: boolean;
  /**
   * Most threads that read and write objects at once: worker threads that make blocking calls
   * (fsync included), shared by every FileStore of the process. None starts until more than four
   * writes are in flight at once (one agent's calls never start one, so a fresh process resumes
   * without waiting for threads); then one at a time as calls in flight need them (the process
   * keeps at most the largest number any FileStore asked for). Reads use threads already running.
   * Default 16. More threads keep more fsyncs in flight, which the filesystem commits together,
   * and each call costs the main thread one message instead of a callback per system call. `0`:
   * reads and writes go through Node's own fs, on its thread pool (4 threads unless
   * UV_THREADPOOL_SIZE says otherwise).
   */
  ioThreads?: number;
}

/**
 * A store on the local filesystem, the embedded default: one file per object, at
 * `<dir>/<key>`, long last segments in shard directories (see layout.ts). Creation is atomic and create-if-absent across processes: the body goes to a temp
 * file, which is fsynced and then hard-linked to its final name (link fails if the name exists),
 * and the directory is fsynced. Needs a filesystem with hard links (any local POSIX filesystem).
 * A key cannot also be the directory of another key (`a` and `a/b`); statefold's keys never are.
 */
export class FileStore implements Store {
  readonly dir: string;
  readonly #fsync: boolean;
  readonly #ioThreads: number;
  readonly #dirs: Dirs;
  /** The directory's layout once known for good (a marker, or objects without one). */
  #layout: Layout | undefined;

  constructor(options: FileStoreOptions) {
    if (options === null || typeof options !== 'object' || typeof options.dir !== 'string' || options.dir === '') {
      throw new StatefoldError('INVALID_ARGUMENT', 'new FileStore: options.dir must be a non-empty path');
    }
    this.dir = path.resolve(options.dir);
    this.#fsync = options.fsync ?? true;
    const threads = options.ioThreads ?? DEFAULT_IO_THREADS;
    if (!Number.isSafeInteger(threads) || threads < 0) {
      throw new StatefoldError(
        'INVALID_ARGUMENT',
        `new FileStore: options.ioThreads must be a whole number of threads, 0 or more (got ${describeValue(threads)})`,
      );
    }
    this.#ioThreads = threads;
    this.#dirs = new Dirs(this.dir, this.#fsync);
  }

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    assertKey('get', key);
    throwIfAborted('get', key, options?.signal);
    try {
      const file = this.#path(key, await this.#layoutOf(false));
      if (ioPool.route('read', this.#ioThreads)) {
        try {
          const body = await ioPool.read(file, this.#ioThreads);
          // A read handed to a thread runs to its end; an abort meanwhile still fails the call.
          throwIfAborted('get', key, options?.signal);
          return body;
        } catch (err) {
          if (!(err instanceof IoThreadUnavailable)) throw err;
        }
      }
      return await fs.readFile(file, options?.signal ? { signal: options.signal } : undefined);
    } catch (err) {
      if (isMissing(err)) return undefined;
      if (options?.signal?.aborted) throw abortedError('get', key, options.signal.reason);
      throw storageError('get', key, err);
    }
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    assertKey('putIfAbsent', key);
    throwIfAborted('putIfAbsent', key, options?.signal);
    try {
      const file = this.#path(key, await this.#layoutOf(true));
      const dir = path.dirname(file);
      // Only shards are ever removed (when emptied, see delete): no other create needs to be known.
      const shard = this.#isShard(dir);
      if (shard) shards.enter(dir);
      try {
        if (ioPool.route('write', this.#ioThreads)) {
          const created = await this.#createOnThread(file, dir, body);
          if (created !== undefined) return created;
        }
        return await ioPool.here(() => this.#createHere(file, dir, key, body, options));
      } finally {
        if (shard) shards.leave(dir);
      }
    } catch (err) {
      throw storageError('putIfAbsent', key, err);
    }
  }

  /**
   * Creates the object on an I/O thread (io-pool.ts), as #createHere would; undefined when no
   * thread could run it. Once the write is handed over, an abort no longer stops it.
   */
  async #createOnThread(file: string, dir: string, body: Uint8Array): Promise<boolean | undefined> {
    const waiting = this.#dirs.before(dir);
    if (waiting !== undefined) await waiting;
    for (let attempt = 0; ; attempt++) {
      try {
        // The thread removes its temp file itself, whatever happens.
        const created = await ioPool.create(
          { temp: tempOf(file), file, dir, body, fsync: this.#fsync },
          this.#ioThreads,
        );
        await this.#dirs.found(dir);
        return created;
      } catch (err) {
        if (err instanceof IoThreadUnavailable) return undefined;
        // Only a temp file that could not be opened is retried: a link that fails ENOENT means
        // the temp file was removed (a stream being deleted), and must not recreate the key there.
        if (!isMissing(err) || !(err as { atOpen?: boolean }).atOpen || attempt + 1 >= MAKE_ATTEMPTS) throw err;
        await this.#remake(dir);
      }
    }
  }

  /** Creates the object with Node's fs, on its thread pool: temp file, fsync, link, directory fsync. */
  async #createHere(
    file: string,
    dir: string,
    key: string,
    body: Uint8Array,
    options?: StoreOptions,
  ): Promise<boolean> {
    const temp = tempOf(file);
    try {
      const handle = await this.#openTemp(dir, temp);
      try {
        await handle.writeFile(body);
        if (this.#fsync) await handle.sync();
      } finally {
        await handle.close();
      }
      throwIfAborted('putIfAbsent', key, options?.signal);
      // Before the link: the directory is durable before the object is in it (see Dirs.found).
      await this.#dirs.found(dir);
      try {
        // link(2) refuses an existing name: this is the atomic create-if-absent.
        await fs.link(temp, file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
        throw err;
      }
      if (this.#fsync) await syncDir(dir);
      return true;
    } finally {
      await fs.rm(temp, { force: true }).catch(() => undefined);
    }
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    assertPrefix(prefix, options?.limit);
    throwIfAborted('list', prefix, options?.signal);
    const after = options?.startAfter;
    let keys: string[];
    try {
      keys = await listKeys(this.dir, prefix, after, options?.limit);
    } catch (err) {
      throw storageError('list', prefix, err);
    }
    const out = (after === undefined ? keys : keys.filter((k) => k > after)).sort();
    return options?.limit !== undefined && out.length > options.limit ? out.slice(0, options.limit) : out;
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    assertKey('delete', key);
    throwIfAborted('delete', key, options?.signal);
    try {
      const file = this.#path(key, await this.#layoutOf(false));
      const dir = path.dirname(file);
      // A shard that deletes empty (retention's, below a stream's floor, where nothing is written
      // again) would stay for ever, and every listing of its directory would read it: the delete
      // that empties it removes it, unless a create of this process is writing there.
      if (!this.#isShard(dir)) await this.#unlink(file, dir, false);
      else
        await shards.delete(dir, async (mayRemove) => {
          if (await this.#unlink(file, dir, mayRemove)) this.#dirs.removed(dir);
        });
    } catch (err) {
      if (isMissing(err)) return;
      throw storageError('delete', key, err);
    }
  }

  /**
   * Unlinks an object's file and, with `removeDir`, its directory should that leave it empty, and
   * makes that durable; resolves whether the directory was removed.
   */
  async #unlink(file: string, dir: string, removeDir: boolean): Promise<boolean> {
    if (ioPool.route('write', this.#ioThreads)) {
      try {
        return await ioPool.delete({ file, dir, removeDir, fsync: this.#fsync }, this.#ioThreads);
      } catch (err) {
        if (!(err instanceof IoThreadUnavailable)) throw err;
      }
    }
    return ioPool.here(async () => {
      await fs.unlink(file);
      // rmdir refuses a directory that is not empty: that is the check.
      const removed =
        removeDir &&
        (await fs.rmdir(dir).then(
          () => true,
          () => false,
        ));
      if (this.#fsync) await syncUnlinked(dir, removed);
      return removed;
    });
  }

  /**
   * Removes the temp files and empty directories under `prefix` (a stream whose keys were all
   * deleted: deleteStream). Files that are keys are never touched.
   */
  async removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    throwIfAborted('removeLeftovers', prefix, options?.signal);
    const root = path.join(this.dir, ...prefix.split('/').filter((s) => s !== ''));
    if (path.relative(this.dir, root).startsWith('..') || root === this.dir)
      throw storageError('removeLeftovers', prefix, new Error('prefix must name a directory inside the store'));
    await removeTemps(root, 'removeLeftovers', undefined, true);
  }

  /**
   * Removes temp files left by writes that crashed mid-way (older than `olderThanMs`, default one
   * hour, so that writes in progress in other processes are not disturbed). Resolves how many it removed.
   */
  async sweepTempFiles(olderThanMs = 3_600_000): Promise<number> {
    return removeTemps(this.dir, 'sweep', Date.now() - olderThanMs, false);
  }

  /** The file of `key` (or, without a layout, of a directory key) under this store's directory. */
  #path(key: string, layout: Layout = 'flat'): string {
    const segments = key.split('/');
    const last = segments[segments.length - 1]!;
    const shard = layout === 'sharded' ? shardOf(last) : undefined;
    return shard === undefined
      ? path.join(this.dir, ...segments)
      : path.join(this.dir, ...segments.slice(0, -1), shard, last);
  }

  /** Whether `dir`, an object's directory, is a shard (`@` never occurs in a key, but may in `dir`). */
  #isShard(dir: string): boolean {
    return dir !== this.dir && isShard(path.basename(dir));
  }

  /**
   * The layout objects are read and written in. An empty store is sharded; its first write records
   * that (reads do not write: until then they find nothing either way).
   */
  async #layoutOf(write: boolean): Promise<Layout> {
    if (this.#layout !== undefined) return this.#layout;
    let layout = await readLayout(this.dir);
    if (layout === undefined) {
      if (!write) return 'sharded';
      layout = await createLayout(this.dir, this.#fsync, (d) => this.#dirs.ensure(d), syncDir);
    }
    this.#layout = layout;
    return layout;
  }

  async #openTemp(dir: string, temp: string): Promise<fs.FileHandle> {
    const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL;
    const waiting = this.#dirs.before(dir);
    if (waiting !== undefined) await waiting;
    for (let attempt = 0; ; attempt++) {
      try {
        return await fs.open(temp, flags, 0o644);
      } catch (err) {
        if (!isMissing(err) || attempt + 1 >= MAKE_ATTEMPTS) throw err;
        await this.#remake(dir);
      }
    }
  }

  /**
   * Makes `dir` again, for a create whose temp file it was missing for: it is new, or was removed
   * by another process, or by a delete of this one that started before the create (waited for:
   * none starts while the create runs, see Shards).
   */
  async #remake(dir: string): Promise<void> {
    await shards.removals(dir);
    this.#dirs.forget(dir);
    await this.#dirs.ensure(dir);
  }
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT';
}
