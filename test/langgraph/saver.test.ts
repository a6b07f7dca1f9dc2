import { randomBytes } from 'node:crypto';
import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { JsonPlusSerializer, uuid6 } from '@langchain/langgraph-checkpoint';
import { describe, expect, it, onTestFinished } from 'vitest';
import { isStatefoldError, listStreams, MemoryStore, restore, type Store } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { CANARY, holdingCanary, storedObjects } from '../support/canary.js';
import { HookStore, type StoreOp } from '../support/hook-store.js';
import { cfg, checkpointOf, thread } from '../support/langgraph-saver.js';

// What LangGraph's validation suite does not check: bounded reads on long threads, writes that
// come before their put or go to an older checkpoint, two replicas on one thread, effects, errors.

/** A store that counts the operations that reach it. */
function counting(inner: Store = new MemoryStore()): { store: Store; count: Record<StoreOp, number>; reset(): void } {
  const zero = (): Record<StoreOp, number> => ({ get: 0, putIfAbsent: 0, list: 0, delete: 0, removeLeftovers: 0 });
  const count = zero();
  const store = new HookStore(inner, (op) => void count[op]++);
  return { store, count, reset: () => Object.assign(count, zero()) };
}

describe('StatefoldSaver', () => {
  it('finds an old checkpoint of a long thread without reading its history', async () => {
    const { store, count, reset } = counting();
    const ids = await thread(new StatefoldSaver({ store }), 't', 400);
    const reader = new StatefoldSaver({ store });
    reset();
    const tuple = await reader.getTuple(cfg('t', ids[10]));
    expect(tuple?.checkpoint.id).toBe(ids[10]);
    expect((tuple?.checkpoint.channel_values.messages as string[]).length).toBe(11);
    expect(tuple?.parentConfig?.configurable?.checkpoint_id).toBe(ids[9]);
    // A binary search over 400 seqs: about log2(400) = 9 probes of one read each, then the restore.
    expect(count.get).toBeLessThan(30);
    reset();
    const latest = await reader.getTuple(cfg('t'));
    expect(latest?.checkpoint.id).toBe(ids[399]);
    expect(count.get).toBeLessThan(40);
    reset();
    const page = [];
    for await (const t of reader.list(cfg('t'), { limit: 3 })) page.push(t.checkpoint.id);
    expect(page).toEqual([ids[399], ids[398], ids[397]]);
    expect(count.get).toBeLessThan(120);
    expect(count.get).toBeGreaterThan(0);
  });

  it('keeps writes that come before their put, and writes to an older checkpoint', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const ids = await thread(saver, 't', 3);
    const next = uuid6(9);
    // LangGraph fires the writes of a checkpoint before its put reaches the saver.
    await saver.putWrites(cfg('t', next), [['messages', 'early']], 'task-a');
    expect((await saver.getTuple(cfg('t')))?.checkpoint.id).toBe(ids[2]);
    expect((await saver.getTuple(cfg('t')))?.pendingWrites).toEqual([]);
    await saver.put(
      cfg('t', ids[2]),
      checkpointOf(next, 3, ['x']),
      { source: 'loop', step: 3, parents: {} },
      {
        messages: 4,
      },
    );
    expect((await saver.getTuple(cfg('t')))?.pendingWrites).toEqual([['task-a', 'messages', 'early']]);
    // A write to an older checkpoint (a replay from it) is kept with it; the latest stays the latest.
    await saver.putWrites(cfg('t', ids[0]), [['messages', 'late']], 'task-b');
    await saver.putWrites(cfg('t', ids[0]), [['messages', 'again']], 'task-b'); // same task and index: kept once
    expect((await saver.getTuple(cfg('t', ids[0])))?.pendingWrites).toEqual([['task-b', 'messages', 'late']]);
    expect((await saver.getTuple(cfg('t')))?.checkpoint.id).toBe(next);
    const fresh = new StatefoldSaver({ store: saver.store });
    expect((await fresh.getTuple(cfg('t', ids[0])))?.pendingWrites).toEqual([['task-b', 'messages', 'late']]);
    expect((await fresh.getTuple(cfg('t', next)))?.pendingWrites).toEqual([['task-a', 'messages', 'early']]);
    const listed = [];
    for await (const t of fresh.list(cfg('t'))) listed.push(t.checkpoint.id);
    expect(listed).toEqual([next, ids[2], ids[1], ids[0]]);
  });

  it('drops writes a killed run left for a checkpoint it never put, once a later one is put', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const ids = await thread(saver, 't', 1);
    const [orphan, next, later] = [uuid6(1), uuid6(2), uuid6(3)];
    await saver.putWrites(cfg('t', orphan), [['messages', 'lost run']], 'task-a'); // its put never comes
    await saver.putWrites(cfg('t', later), [['messages', 'early']], 'task-b'); // its put comes after next
    const meta = { source: 'loop' as const, step: 1, parents: {} };
    await saver.put(cfg('t', ids[0]), checkpointOf(next, 1, ['n']), meta, { messages: 2 });
    const stored = await restore<{ writes: Record<string, unknown> }>(saver.store, 'langgraph/["t",""]');
    expect(Object.keys(stored.state.writes)).toEqual([later]);
    await saver.put(cfg('t', next), checkpointOf(later, 2, ['l']), meta, { messages: 3 });
    expect((await saver.getTuple(cfg('t')))?.pendingWrites).toEqual([['task-b', 'messages', 'early']]);
  });

  it('encrypts every checkpoint of every thread with the encryption option', async () => {
    const keys = { k1: randomBytes(32) };
    const store = new MemoryStore();
    const saver = new StatefoldSaver({ store, encryption: { keys, current: 'k1' } });
    const config = await saver.put(
      cfg('t'),
      { ...checkpointOf(uuid6(1), 0, [`${CANARY} in a message`]) },
      { source: 'input', step: -1, parents: {}, note: CANARY } as never,
      { messages: 1 },
    );
    await saver.putWrites(config, [['messages', `${CANARY} in a write`]], 'task');
    const objects = await storedObjects(store);
    expect(objects.length).toBeGreaterThan(0);
    expect(holdingCanary(objects)).toEqual([]);
    const reader = new StatefoldSaver({ store, encryption: { keys, current: 'k1' } });
    expect((await reader.getTuple(cfg('t')))?.pendingWrites).toEqual([['task', 'messages', `${CANARY} in a write`]]);
    await expect(new StatefoldSaver({ store }).getTuple(cfg('t'))).rejects.toSatisfy((e) =>
      isStatefoldError(e, 'KEY_UNAVAILABLE'),
    );
  });

  it('two replicas on one thread: the fenced one re-opens and writes on top of the other', async () => {
    const store = new MemoryStore();
    const a = new StatefoldSaver({ store });
    const b = new StatefoldSaver({ store });
    const ids = await thread(a, 't', 2);
    const c2 = uuid6(20);
    await b.put(
      cfg('t', ids[1]),
      checkpointOf(c2, 2, ['b']),
      { source: 'loop', step: 2, parents: {} },
      { messages: 3 },
    );
    const c3 = uuid6(30);
    await a.put(cfg('t', c2), checkpointOf(c3, 3, ['a']), { source: 'loop', step: 3, parents: {} }, { messages: 4 });
    const listed = [];
    for await (const t of b.list(cfg('t'))) listed.push(t.checkpoint.id);
    expect(listed).toEqual([c3, c2, ids[1], ids[0]]);
    expect((await b.getTuple(cfg('t')))?.checkpoint.channel_values).toEqual({ messages: ['a'] });
  });

  it('stores a list item changed in place between two puts with its new content', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const item = { role: 'assistant', content: 'draft' };
    const list = [{ role: 'user', content: 'hi' }, item];
    const meta = { source: 'loop' as const, step: 0, parents: {} };
    const first = uuid6(1);
    const config = await saver.put(cfg('t'), { ...checkpointOf(first, 0, []), channel_values: { list } }, meta, {
      list: 1,
    });
    item.content = 'final'; // the same object, changed in place
    const second = uuid6(2);
    await saver.put(config, { ...checkpointOf(second, 1, []), channel_values: { list } }, meta, { list: 2 });
    const fresh = new StatefoldSaver({ store: saver.store });
    expect((await fresh.getTuple(cfg('t', second)))?.checkpoint.channel_values.list).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'final' },
    ]);
    expect((await fresh.getTuple(cfg('t', first)))?.checkpoint.channel_values.list).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'draft' },
    ]);
  });

  it('stores a message changed in place while its put was serializing it with its new content at the next put', async () => {
    // LangGraph with durability 'async' runs the next step's nodes while a put is in flight: a
    // node may change a message in place between the serializer's call and its answer.
    for (let turns = 0; turns < 60; turns++) {
      const saver = new StatefoldSaver({ store: new MemoryStore() });
      const message = new AIMessage({ id: 'a', content: 'A' });
      const meta = { source: 'loop' as const, step: 0, parents: {} };
      const [first, second] = [uuid6(1), uuid6(2)];
      const put = saver.put(
        cfg('t'),
        { ...checkpointOf(first, 0, []), channel_values: { messages: [message] } },
        meta,
        { messages: 1 },
      );
      for (let i = 0; i < turns; i++) await Promise.resolve();
      message.content = 'B';
      await put;
      await saver.put(
        cfg('t', first),
        { ...checkpointOf(second, 1, []), channel_values: { messages: [message] } },
        meta,
        { messages: 2 },
      );
      const fresh = new StatefoldSaver({ store: saver.store });
      const [read] = (await fresh.getTuple(cfg('t', second)))!.checkpoint.channel_values.messages as AIMessage[];
      expect(read?.content, `changed after ${turns} turns`).toBe('B');
    }
  });

  it('gives a subclass of the serializer, which may wrap what it writes, whole lists', async () => {
    class Enveloped extends JsonPlusSerializer {
      override async dumpsTyped(value: unknown): Promise<[string, Uint8Array]> {
        return super.dumpsTyped({ v: 1, data: value });
      }
      override async loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
        return ((await super.loadsTyped(type, data)) as { data: unknown }).data;
      }
    }
    const saver = new StatefoldSaver({ store: new MemoryStore(), serde: new Enveloped() });
    const id = uuid6(1);
    const channel_values = { list: ['x', { y: 1 }], s: 'z' };
    await saver.put(
      cfg('t'),
      { ...checkpointOf(id, 0, []), channel_values },
      { source: 'loop', step: 0, parents: {} },
      { list: 1, s: 1 },
    );
    const fresh = new StatefoldSaver({ store: saver.store, serde: new Enveloped() });
    expect((await fresh.getTuple(cfg('t', id)))?.checkpoint.channel_values).toEqual(channel_values);
  });

  it('stores a list with a reference back to itself as the serializer writes the whole list', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const list: unknown[] = [];
    list.push({ role: 'user', content: 'hi', thread: list }, { role: 'assistant', content: 'ok' });
    const id = uuid6(1);
    await saver.put(
      cfg('t'),
      { ...checkpointOf(id, 0, []), channel_values: { list } },
      { source: 'loop', step: 0, parents: {} },
      { list: 1 },
    );
    const [, whole] = await new JsonPlusSerializer().dumpsTyped(list);
    const read = (await new StatefoldSaver({ store: saver.store }).getTuple(cfg('t', id)))?.checkpoint.channel_values;
    expect(read?.list).toEqual(JSON.parse(new TextDecoder().decode(whole)));
  });

  it('serializes only the messages that are new or changed in place, at any depth, and stores each as it is', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    // Counted on the prototype: a serde changed on the instance (or a subclass) is not taken as
    // LangGraph's own, and is given whole lists.
    let dumped = 0;
    const proto = JsonPlusSerializer.prototype;
    const original = proto.dumpsTyped;
    proto.dumpsTyped = function (this: JsonPlusSerializer, value: unknown) {
      dumped++;
      return original.call(this, value);
    };
    onTestFinished(() => {
      proto.dumpsTyped = original;
    });
    const dumpsTyped = (value: unknown) => original.call(saver.serde as JsonPlusSerializer, value);
    const question = new HumanMessage({ id: 'q', content: 'Read the file.' });
    const call = new AIMessage({
      id: 'c',
      content: '',
      tool_calls: [{ id: 'tc', name: 'read_file', args: { path: 'a.txt', lines: [1, 2] } }],
    });
    // A Date and a getter: what serialization makes of them is not in own properties (always serialized).
    let n = 1;
    const when = { at: new Date(0) };
    const computed = {
      get n() {
        return n;
      },
    };
    const meta = { source: 'loop' as const, step: 0, parents: {} };
    const ids = [1, 2, 3, 4, 5].map((n) => uuid6(n));
    const put = async (i: number, messages: unknown[]) => {
      dumped = 0;
      await saver.put(
        cfg('t', i === 0 ? undefined : ids[i - 1]),
        { ...checkpointOf(ids[i]!, i, []), channel_values: { messages } },
        meta,
        { messages: i + 1 },
      );
      return dumped - 1; // (one for the metadata)
    };
    expect(await put(0, [question, call, when, computed])).toBe(4);
    // The same objects again, one new: only the new one (and the Date's and the getter's holders, always) is serialized.
    const result = new ToolMessage({ id: 'r', content: 'line 1', tool_call_id: 'tc' });
    expect(await put(1, [question, call, when, computed, result])).toBe(3);
    // Changed in place, deep inside: serialized again.
    (call.tool_calls![0]!.args as { lines: number[] }).lines.push(3);
    expect(await put(2, [question, call, when, computed, result])).toBe(3);
    // A field added in place, and a Date changed in place.
    (result as unknown as Record<string, unknown>).extra = 'x';
    when.at.setTime(1000);
    n = 2;
    expect(await put(3, [question, call, when, computed, result])).toBe(3);
    const fresh = new StatefoldSaver({ store: saver.store });
    const messagesAt = async (i: number) =>
      (await fresh.getTuple(cfg('t', ids[i])))!.checkpoint.channel_values.messages as unknown[];
    const serialized = async (messages: unknown[]) => {
      const [, bytes] = await dumpsTyped(messages);
      return new TextDecoder().decode(bytes);
    };
    expect(((await messagesAt(1))[1] as AIMessage).tool_calls![0]!.args).toEqual({ path: 'a.txt', lines: [1, 2] });
    expect(((await messagesAt(2))[1] as AIMessage).tool_calls![0]!.args).toEqual({ path: 'a.txt', lines: [1, 2, 3] });
    expect((await messagesAt(2)).slice(2, 4)).toEqual([{ at: new Date(0).toISOString() }, { n: 1 }]);
    expect((await messagesAt(3)).slice(2, 4)).toEqual([{ at: new Date(1000).toISOString() }, { n: 2 }]);
    // Each read back serializes as the list did when it was put.
    expect(await serialized(await messagesAt(3))).toBe(await serialized([question, call, when, computed, result]));
  });

  it('runs an effect once per thread, across savers', async () => {
    const store = new MemoryStore();
    const saver = new StatefoldSaver({ store });
    await thread(saver, 't', 1);
    let calls = 0;
    const charge = () => ({ charged: ++calls });
    expect(await saver.effect(cfg('t'), 'charge:1', charge)).toEqual({ charged: 1 });
    await saver.close();
    const resumed = new StatefoldSaver({ store });
    expect(await resumed.effect(cfg('t'), 'charge:1', charge)).toEqual({ charged: 1 });
    expect(calls).toBe(1);
  });

  it('deletes every namespace of one thread and no other thread', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    await thread(saver, '1', 2);
    await thread(saver, '10', 2);
    const child = { configurable: { thread_id: '1', checkpoint_ns: 'sub:1' } };
    await saver.put(child, checkpointOf(uuid6(5), 0, []), { source: 'loop', step: 0, parents: {} }, {});
    await saver.deleteThread('1');
    expect(await saver.getTuple(cfg('1'))).toBeUndefined();
    expect(await saver.getTuple(child)).toBeUndefined();
    expect(await saver.getTuple(cfg('10'))).toBeDefined();
    expect(await listStreams(saver.store)).toEqual(['langgraph/["10",""]']);
  });

  it('runs calls on a thread in call order, also around deleteThread: a put called after it is kept', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const meta = { source: 'loop' as const, step: 0, parents: {} };
    const [old, kept] = [uuid6(1), uuid6(2)];
    // A read called before a put does not see it; one called after it does, neither awaited.
    const before = saver.getTuple(cfg('t'));
    const first = saver.put(cfg('t'), checkpointOf(old, 0, ['old']), meta, { messages: 1 });
    const after = saver.getTuple(cfg('t'));
    await first;
    expect(await before).toBeUndefined();
    expect((await after)?.checkpoint.id).toBe(old);
    // Not awaited in between: the delete, then a put and reads, called in that order.
    const deleted = saver.deleteThread('t');
    const put = saver.put(cfg('t'), checkpointOf(kept, 0, ['new']), meta, { messages: 1 });
    const read = saver.getTuple(cfg('t'));
    await Promise.all([deleted, put]);
    expect((await read)?.checkpoint.id).toBe(kept);
    expect((await saver.getTuple(cfg('t')))?.checkpoint.channel_values).toEqual({ messages: ['new'] });
    expect(await saver.getTuple(cfg('t', old))).toBeUndefined();
    // A put called before the delete is deleted with the thread.
    const gone = saver.put(cfg('t'), checkpointOf(uuid6(3), 1, ['gone']), meta, { messages: 2 });
    await Promise.all([gone, saver.deleteThread('t')]);
    expect(await saver.getTuple(cfg('t'))).toBeUndefined();
    expect(await listStreams(saver.store)).toEqual([]);
  });

  it('rejects a config without a thread_id or checkpoint_id with INVALID_ARGUMENT', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const cp = checkpointOf(uuid6(1), 0, []);
    const meta = { source: 'input' as const, step: -1, parents: {} };
    await expect(saver.put({ configurable: {} }, cp, meta, {})).rejects.toSatisfy((e) =>
      isStatefoldError(e, 'INVALID_ARGUMENT'),
    );
    await expect(saver.putWrites(cfg('t'), [['a', 1]], 'task')).rejects.toThrow(/checkpoint_id is required/);
    await expect(saver.put({ configurable: { thread_id: 't', checkpoint_ns: 7 } }, cp, meta, {})).rejects.toThrow(
      /checkpoint_ns must be a string/,
    );
    expect(() => new StatefoldSaver({} as never)).toThrow(/store/);
    // Engine options are checked when the saver is made, not at its first put.
    const store = new MemoryStore();
    expect(() => new StatefoldSaver({ store, policy: { baseEvery: 0 } })).toThrow(/new StatefoldSaver: .*baseEvery/);
    expect(() => new StatefoldSaver({ store, onPendingEffect: 'later' as never })).toThrow(/onPendingEffect/);
    expect(() => new StatefoldSaver({ store, maxOpenThreads: 0 })).toThrow(/maxOpenThreads/);
  });
});
