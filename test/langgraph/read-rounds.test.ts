import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { uuid6 } from '@langchain/langgraph-checkpoint';
import { describe, expect, it } from 'vitest';
import { gc, listCheckpoints, MemoryStore } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { cfg, checkpointOf } from '../support/langgraph-saver.js';
import { HookStore } from '../support/hook-store.js';
import { roundStore } from '../support/round-store.js';

// How many store round trips, one after the other, a read from a new saver takes: each is a
// latency on a remote store. Counted with a store that answers in rounds (support/round-store.ts),
// on a thread as a LangGraph graph writes it (each step's writes committed with the next checkpoint).

const State = Annotation.Root({
  n: Annotation<number>,
  log: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
});

async function run(saver: StatefoldSaver, steps: number): Promise<string[]> {
  const graph = new StateGraph(State)
    .addNode('step', (s) => ({ n: s.n + 1, log: [`step ${s.n} `.repeat(20)] }))
    .addEdge(START, 'step')
    .addConditionalEdges('step', (s) => (s.n < steps ? 'step' : END))
    .compile({ checkpointer: saver });
  await graph.invoke({ n: 0 }, { configurable: { thread_id: 't' }, durability: 'sync', recursionLimit: steps + 10 });
  const ids: string[] = [];
  for await (const t of saver.list(cfg('t'))) ids.unshift(t.checkpoint.id);
  return ids;
}

