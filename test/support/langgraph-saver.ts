// Checkpoints, configs and threads for StatefoldSaver tests, written as LangGraph would put them.
import { emptyCheckpoint, uuid6, type Checkpoint } from '@langchain/langgraph-checkpoint';
import type { StatefoldSaver } from 'statefold/langgraph';

export function checkpointOf(id: string, step: number, messages: string[]): Checkpoint {
  return {
    ...emptyCheckpoint(),
    id,
    channel_values: { messages, step },
    channel_versions: { messages: step + 1, step: step + 1 },
  };
}

/** Puts `n` checkpoints on one thread, each adding a message; returns their ids. */
export async function thread(saver: StatefoldSaver, threadId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  const messages: string[] = [];
  let config = { configurable: { thread_id: threadId, checkpoint_ns: '' } } as Record<string, any>;
  for (let step = 0; step < n; step++) {
    const id = uuid6(step);
    messages.push(`message ${step} `.repeat(20));
    config = await saver.put(
      config,
      checkpointOf(id, step, [...messages]),
      { source: 'loop', step, parents: {} },
      {
        messages: step + 1,
        step: step + 1,
      },
    );
    ids.push(id);
  }
  return ids;
}

export const cfg = (thread_id: string, checkpoint_id?: string) => ({
  configurable: { thread_id, checkpoint_ns: '', ...(checkpoint_id ? { checkpoint_id } : {}) },
});
