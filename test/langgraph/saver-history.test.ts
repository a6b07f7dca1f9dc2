import { setTimeout as sleep } from 'node:timers/promises';
import { uuid6 } from '@langchain/langgraph-checkpoint';
import { describe, expect, it } from 'vitest';
import { gc, listCheckpoints, MemoryStore } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { HookStore } from '../support/hook-store.js';
import { cfg, checkpointOf, thread } from '../support/langgraph-saver.js';

// How a thread's history holds up under forks, re-commits, other replicas, retention and a full
// set of open threads: each case here once returned the wrong checkpoint or failed.

const meta = (step: number) => ({ source: 'loop' as const, step, parents: {} });
const STREAM = 'langgraph/["t",""]';

describe('StatefoldSaver history', () => {
  it('a fork keeps its own branch value of an unchanged channel, though versions collide', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const [root, a1, b1, a2] = [uuid6(1), uuid6(2), uuid6(3), uuid6(4)];
    const cp = (id: string, x: string, version: number, y = 0) => ({
      ...checkpointOf(id, 0, []),
      channel_values: { x, y },
      channel_versions: { x: version, y: y + 1 },
    });
    await saver.put(cfg('t'), cp(root, 'root', 1), meta(0), { x: 1, y: 1 });
    // Two branches from root each set x at version 2; b1 is put last, so it is the newest seq.
    await saver.put(cfg('t', root), cp(a1, 'branch a', 2), meta(1), { x: 2 });
    await saver.put(cfg('t', root), cp(b1, 'branch b', 2), meta(1), { x: 2 });
    // a2 continues branch a and leaves x unchanged: its value is a1's, not the newest seq's.
    await saver.put(cfg('t', a1), cp(a2, 'branch a', 2, 1), meta(2), { y: 2 });
    for (const reader of [saver, new StatefoldSaver({ store: saver.store })]) {
      expect((await reader.getTuple(cfg('t', a2)))?.checkpoint.channel_values).toEqual({ x: 'branch a', y: 1 });
      expect((await reader.getTuple(cfg('t', b1)))?.checkpoint.channel_values.x).toBe('branch b');
    }
  });

  it('a checkpoint put again onto its own re-commit is found from a new saver with what was put last', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const ids = await thread(saver, 't', 3);
    // A write to ids[0] re-commits it as the newest seq; a put of ids[0] again lands on that re-commit.
    await saver.putWrites(cfg('t', ids[0]), [['messages', 'late']], 'task-a');
    await saver.put(cfg('t'), checkpointOf(ids[0]!, 0, ['put again']), meta(99), { messages: 9 });
    const later = uuid6(50);
    await saver.put(cfg('t', ids[2]), checkpointOf(later, 5, ['later']), meta(5), { messages: 6 });
    const fresh = new StatefoldSaver({ store: saver.store });
    const tuple = await fresh.getTuple(cfg('t', ids[0]));
    expect(tuple?.metadata?.step).toBe(99);
    expect(tuple?.checkpoint.channel_values.messages).toEqual(['put again']);
    expect(tuple?.pendingWrites).toEqual([['task-a', 'messages', 'late']]);
    expect((await fresh.getTuple(cfg('t')))?.checkpoint.id).toBe(later);
  });

  it('a saver that located a checkpoint sees writes another replica committed to it since', async () => {
    const store = new MemoryStore();
    const [a, b] = [new StatefoldSaver({ store }), new StatefoldSaver({ store })];
    const [first] = await thread(a, 't', 1);
    expect((await a.getTuple(cfg('t', first)))?.pendingWrites).toEqual([]);
    // Replica b adds a write to that checkpoint, then puts the next one.
    await b.putWrites(cfg('t', first), [['messages', 'from b']], 'task-b');
    const next = uuid6(10);
    await b.put(cfg('t', first), checkpointOf(next, 1, ['b']), meta(1), { messages: 2 });
    expect((await a.getTuple(cfg('t', first)))?.pendingWrites).toEqual([['task-b', 'messages', 'from b']]);
    expect((await a.getTuple(cfg('t')))?.checkpoint.id).toBe(next);
  });

  it('a checkpoint deleted by retention reads as absent, not as an error, even where a later meta names it', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore(), policy: { baseEvery: 2 } });
    const ids = await thread(saver, 't', 3);
    await saver.putWrites(cfg('t', ids[0]), [['messages', 'late']], 'task-a'); // re-commits ids[0]: later metas name its seq
    expect((await saver.getTuple(cfg('t', ids[0])))?.pendingWrites).toEqual([['task-a', 'messages', 'late']]);
    let config = cfg('t', ids[2]) as Record<string, any>;
    for (let step = 3; step < 8; step++)
      config = await saver.put(config, checkpointOf(uuid6(step + 10), step, [`m${step}`]), meta(step), {
        messages: step + 1,
      });
    const report = await gc(saver.store, STREAM, { keepLast: 2, minAgeMs: 0 });
    expect(report.deleted.length).toBeGreaterThan(0);
    const oldest = (await listCheckpoints(saver.store, STREAM, { limit: 1 }))[0]!.seq;
    expect(oldest).toBeGreaterThan(4); // the re-commit of ids[0] (seq 4) is gone
    for (const reader of [saver, new StatefoldSaver({ store: saver.store })]) {
      expect(await reader.getTuple(cfg('t', ids[0]))).toBeUndefined();
      expect(await reader.getTuple(cfg('t', ids[1]))).toBeUndefined();
      const listed = [];
      for await (const t of reader.list(cfg('t'), { limit: 10 })) listed.push(t.checkpoint.id);
      expect(listed.length).toBeGreaterThanOrEqual(2);
      expect(listed).not.toContain(ids[0]);
    }
    // A write to a deleted checkpoint fails nothing; the thread goes on.
    await saver.putWrites(cfg('t', ids[0]), [['messages', 'too late']], 'task-z');
    expect((await saver.getTuple(cfg('t')))?.checkpoint.id).toBe(config.configurable.checkpoint_id);
  });

  it('never closes a thread writer with an effect running to open another thread', async () => {
    const store = new MemoryStore();
    const saver = new StatefoldSaver({ store, maxOpenThreads: 1 });
    await thread(saver, 't', 1);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    const charging = saver.effect(cfg('t'), 'charge:1', async () => {
      await gate;
      return { charged: ++calls };
    });
    // With one thread open at most, these open other threads while the effect runs on 't'.
    await thread(saver, 'u', 2);
    await thread(saver, 'v', 2);
    // And 't' goes on meanwhile: a second writer of it would fence the one the effect runs on.
    const latest = (await saver.getTuple(cfg('t')))!;
    const next = uuid6(10);
    await saver.put(latest.config, checkpointOf(next, 1, ['on']), meta(1), { messages: 2 });
    release();
    expect(await charging).toEqual({ charged: 1 });
    expect((await saver.getTuple(cfg('t')))?.checkpoint.id).toBe(next);
    await thread(saver, 'w', 1);
    await saver.close();
    // Recorded as done: a new saver gets the result, and the charge is not made again.
    const resumed = new StatefoldSaver({ store });
    expect(await resumed.effect(cfg('t'), 'charge:1', () => ({ charged: ++calls }))).toEqual({ charged: 1 });
    expect(calls).toBe(1);
  });

  it('threads written at once through fewer open slots than threads all end with every put', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore(), maxOpenThreads: 2 });
    const names = ['a', 'b', 'c', 'd', 'e'];
    const written = await Promise.all(names.map((name) => thread(saver, name, 6)));
    for (const [i, name] of names.entries()) {
      const listed = [];
      for await (const t of saver.list(cfg(name))) listed.push(t.checkpoint.id);
      expect(listed).toEqual([...written[i]!].reverse());
    }
  });

  it('a thread used again while its closed writer still closes opens only once that close is done', async () => {
    // Hints (written after each base, awaited by close) of thread 't' are held until released.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let opsOnT = 0;
    let counting = false;
    const store = new HookStore(new MemoryStore(), async (op, key) => {
      if (!key.includes('~22t~22')) return;
      if (op === 'putIfAbsent' && key.includes('/hint/')) return held;
      if (counting) opsOnT++;
    });
    const saver = new StatefoldSaver({ store, maxOpenThreads: 1 });
    const [first] = await thread(saver, 't', 1); // a base: its hint is held, so closing this writer waits
    await thread(saver, 'u', 1); // closes 't''s writer (idle), which waits for the held hint
    counting = true;
    const next = uuid6(10);
    const put = saver.put(cfg('t', first), checkpointOf(next, 1, ['again']), meta(1), { messages: 2 });
    await sleep(50);
    expect(opsOnT, 'store calls on t while its old writer was still closing').toBe(0);
    release();
    await put;
    expect((await saver.getTuple(cfg('t')))?.checkpoint.id).toBe(next);
    await saver.close();
  });

  it('a checkpoint id this saver saw, after another process deleted and rewrote the thread, is not mistaken for what now holds its seq', async () => {
    const store = new MemoryStore();
    const [a, b] = [new StatefoldSaver({ store }), new StatefoldSaver({ store })];
    const old = await thread(a, 't', 2); // a knows old[0]'s seq
    await b.deleteThread('t');
    const rewritten = await thread(b, 't', 3); // the same seqs, other checkpoints
    await a.putWrites(cfg('t', old[0]), [['messages', 'late']], 'task-a');
    // A fork from the deleted checkpoint, with no channel in newVersions: nothing is stored to keep, so the values are.
    const fork = uuid6(40);
    const forked = { ...checkpointOf(fork, 9, ['forked']), channel_versions: { messages: 1, step: 1 } };
    await a.put(cfg('t', old[0]), forked, meta(9), {});
    const fresh = new StatefoldSaver({ store });
    expect(await fresh.getTuple(cfg('t', old[0]))).toBeUndefined();
    expect((await fresh.getTuple(cfg('t', fork)))?.checkpoint.channel_values).toEqual({
      messages: ['forked'],
      step: 9,
    });
    const listed = [];
    for await (const t of fresh.list(cfg('t'))) listed.push(t.checkpoint.id);
    expect(listed).toEqual([fork, ...[...rewritten].reverse()]);
  });
});
