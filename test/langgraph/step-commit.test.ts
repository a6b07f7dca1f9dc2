import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import type { RunnableConfig } from '@langchain/core/runnables';
import { MemorySaver, type BaseCheckpointSaver, type PendingWrite } from '@langchain/langgraph-checkpoint';
import { describe, expect, it } from 'vitest';
import { listCheckpoints, MemoryStore, StatefoldError } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { HookStore } from '../support/hook-store.js';

// A LangGraph step's putWrites and put land in one commit (docs/langgraph.md, One commit per step),
// and every checkpoint still reads back with the writes it was given.

const State = Annotation.Root({
  n: Annotation<number>,
  log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});

/** A graph of one node looping `steps` times: each step is one task writing two channels. */
function loop(checkpointer: BaseCheckpointSaver, steps: number) {
  return new StateGraph(State)
    .addNode('step', (s) => ({ n: s.n + 1, log: [`step ${s.n}`] }))
    .addEdge(START, 'step')
    .addConditionalEdges('step', (s) => (s.n < steps ? 'step' : END))
    .compile({ checkpointer });
}

async function history(saver: BaseCheckpointSaver, thread: string) {
  const out = [];
  for await (const t of saver.list({ configurable: { thread_id: thread } }))
    out.push({ id: t.checkpoint.id, step: t.metadata?.step, writes: t.pendingWrites ?? [] });
  return out;
}

describe('StatefoldSaver: one commit per step', () => {
  it("commits a step's writes and its checkpoint together, and reads back as MemorySaver does", async () => {
    const store = new MemoryStore();
    const saver = new StatefoldSaver({ store });
    const memory = new MemorySaver();
    const config = { configurable: { thread_id: 't' }, durability: 'sync' as const };
    const final = await loop(saver, 20).invoke({ n: 0 }, config);
    expect(await loop(memory, 20).invoke({ n: 0 }, config)).toEqual(final);
    const ours = await history(saver, 't');
    const theirs = await history(memory, 't');
    // (checkpoint and task ids differ between runs: compare everything else, in order)
    const shape = (h: typeof ours) => h.map((c) => [c.step, c.writes.map(([, channel, value]) => [channel, value])]);
    expect(shape(ours)).toEqual(shape(theirs));
    expect(ours.some((c) => (c.writes?.length ?? 0) > 0)).toBe(true);
    // Each past checkpoint found by id from a new saver, with its writes.
    const reader = new StatefoldSaver({ store });
    for (const c of ours) {
      const tuple = await reader.getTuple({ configurable: { thread_id: 't', checkpoint_id: c.id } });
      expect(tuple?.pendingWrites).toEqual(c.writes);
    }
    // One seq per checkpoint: the writes did not take a commit of their own (two per step before).
    const seqs = await listCheckpoints(store, 'langgraph/["t",""]');
    expect(seqs.length).toBe(ours.length);
    await saver.close();
  });

  it('loses nothing it acknowledged when a commit fails at any point of a run', async () => {
    const clean = counted();
    await loop(new StatefoldSaver({ store: clean.store }), 6).invoke({ n: 0 }, sync('t'));
    for (const landed of [false, true]) {
      for (let k = 1; k <= clean.puts(); k++) {
        const { store, inner, failAt } = counted();
        failAt(k, landed);
        const saver = new Recording({ store });
        // (A failed hint write fails nothing: the run may end well.)
        await loop(saver, 6)
          .invoke({ n: 0 }, sync('t'))
          .catch((err: unknown) => expect(String(err)).toMatch(/injected/));
        const reader = new StatefoldSaver({ store: inner });
        for (const id of saver.puts) {
          const tuple = await reader.getTuple({ configurable: { thread_id: 't', checkpoint_id: id } });
          expect(tuple?.checkpoint.id, `fail at ${k}, landed ${landed}: put ${id}`).toBe(id);
        }
        for (const { id, task, writes } of saver.writes) {
          const tuple = await reader.getTuple({ configurable: { thread_id: 't', checkpoint_id: id } });
          for (const [channel, value] of writes)
            expect(tuple?.pendingWrites, `fail at ${k}, landed ${landed}: writes of ${id}`).toContainEqual([
              task,
              channel,
              value,
            ]);
        }
      }
    }
  });
});

