// A real LangGraph graph for the saver tests: a coding agent whose `read_file` tool returns real
// files from node_modules, driven by a fake model that asks for the next file until it has read
// `files` of them, then answers. Everything it does is a function of the state it resumes from,
// so a run killed and resumed must end where an uninterrupted run ends.
//   node langgraph-agent.mjs <dir> <thread> <files> <delayMs>   (prints `update <n>` per step)
import { setTimeout as sleep } from 'node:timers/promises';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'node_modules');
/** Real files the agent reads, in order. */
export const FILES = [
  'fast-json-patch/README.md',
  'msgpackr/README.md',
  'lz4/README.md',
  'typescript/README.md',
  'cli-progress/README.md',
  'sorted-btree/readme.md',
  'zod/README.md',
  'argparse/README.md',
  'chai/README.md',
  'bowser/README.md',
];

export function buildGraph(checkpointer, { files = FILES.length, delayMs = 0 } = {}) {
  const readFile = tool(
    async ({ path }) => {
      if (delayMs > 0) await sleep(delayMs);
      return readFileSync(join(root, path), 'utf8');
    },
    { name: 'read_file', description: 'Reads a file', schema: z.object({ path: z.string() }) },
  );
  const model = async (state) => {
    const read = state.messages.filter((m) => m.getType() === 'tool').length;
    if (read >= files) {
      return { messages: [new AIMessage({ id: `answer-${read}`, content: `Read ${read} files.` })] };
    }
    const path = FILES[read % FILES.length];
    return {
      messages: [
        new AIMessage({
          id: `call-${read}`,
          content: `Reading ${path}`,
          tool_calls: [{ id: `tc-${read}`, name: 'read_file', args: { path } }],
        }),
      ],
    };
  };
  return new StateGraph(MessagesAnnotation)
    .addNode('model', model)
    .addNode('tools', new ToolNode([readFile]))
    .addEdge(START, 'model')
    .addConditionalEdges('model', (s) => (s.messages.at(-1)?.tool_calls?.length ? 'tools' : END))
    .addEdge('tools', 'model')
    .compile({ checkpointer });
}

/** What a run ends with, comparable across runs (LangGraph gives tool messages random ids). */
export function outcome(messages) {
  return messages.map((m) => ({ type: m.getType(), content: m.content, tool_call_id: m.tool_call_id ?? null }));
}

export const QUESTION = new HumanMessage({ id: 'question', content: 'Summarize the READMEs.' });

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [dir, thread, files, delayMs] = process.argv.slice(2);
  const { FileStore } = await import('statefold');
  const { StatefoldSaver } = await import('statefold/langgraph');
  const saver = new StatefoldSaver({ store: new FileStore({ dir }) });
  const graph = buildGraph(saver, { files: Number(files), delayMs: Number(delayMs) });
  const config = { configurable: { thread_id: thread } };
  const started = await saver.getTuple(config);
  // A new thread starts with the question; one found in the store resumes where it stopped.
  const input = started === undefined ? { messages: [QUESTION] } : null;
  let n = 0;
  for await (const _ of await graph.stream(input, { ...config, streamMode: 'updates' })) {
    process.stdout.write(`update ${++n}\n`);
  }
  const final = await graph.getState(config);
  await saver.close();
  process.stdout.write(`done ${JSON.stringify(outcome(final.values.messages))}\n`);
}
