import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import {
  MemorySaver,
  uuid6,
  type BaseCheckpointSaver,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
} from '@langchain/langgraph-checkpoint';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryStore, type Store } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { SqliteStore } from 'statefold/sqlite';
import { HookStore } from '../support/hook-store.js';
import { mulberry32 } from '../support/prng.mjs';

/**
 * How a NEW saver (nothing cached) finds a checkpoint by id, against LangGraph's MemorySaver as the
 * reference: seeded random histories (new checkpoints, writes to the newest and to older ones,
 * forks from old ids, re-puts of an id, deleteThread and the thread put again, a second thread and
 * a second namespace interleaved) go to both savers through the BaseCheckpointSaver API; then every
 * id ever put (and ids never put, between real ones) is read from a fresh StatefoldSaver and must
 * equal MemorySaver's answer. Bases come often (small `baseEvery`), so a lookup crosses chains.
 * Only public behaviour is stated: the lookup's implementation (today a search over metas, next an
 * index, docs/design/checkpoint-index.md) may change under it. Seed: STATEFOLD_TEST_SEED (default 1).
 *
 * Where docs/langgraph.md says StatefoldSaver differs from MemorySaver, the test follows the doc:
 * - a channel left out of `newVersions` keeps its parent's stored value (as PostgresSaver does),
 *   where MemorySaver stores what it is given: the histories give the parent's value, so both agree;
 * - pending writes come in the order LangGraph applies them: compared as a multiset;
 * - with retention, a deleted checkpoint reads as absent, which MemorySaver never deletes.
 * Writes to an id never put are not made: StatefoldSaver keeps them only until a larger id is put.
 */
const SEED = Number(process.env.STATEFOLD_TEST_SEED ?? 1);
/** Runs per property (STATEFOLD_LOCATE_RUNS); a failure's shrinking stops after a minute, reporting what it has. */
const RUNS = { numRuns: Number(process.env.STATEFOLD_LOCATE_RUNS ?? 40), interruptAfterTimeLimit: 60_000 };

/** The (thread_id, checkpoint_ns) pairs a history writes to. */
const STREAMS = [
  ['t0', ''],
  ['t0', 'sub'],
  ['t1', ''],
  ['t1', 'sub'],
] as const;
const THREADS = ['t0', 't1'] as const;

interface WriteSpec {
  task: number;
  channels: string[];
  path: string;
}

/**
 * One operation; `at` is an index into STREAMS, `target` picks an existing checkpoint of that
 * stream counted back from its newest (0 is the newest), resolved when the history runs.
 */
type Op =
  | { kind: 'put'; at: number; keepNote: boolean; writes: WriteSpec | null }
  | { kind: 'writes'; at: number; target: number; writes: WriteSpec }
  | { kind: 'fork'; at: number; target: number; keepNote: boolean }
  | { kind: 'reput'; at: number; target: number; keepNote: boolean }
  | { kind: 'delete'; thread: number }
  | { kind: 'ghost' };

const at = fc.constantFrom(0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 3);
const target = fc.nat({ max: 40 });
const writeSpec: fc.Arbitrary<WriteSpec> = fc.record({
  task: fc.nat({ max: 2 }),
  // (Unique: a special channel twice in one call would leave MemorySaver's answer to promise order.)
  channels: fc.uniqueArray(fc.constantFrom('messages', 'note', '__error__', '__interrupt__'), {
    minLength: 1,
    maxLength: 3,
  }),
  path: fc.constantFrom('', '', 'sub|1'),
});
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 24,
    arbitrary: fc.record({
      kind: fc.constant('put' as const),
      at,
      keepNote: fc.boolean(),
      writes: fc.option(writeSpec, { freq: 3 }),
    }),
  },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('writes' as const), at, target, writes: writeSpec }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('fork' as const), at, target, keepNote: fc.boolean() }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('reput' as const), at, target, keepNote: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), thread: fc.constantFrom(0, 1, 1, 1) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('ghost' as const) }) },
);
// Mostly puts on one stream, deletes rare and mostly of t1: t0's '' stream reaches ~40 checkpoints
// in one life, many chains at baseEvery 2 to 8. (minLength 1, so that a failure shrinks to its core.)
const history = fc.array(op, { minLength: 1, maxLength: 80, size: 'max' });

