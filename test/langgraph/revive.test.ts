import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import {
  emptyCheckpoint,
  JsonPlusSerializer,
  MemorySaver,
  uuid6,
  type BaseCheckpointSaver,
  type PendingWrite,
} from '@langchain/langgraph-checkpoint';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { MemoryStore } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';

// A StatefoldSaver on LangGraph's own JsonPlusSerializer revives stored values from the parsed
// JSON it keeps, without writing it out as text first: what it gives back must be what the
// serializer gives for the text, value for value, class for class.

/** A serializer that reads as JsonPlusSerializer does, but is not it: the saver reads it through its text. */
class TextSerializer extends JsonPlusSerializer {}

const lcRecord = { lc: 2, type: 'undefined' };

/** Channel values that take each way through the reviver. */
function tricky(): Record<string, unknown> {
  return {
    messages: [
      new HumanMessage({ id: 'h1', content: 'hello' }),
      new AIMessage({
        id: 'a1',
        content: '',
        tool_calls: [{ id: 'call-1', name: 'read', args: { path: 'a.md', n: 2, deep: { x: [1, null] } } }],
      }),
      new ToolMessage({ id: 't1', tool_call_id: 'call-1', content: 'text', artifact: { bytes: 3 } }),
      // Undefined values inside a LangChain object (a ToolMessage without artifact): records of undefined.
      new ToolMessage({ id: 't2', tool_call_id: 'call-1', content: 'no artifact' }),
      new AIMessage({
        id: 'a3',
        content: 'u',
        additional_kwargs: { list: [undefined, 1, { u: undefined }], nested: { u: undefined, v: 2 } },
      }),
      // A LangChain object with another record inside it: revived by the serializer as a whole.
      new AIMessage({ id: 'a2', content: 'x', additional_kwargs: { seen: new Set(['a', 'b']) } }),
    ],
    set: new Set([1, 2]),
    map: new Map([['k', { v: 1 }]]),
    regexp: /a+b/gi,
    error: new Error('boom'),
    bytesInside: { b: new Uint8Array([1, 2, 3]) },
    undef: { a: undefined, b: [undefined, 1] },
    // Plain data that looks like a record, or has an lc key of its own.
    lookalike: { lc: 5, type: 'constructor', id: 'x' },
    lcOne: { lc: 1, type: 'secret', id: ['NOT_A_SECRET'] },
    nested: { deep: [{ deeper: { lc: 2, type: 'undefined' } }] },
    negativeZero: -0,
    numbers: [0, 1.5, -3, 1e300, Number.MAX_SAFE_INTEGER],
    text: 'caf\u00e9 \ud83d\ude00 \u2028',
    empty: [{}, [], ''],
    plain: { a: { b: { c: [1, 'two', true, null] } } },
  };
}

async function roundTrip(saver: BaseCheckpointSaver, values: Record<string, unknown>, writes: PendingWrite[]) {
  const id = uuid6(1);
  const versions = Object.fromEntries(Object.keys(values).map((k) => [k, 1]));
  const config = await saver.put(
    { configurable: { thread_id: 't', checkpoint_ns: '' } },
    { ...emptyCheckpoint(), id, channel_values: values, channel_versions: versions },
    { source: 'loop', step: 1, parents: {}, extra: lcRecord } as never,
    versions,
  );
  await saver.putWrites(config, writes, 'task-1');
  return saver.getTuple(config);
}