function sync(thread: string) {
  return { configurable: { thread_id: thread }, durability: 'sync' as const };
}

/** A MemoryStore behind a store that fails its `k`th putIfAbsent, before or after it lands. */
function counted() {
  const inner = new MemoryStore();
  let n = 0;
  let fail = { k: 0, landed: false };
  const injected = () => new StatefoldError('STORAGE', 'putIfAbsent: injected failure');
  const store = new (class extends HookStore {
    protected override after(op: string): void {
      if (op === 'putIfAbsent' && fail.landed && n === fail.k) throw injected();
    }
  })(inner, (op) => {
    if (op === 'putIfAbsent' && ++n === fail.k && !fail.landed) throw injected();
  });
  return { store, inner, puts: () => n, failAt: (k: number, landed: boolean) => (fail = { k, landed }) };
}

/** A StatefoldSaver that records what it acknowledged: each put and putWrites that resolved. */
class Recording extends StatefoldSaver {
  readonly puts: string[] = [];
  readonly writes: { id: string; task: string; writes: PendingWrite[] }[] = [];

  override async put(...args: Parameters<StatefoldSaver['put']>) {
    const config = await super.put(...args);
    this.puts.push(args[1].id);
    return config;
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], task: string, path?: string) {
    await super.putWrites(config, writes, task, path);
    this.writes.push({ id: config.configurable!.checkpoint_id as string, task, writes });
  }
}

describe('StatefoldSaver: writes batched into one commit', () => {
  // Random puts and writes (forks, writes to older checkpoints and to ones not put yet, puts
  // again), queued on a busy thread so that each group lands in one batch, must read back exactly
  // as the same calls made one at a time (each its own commit) do.
  for (let seed = 1; seed <= 12; seed++) {
    it(`reads back as the same calls one at a time (seed ${seed})`, async () => {
      const ops = randomOps(seed, 40);
      const one = new MemoryStore();
      const reference = new StatefoldSaver({ store: one });
      for (const group of ops) for (const op of group) await apply(reference, op);
      let hold: Promise<void> | undefined;
      let release = () => {};
      const held = new MemoryStore();
      const store = new HookStore(held, (op) => (op === 'list' ? hold : undefined));
      const batched = new StatefoldSaver({ store });
      for (const group of ops) {
        hold = new Promise((resolve) => (release = resolve));
        const busy = batched.getTuple(cfg()); // holds the thread while the group queues behind it
        const calls: Promise<unknown>[] = [];
        for (const op of group) {
          calls.push(apply(batched, op));
          await new Promise((resolve) => setImmediate(resolve)); // (its serde done: it reached the thread)
        }
        hold = undefined;
        release();
        await busy;
        await Promise.all(calls);
      }
      const ids = [...new Set(ops.flat().flatMap((op) => (op.kind === 'put' ? [op.id] : [])))];
      expect(await readAll(new StatefoldSaver({ store: held }), ids), `seed ${seed}`).toEqual(
        await readAll(new StatefoldSaver({ store: one }), ids),
      );
      // (Fewer seqs: groups did land as one commit.)
      expect((await listCheckpoints(held, STREAM)).length).toBeLessThan((await listCheckpoints(one, STREAM)).length);
    });
  }

  it('a batch fenced by another replica is applied again to what that replica committed', async () => {
    const run = async (together: boolean) => {
      const shared = new MemoryStore();
      let hold: Promise<void> | undefined;
      const a = new StatefoldSaver({ store: new HookStore(shared, (op) => (op === 'list' ? hold : undefined)) });
      const b = new StatefoldSaver({ store: shared });
      await apply(a, { kind: 'put', id: 'cp-0001', parent: undefined, n: 1 });
      await apply(b, { kind: 'put', id: 'cp-0002', parent: 'cp-0001', n: 2 }); // fences a's writer
      const batch: Op[] = [
        { kind: 'writes', id: 'cp-0001', task: 'task-0', value: 3 },
        { kind: 'put', id: 'cp-0003', parent: 'cp-0001', n: 4 },
        { kind: 'writes', id: 'cp-0003', task: 'task-1', value: 5 },
      ];
      if (!together) for (const op of batch) await apply(a, op);
      else {
        let release = () => {};
        hold = new Promise((resolve) => (release = resolve));
        const busy = a.getTuple(cfg());
        const calls: Promise<unknown>[] = [];
        for (const op of batch) {
          calls.push(apply(a, op));
          await new Promise((resolve) => setImmediate(resolve));
        }
        hold = undefined;
        release();
        await busy;
        await Promise.all(calls);
      }
      return readAll(new StatefoldSaver({ store: shared }), ['cp-0001', 'cp-0002', 'cp-0003']);
    };
    const together = await run(true);
    expect(together.latest?.checkpoint.id).toBe('cp-0003');
    expect(together.byId[0]?.pendingWrites).toEqual([['task-0', 'n', 3]]);
    expect(together).toEqual(await run(false));
  });
});

