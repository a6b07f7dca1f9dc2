import { END, MessagesDeltaValue, START, StateGraph, StateSchema } from '@langchain/langgraph';
import { AIMessage, HumanMessage, RemoveMessage, type BaseMessage } from '@langchain/core/messages';
import { MemorySaver, type BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { describe, expect, it } from 'vitest';
import { FileStore, MemoryStore } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { tempDir } from '../support/stores.js';

// LangGraph's DeltaChannel (beta) stores a channel as its writes plus a snapshot every N updates,
// and rebuilds it on read by walking the parents' pending writes (getDeltaChannelHistory, which
// StatefoldSaver inherits). Checkpoints, writes and parents must read back so that it rebuilds
// exactly what MemorySaver's rebuild gives, from a new saver too.

/** A loop that appends one message per step and, past 6, removes the oldest answer. */
function chat(checkpointer: BaseCheckpointSaver, steps: number) {
  let i = 0;
  return new StateGraph(new StateSchema({ messages: MessagesDeltaValue }))
    .addNode('model', async (s: { messages: BaseMessage[] }) => ({
      messages: [
        ...(s.messages.length > 6 ? [new RemoveMessage({ id: s.messages[1]!.id! })] : []),
        new AIMessage({ id: `a${i}`, content: `answer ${i++} `.repeat(20) }),
      ],
    }))
    .addEdge(START, 'model')
    .addConditionalEdges('model', () => (i < steps ? 'model' : END))
    .compile({ checkpointer });
}

/** The graph run on `first`, then what a graph on `reader` sees: the newest state and states across the history. */
async function runAndRead(first: BaseCheckpointSaver, reader: BaseCheckpointSaver) {
  const config = { configurable: { thread_id: 't' }, recursionLimit: 300 };
  const out = await chat(first, 110).invoke(
    { messages: [new HumanMessage({ id: 'q', content: 'go' })] },
    { ...config, durability: 'sync' },
  );
  const graph = chat(reader, 0);
  const ids = (ms: BaseMessage[] | undefined) => (ms ?? []).map((m) => `${m.id}:${String(m.content).length}`);
  const all: string[] = [];
  for await (const t of reader.list(config)) all.push(t.checkpoint.id);
  // Newest first: the newest, a few before it, some either side of the snapshot, the first ones.
  const picked = [0, 1, 2, 7, 40, 99, 100, 101, 105, all.length - 2, all.length - 1];
  const states: string[][] = [];
  for (const at of picked) {
    const snapshot = await graph.getState({ configurable: { thread_id: 't', checkpoint_id: all[at]! } });
    states.push(ids(snapshot.values.messages));
  }
  return {
    out: ids(out.messages),
    latest: ids((await graph.getState(config)).values.messages),
    count: all.length,
    states,
  };
}

describe('StatefoldSaver with a DeltaChannel (MessagesDeltaValue)', () => {
  it('rebuilds the newest checkpoint and older ones as MemorySaver does, from a new saver, across a snapshot', async () => {
    const memory = new MemorySaver();
    const expected = await runAndRead(memory, memory);
    expect(expected.latest).toEqual(expected.out);
    expect(expected.count).toBeGreaterThan(110); // past the channel's snapshot every 100 updates
    expect(new Set(expected.states.map((s) => s.join())).size).toBeGreaterThan(5);
    const dir = await tempDir();
    for (const store of [new MemoryStore(), new FileStore({ dir })]) {
      const got = await runAndRead(new StatefoldSaver({ store }), new StatefoldSaver({ store }));
      expect(got).toEqual(expected);
    }
  });
});