describe('StatefoldSaver reads from a new saver', () => {
  // The newest seq and the index page, then the index's window of the log (frames with their
  // keys on a store that scans; keys, then the frames, on one that does not).
  it.each([
    { scans: false, rounds: 3 },
    { scans: true, rounds: 2 },
  ])(
    'finds the latest and an old checkpoint, with its writes, in $rounds dependent store rounds (scan: $scans)',
    async ({ scans, rounds: ROUNDS }) => {
      const counted = roundStore(new MemoryStore(), scans);
      const writer = new StatefoldSaver({ store: counted.store });
      const ids = await run(writer, 120);
      const expected = new Map<string, unknown>();
      for (const id of ids) expected.set(id, (await writer.getTuple(cfg('t', id)))?.pendingWrites);
      await writer.close();
      const read = async (id?: string, reader = new StatefoldSaver({ store: counted.store })) => {
        counted.reset();
        const tuple = await reader.getTuple(cfg('t', id));
        return { tuple, rounds: counted.rounds, calls: counted.calls };
      };
      const newest = ids[ids.length - 1]!;
      const latest = await read();
      expect(latest.tuple?.checkpoint.id).toBe(newest);
      expect(latest.rounds).toBeLessThanOrEqual(3); // the hint, the log from it, the newest chain
      for (const back of [1, 2, 50, 100, 119]) {
        const id = ids[ids.length - 1 - back]!;
        const { tuple, rounds, calls } = await read(id);
        expect(tuple?.checkpoint.id).toBe(id);
        expect(tuple?.pendingWrites).toEqual(expected.get(id));
        expect(tuple?.pendingWrites?.length).toBeGreaterThan(0);
        if (process.env.ROUNDS_LOG) console.log(scans, back, rounds, calls);
        expect(rounds, `${back} back`).toBe(ROUNDS);
        // On a store that scans, round 1: the index page, the floors, the hints (listed once for the
        // newest seq's read and the index lookup both); round 2: the window and the newest chain,
        // with the floors once more. Not more with the length of history.
        // Without scan (file, S3): the listings of the log and a get per object, 18 calls at most here.
        expect(calls, `${back} back`).toBeLessThanOrEqual(scans ? 6 : 18);
      }
      // An id never put between two that were: undefined, in as many rounds.
      const between = `${ids[60]!.slice(0, -1)}${ids[60]!.endsWith('0') ? '1' : '0'}`;
      if (!ids.includes(between) && between < ids[61]! && between > ids[59]!) {
        const { tuple, rounds } = await read(between);
        expect(tuple).toBeUndefined();
        expect(rounds).toBe(ROUNDS);
      }
      // Read again from the same saver: the same rounds, the same answer.
      const reader = new StatefoldSaver({ store: counted.store });
      const id = ids[ids.length - 101]!;
      const first = await read(id, reader);
      const again = await read(id, reader);
      expect(again.tuple).toEqual(first.tuple);
      expect(again.rounds).toBeLessThanOrEqual(ROUNDS);
      expect(again.calls).toBeLessThanOrEqual(first.calls);
    },
  );

  it('takes as many rounds wherever the newest base lies, the newest checkpoint itself read by id too', async () => {
    // A graph's base placement depends on byte sizes; here every place is taken in turn. Each step's
    // writes are committed with the next checkpoint, as LangGraph does.
    for (const scans of [true, false])
      for (const n of [8, 9, 10, 11]) {
        const ids = Array.from({ length: n }, (_, i) => uuid6(i));
        const counted = roundStore(new MemoryStore(), scans);
        const writer = new StatefoldSaver({ store: counted.store, policy: { baseEvery: 4 } });
        let config = cfg('t') as Record<string, any>;
        for (const [step, id] of ids.entries()) {
          const writes = step > 0 ? writer.putWrites(config, [['w', step]], 'task') : undefined;
          config = await writer.put(
            config,
            checkpointOf(id, step, [`m${step}`]),
            { source: 'loop', step, parents: {} },
            {},
          );
          await writes;
        }
        await writer.close();
        for (let back = 0; back < n; back++) {
          counted.reset();
          const tuple = await new StatefoldSaver({ store: counted.store }).getTuple(cfg('t', ids[n - 1 - back]));
          expect(tuple?.checkpoint.id).toBe(ids[n - 1 - back]);
          expect(counted.rounds, `scan: ${scans}, ${n} checkpoints, ${back} back`).toBe(scans ? 2 : 3);
        }
      }
  });

  it('finds checkpoints whose ids the index cannot hold (not printable ASCII, over 90 characters)', async () => {
    const ids = Array.from({ length: 30 }, (_, i) => {
      const n = i.toString().padStart(3, '0');
      return i % 3 === 0 ? `étape-${n}` : i % 3 === 1 ? `${'r'.repeat(95)}-${n}` : `plain-${n}`;
    });
    ids.sort(); // (in order, as put: each a new largest id)
    const store = new MemoryStore();
    await put(new StatefoldSaver({ store, policy: { baseEvery: 4 } }), ids);
    for (const id of ids) {
      const tuple = await new StatefoldSaver({ store }).getTuple(cfg('t', id));
      expect(tuple?.checkpoint.id, id).toBe(id);
    }
    expect(await new StatefoldSaver({ store }).getTuple(cfg('t', 'plain-0155'))).toBeUndefined();
  });

  it('on a store that scans (SQLite, memory), reads the latest from a new saver in 2 dependent rounds', async () => {
    const counted = roundStore(new MemoryStore(), true);
    const writer = new StatefoldSaver({ store: counted.store });
    const ids = await run(writer, 120);
    const expected = await writer.getTuple(cfg('t'));
    await writer.close();
    counted.reset();
    const tuple = await new StatefoldSaver({ store: counted.store }).getTuple(cfg('t'));
    expect(tuple).toEqual(expected);
    expect(tuple?.checkpoint.id).toBe(ids[ids.length - 1]);
    // The hint, then the floors and the newest chain with its keys (scan), together.
    expect(counted.rounds).toBe(2);
    expect(counted.calls).toBe(3);
  });

  it('lists a whole thread reading each stored object about once, not once per checkpoint', async () => {
    const counted = roundStore();
    const writer = new StatefoldSaver({ store: counted.store });
    const ids = await run(writer, 120);
    const expected = [];
    for (const id of [...ids].reverse()) expected.push(await writer.getTuple(cfg('t', id)));
    await writer.close();
    const objects = (await counted.store.list('')).filter((key) => key.includes('/log/')).length;
    counted.reset();
    const listed = [];
    for await (const tuple of new StatefoldSaver({ store: counted.store }).list(cfg('t'))) listed.push(tuple);
    expect(listed).toEqual(expected);
    // Each checkpoint's chain read once per window of 64 seqs, not once (or twice, with the seq
    // holding its writes) per checkpoint: the metas of each page, then each window's frames: a few calls per object, where that was ~8 (1,045 calls for 123 objects).
    expect(counted.calls).toBeLessThanOrEqual(3 * objects);
  });

  it('finds each checkpoint retention kept, and none it deleted, from a new saver', async () => {
    // Ids in order; the thread gets every other one from 1, another history every fourth.
    const pool = Array.from({ length: 260 }, (_, i) => uuid6(i));
    const ids = Array.from({ length: 64 }, (_, i) => pool[2 * i + 1]!);
    const store = new MemoryStore();
    await put(new StatefoldSaver({ store, policy: { baseEvery: 4 } }), ids);
    // What a store that still answers reads of deleted objects gives below the floor: here
    // seqs of another history, whose running largest ids outrun this one's (a search must not be
    // led astray by them).
    const other = new MemoryStore();
    await put(
      new StatefoldSaver({ store: other, policy: { baseEvery: 4 } }),
      ids.map((_, i) => pool[4 * i]!),
    );
    await gc(store, 'langgraph/["t",""]', { keepLast: 20, minAgeMs: 0 });
    const oldest = (await listCheckpoints(store, 'langgraph/["t",""]', { limit: 1 }))[0]!.seq;
    expect(oldest).toBeGreaterThan(40);
    const stale = new HookStore(store);
    stale.get = async (key, options) => (await store.get(key, options)) ?? other.get(key, options);
    for (const reading of [store, stale]) {
      for (const [i, id] of ids.entries()) {
        const tuple = await new StatefoldSaver({ store: reading }).getTuple(cfg('t', id));
        // (One seq per checkpoint: checkpoint i is seq i + 1.)
        expect(tuple?.checkpoint.id, `checkpoint ${i}`).toBe(i + 1 >= oldest ? id : undefined);
      }
    }
  });

  it('a saver that found a checkpoint reads its writes made since, and finds it gone after retention', async () => {
    // What another saver committed since the reader found it must show; what retention deleted must not.
    const pool = Array.from({ length: 40 }, (_, i) => uuid6(i));
    const store = new MemoryStore();
    await put(new StatefoldSaver({ store, policy: { baseEvery: 4 } }), pool);
    const reader = new StatefoldSaver({ store });
    const old = pool[10]!;
    expect((await reader.getTuple(cfg('t', old)))?.pendingWrites).toEqual([]);
    expect((await reader.getTuple(cfg('t', old)))?.checkpoint.id).toBe(old);
    const writer = new StatefoldSaver({ store });
    await writer.putWrites(cfg('t', old), [['late', 'written after the reader found it']], 'task-1');
    await writer.close();
    const tuple = await reader.getTuple(cfg('t', old));
    expect(tuple?.checkpoint.id).toBe(old);
    expect(tuple?.pendingWrites).toEqual([['task-1', 'late', 'written after the reader found it']]);
    // Retention deletes its seq: the reader, which saw it there, finds nothing (not a stale copy).
    const next = pool[20]!;
    expect((await reader.getTuple(cfg('t', next)))?.checkpoint.id).toBe(next);
    await gc(store, 'langgraph/["t",""]', { keepLast: 5, minAgeMs: 0 });
    expect(await reader.getTuple(cfg('t', next))).toBeUndefined();
    expect((await reader.getTuple(cfg('t', pool[39]!)))?.checkpoint.id).toBe(pool[39]);
    await reader.close();
  });
});

/** Puts a checkpoint of each id, in order, on thread 't'. */
async function put(saver: StatefoldSaver, ids: string[]): Promise<void> {
  let config = cfg('t') as Record<string, any>;
  for (const [step, id] of ids.entries())
    config = await saver.put(
      config,
      checkpointOf(id, step, [`m${step}`]),
      { source: 'loop', step, parents: {} },
      {
        messages: step + 1,
      },
    );
  await saver.close();
}
