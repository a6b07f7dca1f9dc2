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
