/**
 * FileStore's directories: made on first write, and durable before any object linked into them
 * counts as created (a new directory's entry lives in its parent, which needs its own fsync);
 * shard directories are removed again when a delete empties them.
 */
import { promises as fs, constants as fsConstants } from 'node:fs';
import * as path from 'node:path';

/**
 * The directories under one store's root that this process has made or found. Each directory is
 * made once, level by level, and every caller waits for the same attempt: the one that lost a
 * `mkdir` race used to go on before the winner's fsync of the parent, so an object linked into
 * the new directory could resolve created while the directory itself was not yet durable.
 */
export class Dirs {
  readonly #root: string;
  readonly #fsync: boolean;
  readonly #known = new Set<string>();
  readonly #making = new Map<string, Promise<void>>();
  /** Directories this store made whose fsyncs failed, with what is still to be made durable. */
  readonly #unsynced = new Map<string, () => Promise<void>>();
  readonly #sync: (dir: string) => Promise<void>;

  /** `sync` fsyncs a directory (tests pass one that records its calls). */
  constructor(root: string, fsync: boolean, sync: (dir: string) => Promise<void> = syncDir) {
    this.#root = root;
    this.#fsync = fsync;
    this.#sync = sync;
  }

  /** Makes `dir` (the root or a directory under it) and its parents, durably when fsync is on. */
  ensure(dir: string): Promise<void> {
    if (this.#known.has(dir)) return Promise.resolve();
    let making = this.#making.get(dir);
    if (making === undefined) {
      const root = dir === this.#root || !dir.startsWith(this.#root + path.sep);
      making = this.#unsynced.has(dir) ? this.#resync(dir, root) : root ? this.#makeRoot(dir) : this.#make(dir);
      this.#making.set(dir, making);
      const settled = (): void => void this.#making.delete(dir);
      making.then(() => {
        this.#known.add(dir);
        settled();
      }, settled);
    }
    return making;
  }

  /**
   * What a create into `dir` waits for first: undefined when it may go ahead at once, because
   * `dir` is known, or because this store is making neither it nor a parent (so it was made
   * before, by a store that made it durable as this one does, or it is missing and the create's
   * open fails ENOENT, after which the caller makes it with `ensure`). A process that opens
   * existing streams then costs no `mkdir` per directory, each failing EEXIST.
   */
  before(dir: string): Promise<void> | undefined {
    if (this.#known.has(dir) || !this.#inFlight(dir)) return undefined;
    return this.ensure(dir);
  }

  /**
   * A create into `dir` succeeded without `ensure` (see `before`): it is known from now on. But
   * when this store started making `dir` or a parent meanwhile (another create found it missing,
   * made it, and is fsyncing its parent), the create may have linked into the new directory
   * before that fsync: it waits for the same attempt before it counts as created.
   */
  found(dir: string): Promise<void> | undefined {
    if (this.#known.has(dir)) return undefined;
    if (this.#inFlight(dir)) return this.ensure(dir);
    this.#known.add(dir);
    return undefined;
  }

  /** Whether this store is making `dir` or a directory above it under its root. */
  #inFlight(dir: string): boolean {
    if (this.#making.size === 0 && this.#unsynced.size === 0) return false;
    for (let d = dir; d.length >= this.#root.length; d = path.dirname(d)) {
      if (this.#making.has(d) || this.#unsynced.has(d)) return true;
      if (d === this.#root) break;
    }
    return false;
  }

  /**
   * Forgets `dir` and its parents up to the root: they were removed behind our back. Nothing to
   * forget when `dir` was not known (a create found it missing: `ensure` makes what is missing).
   */
  forget(dir: string): void {
    if (!this.#known.has(dir)) return;
    for (let d = dir; d.length >= this.#root.length; d = path.dirname(d)) {
      this.#known.delete(d);
      if (d === this.#root) break;
    }
  }

  /**
   * Forgets `dir` alone: this process removed it (an emptied shard, see `Shards`). Its parents are
   * still there, and a fsync still owed for it is owed by no object any more.
   */
  removed(dir: string): void {
    this.#known.delete(dir);
    this.#unsynced.delete(dir);
  }

  /** One level under a directory made first; fsyncs the parent when this call made it. */
  async #make(dir: string): Promise<void> {
    const parent = path.dirname(dir);
    for (let attempt = 0; ; attempt++) {
      await this.ensure(parent);
      try {
        await fs.mkdir(dir);
        break;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EEXIST') return;
        if (code !== 'ENOENT' || attempt > 0) throw err;
        // The parent was removed behind our back (another process cleaned up): make it again.
        this.forget(parent);
      }
    }
    await this.#syncMade(dir, () => this.#sync(parent));
  }

  /** The root, with whatever it needs above it (outside the store: made as `mkdir -p` would). */
  async #makeRoot(dir: string): Promise<void> {
    const created = await fs.mkdir(dir, { recursive: true });
    if (created === undefined) return;
    await this.#syncMade(dir, async () => {
      for (let d = dir; d.length >= created.length; d = path.dirname(d)) await this.#sync(path.dirname(d));
    });
  }

  /**
   * Makes a directory this store just made durable. Should that fail, the directory exists but its
   * entry may not be durable: it is kept apart, so that the next `ensure` (and any create that
   * found it) runs the fsyncs again instead of taking it for one made before (EEXIST).
   */
  async #syncMade(dir: string, sync: () => Promise<void>): Promise<void> {
    if (!this.#fsync) return;
    try {
      await sync();
    } catch (err) {
      this.#unsynced.set(dir, sync);
      throw err;
    }
  }

  /** The fsyncs of a directory made earlier whose fsyncs failed, after those of its parents. */
  async #resync(dir: string, root: boolean): Promise<void> {
    if (!root) await this.ensure(path.dirname(dir));
    await this.#unsynced.get(dir)!();
    this.#unsynced.delete(dir);
  }
}

/**
 * The shard directories that this process's creates are writing into, and the deletes that may
 * remove them. A delete that empties a shard removes it (rmdir, which refuses a directory that is
 * not empty), but only when no create of this process was writing there as it started. A create's
 * temp file sits in its shard from its open to after its link, so a shard can vanish under a
 * create only before that open: the create then waits for the deletes that may remove the shard
 * to be over, makes it again and opens again, and no delete of the process removes it meanwhile.
 * Only another process's delete can (see FileStore). Without this, a stream kept to its last 10
 * checkpoints left an empty shard per 256 seqs under each of its log, floors and hints (700 after
 * 60,000 checkpoints), and every listing of floors or hints read all of them.
 */
export class Shards {
  /** How many creates are writing into each directory. */
  readonly #writing = new Map<string, number>();
  /** The deletes in each directory that may remove it, until they settle. */
  readonly #removing = new Map<string, Set<Promise<void>>>();

  /** A create into `dir` starts; `leave` must follow, whatever it comes to. */
  enter(dir: string): void {
    this.#writing.set(dir, (this.#writing.get(dir) ?? 0) + 1);
  }

  /** A create into `dir` is over. */
  leave(dir: string): void {
    const n = this.#writing.get(dir)! - 1;
    if (n === 0) this.#writing.delete(dir);
    else this.#writing.set(dir, n);
  }

  /**
   * Runs a delete in `dir`: `run(true)`, allowed to remove `dir` should it leave it empty, when no
   * create of this process writes into it, else `run(false)`.
   */
  delete<T>(dir: string, run: (mayRemove: boolean) => Promise<T>): Promise<T> {
    if (this.#writing.has(dir)) return run(false);
    const deleting = run(true);
    let set = this.#removing.get(dir);
    if (set === undefined) this.#removing.set(dir, (set = new Set()));
    const settled = deleting.then(
      () => undefined,
      () => undefined,
    );
    set.add(settled);
    void settled.then(() => {
      set.delete(settled);
      if (set.size === 0) this.#removing.delete(dir);
    });
    return deleting;
  }

  /** Resolves once the deletes that may remove `dir`, started so far, are over. */
  async removals(dir: string): Promise<void> {
    const set = this.#removing.get(dir);
    if (set !== undefined) await Promise.all(set);
  }
}

/** The shard directories of every FileStore of this process (two stores may share a directory). */
export const shards = new Shards();

/** Fsyncs a directory, so that the entries made in it are durable. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, fsConstants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Makes an unlink in `dir` durable: fsyncs `dir`, or its parent when `dir` is gone (`removed`
 * by the same delete, or by another process's since): then its removal is what must be durable.
 */
export async function syncUnlinked(dir: string, removed: boolean): Promise<void> {
  if (!removed) {
    try {
      return await syncDir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  await syncDir(path.dirname(dir));
}
