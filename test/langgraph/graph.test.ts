import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import type { RunnableConfig } from '@langchain/core/runnables';
import { MemorySaver } from '@langchain/langgraph-checkpoint';
import { afterAll, describe, expect, it } from 'vitest';
import { diffCheckpoints, FileStore, listCheckpoints, MemoryStore, type CheckpointEntry } from 'statefold';
import { StatefoldSaver } from 'statefold/langgraph';
import { buildGraph, outcome, QUESTION } from '../support/langgraph-agent.mjs';

// A real LangGraph graph (messages + tool node, fake model reading real files): killed with
// SIGKILL mid-run and resumed by a new process, it must end where an uninterrupted run ends.
const AGENT = fileURLToPath(new URL('../support/langgraph-agent.mjs', import.meta.url));
const FILES = 8;
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function uninterrupted(checkpointer: unknown): Promise<unknown> {
  const graph = buildGraph(checkpointer, { files: FILES });
  const config = { configurable: { thread_id: 'reference' } };
  const final = await graph.invoke({ messages: [QUESTION] }, config);
  return outcome(final.messages);
}

/** Runs the agent in a child process; SIGKILLs it once it has printed `killAfter` updates. */
function life(
  dir: string,
  killAfter: number | undefined,
): Promise<{ updates: number; done?: unknown; signal: string | null }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [AGENT, dir, 'thread-1', String(FILES), '40'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let updates = 0;
    let done: unknown;
    let partial = '';
    let stderr = '';
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      partial += chunk;
      for (let nl = partial.indexOf('\n'); nl >= 0; nl = partial.indexOf('\n')) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        if (line.startsWith('update ') && ++updates === killAfter) proc.kill('SIGKILL');
        if (line.startsWith('done ')) done = JSON.parse(line.slice(5));
      }
    });
    proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    proc.on('error', reject);
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal === null && code !== 0) reject(new Error(`agent exited ${code}: ${stderr}`));
      else resolve({ updates, done, signal });
    });
  });
}

describe('StatefoldSaver under a real LangGraph graph', () => {
  it('ends as MemorySaver does, uninterrupted', async () => {
    const expected = await uninterrupted(new MemorySaver());
    expect(await uninterrupted(new StatefoldSaver({ store: new MemoryStore() }))).toEqual(expected);
    expect((expected as unknown[]).length).toBe(2 + 2 * FILES);
  });

  it('time travel: replays and forks from a past checkpoint as MemorySaver does', async () => {
    async function fork(checkpointer: unknown) {
      const graph = buildGraph(checkpointer, { files: 3 });
      const config = { configurable: { thread_id: 'fork' } };
      await graph.invoke({ messages: [QUESTION] }, config);
      const history = [];
      for await (const s of graph.getStateHistory(config)) history.push(s);
      // Back to the state after the first file was read, with a new question added there.
      const past = history.find((s) => s.values.messages?.length === 3)!;
      const forked = await graph.updateState(past.config, {
        messages: [new HumanMessage({ id: 'follow-up', content: 'Read one more.' })],
      });
      const final = await graph.invoke(null, forked);
      const after: number[] = [];
      for await (const s of graph.getStateHistory(config)) after.push(s.values.messages?.length ?? 0);
      const replayed = await graph.getState(past.config);
      return {
        final: outcome(final.messages),
        after,
        replayed: outcome(replayed.values.messages),
        parent:
          (await graph.getState(forked)).parentConfig?.configurable?.checkpoint_id ===
          past.config.configurable.checkpoint_id,
      };
    }
    const expected = await fork(new MemorySaver());
    expect(expected.parent).toBe(true);
    expect(await fork(new StatefoldSaver({ store: new MemoryStore() }))).toEqual(expected);
  });

  it('an effect in a graph node runs once: a replay of the node gets the recorded result', async () => {
    const saver = new StatefoldSaver({ store: new MemoryStore() });
    let charges = 0;
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('pay', async (_state: unknown, config: RunnableConfig) => {
        // The token names the order, not the run: a replay of this node must not charge again.
        const receipt = await saver.effect(config, 'charge:order-7', () => ({ id: `ch_${++charges}`, amount: 42 }));
        return { messages: [new AIMessage({ id: 'paid', content: `paid ${receipt.id}` })] };
      })
      .addEdge(START, 'pay')
      .addEdge('pay', END)
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'order-7' } };
    await graph.invoke({ messages: [QUESTION] }, config);
    const history = [];
    for await (const s of graph.getStateHistory(config)) history.push(s);
    const beforePay = history.find((s) => s.next.includes('pay'))!;
    const replay = await graph.invoke(null, beforePay.config);
    expect(replay.messages.at(-1)?.content).toBe('paid ch_1');
    // A new saver (a restarted process) finds the ledger in the store.
    const restarted = new StatefoldSaver({ store: saver.store });
    expect(await restarted.effect(config, 'charge:order-7', () => ({ id: 'never', amount: 0 }))).toEqual({
      id: 'ch_1',
      amount: 42,
    });
    expect(charges).toBe(1);
    await saver.close();
    await restarted.close();
  });

  it('killed with SIGKILL mid-run and resumed by new processes, ends as an uninterrupted run', async () => {
    const expected = await uninterrupted(new MemorySaver());
    const dir = mkdtempSync(join(tmpdir(), 'statefold-lg-kill-'));
    dirs.push(dir);
    const first = await life(dir, 5);
    expect(first.signal).toBe('SIGKILL');
    expect(first.done).toBeUndefined();
    const second = await life(dir, 4);
    expect(second, 'the second life was killed before it finished').toMatchObject({ signal: 'SIGKILL' });
    const last = await life(dir, undefined);
    expect(last.done).toEqual(expected);

    // The messages are stored as deltas: a checkpoint that adds a message adds that one message.
    const store = new FileStore({ dir });
    const stream = 'langgraph/["thread-1",""]';
    const entries = (await listCheckpoints(store, stream)).filter((e): e is CheckpointEntry => !e.damaged);
    let adds = 0;
    const wholeList: string[] = [];
    for (let i = 1; i < entries.length; i++) {
      const [a, b] = [entries[i - 1]!, entries[i]!];
      if (b.kind !== 'delta') continue;
      for (const op of await diffCheckpoints(store, stream, a.seq, b.seq)) {
        // The list is stored whole only when it appears (holding the question alone), never again.
        const list = op.path.endsWith('/j')
          ? (op as { value?: unknown }).value
          : (op as { value?: { j?: unknown } }).value?.j;
        const whole = /^\/cp\/channel_values\/messages(\/j)?$/.test(op.path);
        if (whole && !(op.op === 'add' && Array.isArray(list) && list.length <= 1))
          wholeList.push(`${a.seq}->${b.seq} ${op.op} ${op.path} (${Array.isArray(list) ? list.length : '?'} items)`);
        if (op.op === 'add' && /^\/cp\/channel_values\/messages\/j\/\d+$/.test(op.path)) adds++;
      }
    }
    expect(wholeList).toEqual([]);
    expect(adds).toBeGreaterThanOrEqual(FILES);
  }, 120_000);
});