const STREAM = 'langgraph/["t",""]';
const cfg = (id?: string) => ({
  configurable: { thread_id: 't', checkpoint_ns: '', ...(id && { checkpoint_id: id }) },
});

type Op =
  | { kind: 'put'; id: string; parent: string | undefined; n: number }
  | { kind: 'writes'; id: string; task: string; value: number };

/** Groups of calls as LangGraph (and time travel) make them, from a seeded generator. */
function randomOps(seed: number, count: number): Op[][] {
  let s = seed;
  const rand = () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)]!;
  const put: string[] = [];
  let next = 0;
  const newId = () => `cp-${String(++next).padStart(4, '0')}`;
  const groups: Op[][] = [];
  let group: Op[] = [];
  for (let i = 0; i < count; i++) {
    const r = rand();
    const head = put.at(-1);
    if (r < 0.4 || head === undefined) {
      const again = rand() < 0.08 && put.length > 1;
      const id = again ? pick(put) : newId();
      const parent = rand() < 0.8 ? head : pick(put);
      group.push({ kind: 'put', id, parent, n: i });
      if (!again) put.push(id);
    } else {
      const to = rand();
      const id = to < 0.6 ? head : to < 0.8 ? pick(put) : `cp-${String(next + 1).padStart(4, '0')}`;
      group.push({ kind: 'writes', id, task: `task-${Math.floor(rand() * 3)}`, value: i });
    }
    if (rand() < 0.3) {
      groups.push(group);
      group = [];
    }
  }
  groups.push(group);
  return groups;
}

function apply(saver: StatefoldSaver, op: Op): Promise<unknown> {
  if (op.kind === 'writes') return saver.putWrites(cfg(op.id), [['n', op.value]], op.task);
  const checkpoint = {
    v: 4,
    id: op.id,
    ts: `t${op.n}`,
    channel_values: { n: op.n },
    channel_versions: { n: op.n + 1 },
    versions_seen: {},
  };
  return saver.put(cfg(op.parent), checkpoint, { source: 'loop', step: op.n, parents: {} }, { n: op.n + 1 });
}

/** Every checkpoint by id, the latest, and the listing, as a new saver reads them. */
async function readAll(saver: StatefoldSaver, ids: string[]) {
  const byId = [];
  for (const id of ids) byId.push(await saver.getTuple(cfg(id)));
  const listed = [];
  for await (const t of saver.list(cfg())) listed.push(t);
  return { byId, latest: await saver.getTuple(cfg()), listed };
}