/** A checkpoint as the model keeps it: what was put last under its id. */
interface Cp {
  id: string;
  parent: string | undefined;
  step: number;
  messages: string[];
  note: string;
  versions: { messages: number; step: number; note: number };
}

interface Options {
  baseEvery: number;
  /** `retention: { keepLast }` on the writing saver. */
  keepLast?: number;
  /** Index writes fail at random, and garbage index objects are written before each read. */
  lossy?: boolean;
  /** Seed of the random choices made while the history runs (failed index writes, garbage names). */
  seed: number;
}

/** One history applied to a StatefoldSaver and to MemorySaver, and the reads that compare them. */
class Run {
  readonly oracle = new MemorySaver();
  writer: StatefoldSaver;
  /** Per stream, the checkpoints of its current life (deleteThread empties it). */
  readonly live = STREAMS.map(() => new Map<string, Cp>());
  /** Per stream, every id ever put there (deleted ones too). */
  readonly ever = STREAMS.map(() => new Set<string>());
  /** Ids never put, drawn between real ones. */
  readonly ghosts: string[] = [];
  readonly random: () => number;
  #n = 0;

  constructor(
    /** What the writer and the readers use (the lossy wrapper, when `lossy`). */
    readonly store: Store,
    /** The store under it, where garbage is written. */
    readonly inner: Store,
    readonly options: Options,
  ) {
    this.random = mulberry32(options.seed);
    this.writer = this.#newWriter();
  }