describe('StatefoldSaver reviving stored values', () => {
  it('gives what JsonPlusSerializer gives for the JSON text, class for class', async () => {
    const writes: PendingWrite[] = [
      ['messages', [new AIMessage({ id: 'w1', content: 'written' })]],
      ['set', new Set(['w'])],
    ];
    const fast = await roundTrip(new StatefoldSaver({ store: new MemoryStore() }), tricky(), writes);
    const text = await roundTrip(
      new StatefoldSaver({ store: new MemoryStore(), serde: new TextSerializer() }),
      tricky(),
      writes,
    );
    const memory = await roundTrip(new MemorySaver(), tricky(), writes);
    for (const other of [text, memory]) {
      // (isDeepStrictEqual compares prototypes too: a message is the same class.)
      for (const [channel, value] of Object.entries(other!.checkpoint.channel_values))
        expect(isDeepStrictEqual(fast!.checkpoint.channel_values[channel], value), channel).toBe(true);
      expect(isDeepStrictEqual(fast!.metadata, other!.metadata)).toBe(true);
      expect(isDeepStrictEqual(fast!.pendingWrites, other!.pendingWrites)).toBe(true);
    }
    const messages = fast!.checkpoint.channel_values.messages as unknown[];
    expect(messages.map((m) => (m as object).constructor.name)).toEqual([
      'HumanMessage',
      'AIMessage',
      'ToolMessage',
      'ToolMessage',
      'AIMessage',
      'AIMessage',
    ]);
    // (The serializer revives what is inside a message before loading it from its JSON: an
    // undefined value is left out, or null in an array; a Set is written out as {}. So here too.)
    expect((messages[3] as ToolMessage).artifact).toBeUndefined();
    expect((messages[4] as AIMessage).additional_kwargs).toEqual({ list: [null, 1, {}], nested: { v: 2 } });
    expect((messages[5] as AIMessage).additional_kwargs.seen).toEqual({});
    expect(Object.is(fast!.checkpoint.channel_values.negativeZero, 0)).toBe(true);
    expect(fast!.checkpoint.channel_values.set).toEqual(new Set([1, 2]));
    expect((fast!.checkpoint.channel_values.undef as object) ?? null).toEqual({ a: undefined, b: [undefined, 1] });
  });

  it('gives back new objects each read: changing one does not change the next', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    const tuple = await roundTrip(saver, tricky(), []);
    (tuple!.checkpoint.channel_values.plain as { a: { b: unknown } }).a.b = 'changed';
    (tuple!.checkpoint.channel_values.messages as unknown[]).pop();
    const again = await saver.getTuple({ configurable: { thread_id: 't', checkpoint_ns: '' } });
    expect(again!.checkpoint.channel_values.plain).toEqual({ a: { b: { c: [1, 'two', true, null] } } });
    expect(again!.checkpoint.channel_values.messages).toHaveLength(6);
  });

  it('fails on a LangChain object it may not load, as the serializer does', async () => {
    const bad = { lc: 1, type: 'constructor', id: ['not', 'allowed'], kwargs: {} };
    const read = (saver: BaseCheckpointSaver) => roundTrip(saver, { bad }, []);
    const message = /Invalid namespace/;
    await expect(read(new StatefoldSaver({ store: new MemoryStore() }))).rejects.toThrow(message);
    await expect(read(new StatefoldSaver({ store: new MemoryStore(), serde: new TextSerializer() }))).rejects.toThrow(
      message,
    );
    await expect(read(new MemorySaver())).rejects.toThrow(message);
  });

  it('reads a __proto__ key as the serializer does', async () => {
    // Only JSON text makes an own __proto__ key: put through a serde that writes it.
    const json = '{"safe":{"__proto__":{"lc":2,"type":"undefined"},"x":1},"plain":{"__proto__":{"y":2}}}';
    class ProtoSerializer extends JsonPlusSerializer {
      override async dumpsTyped(value: unknown): Promise<[string, Uint8Array]> {
        return value === 'proto' ? ['json', new TextEncoder().encode(json)] : super.dumpsTyped(value);
      }
    }
    // Written by a subclass (its dumps), read back by the plain serializer (the fast way) and by the text way.
    const store = new MemoryStore();
    await roundTrip(new StatefoldSaver({ store, serde: new ProtoSerializer() }), { value: 'proto' }, []);
    const cfgT = { configurable: { thread_id: 't', checkpoint_ns: '' } };
    const fast = await new StatefoldSaver({ store }).getTuple(cfgT);
    const text = await new StatefoldSaver({ store, serde: new TextSerializer() }).getTuple(cfgT);
    const expected = (await new JsonPlusSerializer().loadsTyped('json', json)) as Record<string, object>;
    for (const tuple of [fast, text]) {
      const value = tuple!.checkpoint.channel_values.value as Record<string, object>;
      // (Its prototype set from data: compared by content, each read makes its own.)
      expect(JSON.stringify(value)).toBe(JSON.stringify(expected));
      expect(Object.getPrototypeOf(value.safe)).toBe(Object.prototype);
      expect({ ...Object.getPrototypeOf(value.plain) }).toEqual({ ...Object.getPrototypeOf(expected.plain) });
      expect(Object.getPrototypeOf(value.plain)).not.toBe(Object.prototype);
    }
  });
});
