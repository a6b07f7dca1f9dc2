/**
 * Runs LangGraph's own checkpointer validation suite (@langchain/langgraph-checkpoint-validation)
 * against a StatefoldSaver. The suite is written for vitest with globals; this hands it vitest's
 * functions as globals before loading it. Each checkpointer it asks for gets a fresh store (the
 * list tests count every thread a checkpointer can see).
 */
import * as vitest from 'vitest';
import type { Store } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';

for (const name of ['describe', 'it', 'test', 'expect', 'beforeAll', 'afterAll', 'beforeEach', 'afterEach'] as const) {
  (globalThis as Record<string, unknown>)[name] = vitest[name];
}
const { validate } = await import('@langchain/langgraph-checkpoint-validation');

export function validateSaver(name: string, freshStore: () => Store | Promise<Store>): void {
  validate<StatefoldSaver>({
    checkpointerName: `StatefoldSaver (${name})`,
    createCheckpointer: async () => new StatefoldSaver({ store: await freshStore() }),
    destroyCheckpointer: async (saver) => {
      await saver?.close();
    },
  });
}