  #newWriter(): StatefoldSaver {
    const { baseEvery, keepLast } = this.options;
    return new StatefoldSaver({
      store: this.store,
      policy: { baseEvery },
      ...(keepLast === undefined ? {} : { retention: { keepLast, minAgeMs: 0 } }),
    });
  }

  /** Closes the writer (its background hints and gc settle) and goes on with a new one, as after a restart. */
  async restart(): Promise<void> {
    await this.writer.close();
    this.writer = this.#newWriter();
  }

  /** The checkpoint of stream `s` that `target` picks, counted back from the largest id; undefined when empty. */
  pick(s: number, back: number): Cp | undefined {
    const ids = [...this.live[s]!.keys()].sort();
    if (ids.length === 0) return undefined;
    return this.live[s]!.get(ids[ids.length - 1 - (back % ids.length)]!);
  }

  newest(s: number): Cp | undefined {
    return this.pick(s, 0);
  }

  /** A checkpoint (as LangGraph would put it) that follows `parent`; `note` unchanged keeps the parent's value and version. */
  child(id: string, parent: Cp | undefined, keepNote: boolean) {
    const n = ++this.#n;
    const keep = keepNote && parent !== undefined;
    const versions = {
      messages: (parent?.versions.messages ?? 0) + 1,
      step: (parent?.versions.step ?? 0) + 1,
      note: keep ? parent.versions.note : (parent?.versions.note ?? 0) + 1,
    };
    const cp: Cp = {
      id,
      parent: parent?.id,
      step: (parent?.step ?? -1) + 1,
      messages: [...(parent?.messages ?? []), `message ${n} `.repeat(1 + (n % 4))],
      note: keep ? parent.note : `note ${n}`,
      versions,
    };
    // Channels not in newVersions keep what the parent stored for their version (LangGraph's savers
    // store each changed channel only); the value given is the parent's too, so MemorySaver, which
    // stores what it is given, holds the same.
    const newVersions: Record<string, number> = { messages: versions.messages, step: versions.step };
    if (!keep) newVersions.note = versions.note;
    const checkpoint: Checkpoint = {
      v: 4,
      id,
      ts: new Date(1_700_000_000_000 + n).toISOString(),
      channel_values: { messages: cp.messages, step: cp.step, note: cp.note },
      channel_versions: { ...versions },
      versions_seen: { node: { step: versions.step - 1 } },
    };
    return { cp, checkpoint, newVersions };
  }

  config(s: number, id?: string) {
    const [thread_id, checkpoint_ns] = STREAMS[s]!;
    return { configurable: { thread_id, checkpoint_ns, ...(id === undefined ? {} : { checkpoint_id: id }) } };
  }

  pendingWrites(spec: WriteSpec): PendingWrite[] {
    return spec.channels.map((channel) => [channel, `${channel} write ${++this.#n}`]);
  }

  /** Puts `cp` under its id on stream `s` in both savers, with `parent` named in the config. */
  async put(s: number, made: ReturnType<Run['child']>, md: CheckpointMetadata, writes?: WriteSpec) {
    const { cp, checkpoint, newVersions } = made;
    const config = this.config(s, cp.parent);
    const pending = writes === undefined ? undefined : this.pendingWrites(writes);
    for (const saver of [this.oracle, this.writer] as BaseCheckpointSaver[]) {
      // A step as LangGraph runs it: the tasks' writes to the parent, and the put of the next
      // checkpoint called right after them, before they resolve (one commit in StatefoldSaver).
      const wrote = pending && saver.putWrites(config, pending, `task-${writes!.task}`, writes!.path);
      const put = saver.put(config, structuredClone(checkpoint), md, newVersions);
      await Promise.all([wrote, put]);
    }
    this.live[s]!.set(cp.id, cp);
    this.ever[s]!.add(cp.id);
  }

  async apply(o: Op): Promise<void> {
    switch (o.kind) {
      case 'put': {
        const parent = this.newest(o.at);
        const made = this.child(uuid6(this.#n % 1000), parent, o.keepNote);
        const md = { source: 'loop' as const, step: made.cp.step, parents: {} };
        await this.put(o.at, made, md, parent === undefined || o.writes === null ? undefined : o.writes);
        return;
      }
      case 'fork': {
        // LangGraph's "resume from an old checkpoint": a new id whose parent is an older one.
        const parent = this.pick(o.at, o.target);
        if (parent === undefined) return;
        const made = this.child(uuid6(this.#n % 1000), parent, o.keepNote);
        await this.put(o.at, made, { source: 'fork' as const, step: made.cp.step, parents: {} });
        return;
      }
      case 'reput': {
        // The same id put again (new values, new metadata): a re-commit.
        const old = this.pick(o.at, o.target);
        if (old === undefined) return;
        if (this.options.keepLast !== undefined && !(await this.#retained(o.at, old.id))) return;
        const parent = old.parent === undefined ? undefined : this.live[o.at]!.get(old.parent);
        const made = this.child(old.id, parent, o.keepNote);
        await this.put(o.at, made, {
          source: 'update' as const,
          step: made.cp.step,
          parents: { again: String(this.#n) },
        });
        return;
      }
      case 'writes': {
        const cp = this.pick(o.at, o.target);
        if (cp === undefined) return;
        const config = this.config(o.at, cp.id);
        const writes = this.pendingWrites(o.writes);
        for (const saver of [this.oracle, this.writer])
          await saver.putWrites(config, writes, `task-${o.writes.task}`, o.writes.path);
        return;
      }
      case 'delete': {
        const thread = THREADS[o.thread]!;
        await this.oracle.deleteThread(thread);
        await this.writer.deleteThread(thread);
        for (const [s, [t]] of STREAMS.entries()) if (t === thread) this.live[s]!.clear();
        return;
      }
      case 'ghost':
        this.ghosts.push(uuid6(999));
        return;
    }
  }

  /**
   * Whether `id` is still stored on stream `s` with retention on. A re-put of an id that retention
   * deleted puts it anew, without the writes it had (they went with it), where MemorySaver keeps
   * them: such re-puts are left out. The writer is closed first, so that no gc runs between the
   * look and the re-put.
   */
  async #retained(s: number, id: string): Promise<boolean> {
    await this.restart();
    return (await new StatefoldSaver({ store: this.store }).getTuple(this.config(s, id))) !== undefined;
  }

  /** The ids read on stream `s`: every id ever put on it, the ghosts, and a few of the other streams'. */
  idsFor(s: number): string[] {
    const others = STREAMS.flatMap((_, o) => (o === s ? [] : [...this.ever[o]!].slice(-2)));
    return [...new Set([...this.ever[s]!, ...this.ghosts, ...others])];
  }

  /**
   * Reads every id and the latest of every stream from a new saver each time, and compares them
   * with MemorySaver's. With retention, an id is either retained (listed by a new saver) and then
   * equal, or reads as undefined or equal: never as another checkpoint (docs/langgraph.md,
   * Retention: a checkpoint deleted from a thread's history reads as absent).
   */
  async verify(when: string): Promise<void> {
    if (this.options.lossy) await this.garbage();
    const retention = this.options.keepLast !== undefined;
    for (const s of STREAMS.keys()) {
      const where = `${when}, stream ${JSON.stringify(STREAMS[s])}`;
      const listed = new Map<string, Shape>();
      for await (const t of new StatefoldSaver({ store: this.store }).list(this.config(s)))
        listed.set(t.checkpoint.id, shape(t)!);
      const oracleListed: string[] = [];
      for await (const t of this.oracle.list(this.config(s))) oracleListed.push(t.checkpoint.id);
      if (!retention) expect([...listed.keys()], `${where}: list`).toEqual(oracleListed);
      for (const [id, got] of listed)
        expect(got, `${where}: listed ${id}`).toEqual(shape(await this.oracle.getTuple(this.config(s, id))));
      for (const id of [undefined, ...this.idsFor(s)]) {
        const config = this.config(s, id);
        const got = shape(await new StatefoldSaver({ store: this.store }).getTuple(config));
        const want = shape(await this.oracle.getTuple(config));
        const label = `${where}: getTuple ${id ?? '(latest)'}`;
        const kept = !retention || (id === undefined ? want !== undefined && listed.has(want.id) : listed.has(id));
        if (kept || got !== undefined) expect(got, label).toEqual(want);
      }
    }
  }

  /**
   * Garbage under each stream's `idx/` (where an index of checkpoint ids may keep one object per
   * base: `<stream>/idx/<hex of the key>.<16 hex P>.<16 hex B>`): well-formed names with random keys
   * (some the hex of real ids) and random seqs, and malformed ones. A reader must not trust them.
   */
  async garbage(): Promise<void> {
    const segments = new Set<string>();
    for (const key of await this.inner.list('')) if (key.includes('/log/')) segments.add(key.split('/')[0]!);
    const ids = [...this.ever.flatMap((set) => [...set]), ...this.ghosts];
    const hex16 = (n: number) => n.toString(16).padStart(16, '0');
    const seq = () => (this.random() < 0.1 ? 'ffffffffffffffff' : hex16(Math.floor(this.random() * 120)));
    const keyHex = () =>
      this.random() < 0.5 && ids.length > 0
        ? Buffer.from(ids[Math.floor(this.random() * ids.length)]!, 'utf8').toString('hex')
        : Buffer.from(
            Array.from({ length: 1 + Math.floor(this.random() * 36) }, () => Math.floor(this.random() * 256)),
          ).toString('hex');
    for (const segment of segments) {
      const names = [
        ...Array.from({ length: 3 }, () => `${keyHex()}.${seq()}.${seq()}`),
        keyHex(),
        `${keyHex()}.${seq()}`,
        `${keyHex()}.${seq()}.${seq()}.${seq()}`,
        `zz.${seq()}.${seq()}`,
        `${keyHex()}.xyz.${seq()}`,
        `.${seq()}.${seq()}`,
        `${keyHex()}/${seq()}`,
      ];
      for (const name of names) await this.inner.putIfAbsent(`${segment}/idx/${name}`, new Uint8Array(0));
    }
  }
}

/** What is compared of a tuple: the checkpoint, metadata, parent id, and pending writes as a multiset. */
interface Shape {
  id: string;
  checkpoint: Checkpoint;
  metadata: unknown;
  parent: string | undefined;
  pendingWrites: string[];
}

function shape(t: CheckpointTuple | undefined): Shape | undefined {
  if (t === undefined) return undefined;
  return {
    id: t.checkpoint.id,
    checkpoint: t.checkpoint,
    metadata: t.metadata,
    parent: t.parentConfig?.configurable?.checkpoint_id as string | undefined,
    // (Order may differ: StatefoldSaver orders them as LangGraph applies them, MemorySaver by key.)
    pendingWrites: (t.pendingWrites ?? []).map((w) => JSON.stringify(w)).sort(),
  };
}

/** A store whose creates of `/idx/` keys fail half the time (seeded): index objects lost, as in a crash. */
function losingIndexWrites(inner: Store, seed: number): Store {
  const random = mulberry32(seed);
  const store = new HookStore(inner, (op, key) => {
    if (op === 'putIfAbsent' && key.includes('/idx/') && random() < 0.5)
      throw new Error(`putIfAbsent ${key}: lost (test)`);
  });
  // (Reads go the way they go on the inner store: the memory and SQLite stores scan.)
  const scan = inner.scan?.bind(inner);
  if (scan !== undefined) (store as Store).scan = scan;
  return store;
}

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

const stores: { name: string; open(): Promise<{ store: Store; close(): Promise<void> }> }[] = [
  { name: 'MemoryStore', open: async () => ({ store: new MemoryStore(), close: async () => {} }) },
  {
    name: 'SqliteStore',
    open: async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'statefold-locate-'));
      dirs.push(dir);
      const store = new SqliteStore({ path: path.join(dir, 'store.db') });
      const close = async () => {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      };
      return { store, close };
    },
  },
];

async function runHistory(
  open: (typeof stores)[number]['open'],
  ops: Op[],
  midpoint: number,
  options: Options,
): Promise<void> {
  const { store: inner, close } = await open();
  const store = options.lossy ? losingIndexWrites(inner, options.seed ^ 0x5bd1e995) : inner;
  const run = new Run(store, inner, options);
  try {
    const mid = midpoint % ops.length;
    for (const [i, o] of ops.entries()) {
      await run.apply(o);
      if (i === mid) {
        // With retention, read once gc settled (close waits for it); without, while hints may still be written.
        if (options.keepLast !== undefined) await run.restart();
        await run.verify(`after op ${i}`);
      }
    }
    if (options.keepLast === undefined) await run.verify('at the end, the writer open');
    await run.writer.close();
    await run.verify('at the end');
  } finally {
    await run.writer.close().catch(() => undefined);
    await close();
  }
}

describe.each(stores)('StatefoldSaver, a checkpoint found by id from a new saver ($name)', ({ open }) => {
  it('equals MemorySaver for every id ever put, deleted or never put', async () => {
    await fc.assert(
      fc.asyncProperty(history, fc.nat(), fc.constantFrom(2, 3, 4, 8), fc.integer(), (ops, mid, baseEvery, seed) =>
        runHistory(open, ops, mid, { baseEvery, seed }),
      ),
      { ...RUNS, seed: SEED },
    );
  }, 120_000);

  it('with retention, an id reads as MemorySaver has it or as absent, never as another checkpoint', async () => {
    await fc.assert(
      fc.asyncProperty(
        history,
        fc.nat(),
        fc.constantFrom(2, 3, 4, 8),
        fc.integer({ min: 1, max: 6 }),
        fc.integer(),
        (ops, mid, baseEvery, keepLast, seed) => runHistory(open, ops, mid, { baseEvery, keepLast, seed }),
      ),
      { ...RUNS, seed: SEED + 1 },
    );
  }, 120_000);

  it('equals MemorySaver when index objects are lost and garbage ones lie under idx/', async () => {
    await fc.assert(
      fc.asyncProperty(
        history,
        fc.nat(),
        fc.constantFrom(2, 3, 4, 8),
        fc.option(fc.integer({ min: 1, max: 6 }), { freq: 2 }),
        fc.integer(),
        (ops, mid, baseEvery, keepLast, seed) =>
          runHistory(open, ops, mid, { baseEvery, keepLast: keepLast ?? undefined, lossy: true, seed }),
      ),
      { ...RUNS, seed: SEED + 2 },
    );
  }, 120_000);
});
