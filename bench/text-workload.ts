/**
 * The headline workload: a coding agent whose tool results are real files. Text comes from the
 * files under `node_modules` (sorted by path, picked by a seeded generator, so a run is the same
 * wherever the same lockfile is installed), never from generated words that compress unusually well.
 *
 * State (nominal size S): a sliding context window of 60 messages (about 45% of S: the agent's
 * `read_file` calls and their results, each result a file cut at about S x 0.45 / 30 bytes), a
 * plan, a workspace of open files (the rest), remembered facts and counters.
 *
 * Per step:
 *   - the agent reads the next file: an assistant message with a tool call and a tool message with
 *     the file's text are pushed, and the two oldest messages are shifted out (the window);
 *   - about `change` (1%) of the leaves outside the window are changed in place: a line of an
 *     open file is replaced by a line of another file, plan notes are rewritten, facts are
 *     re-scored, counters bumped.
 * The same step applies in place (for `updates: 'copy'`) or immutably with structural sharing.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Rng, packedSize, type Step, type StepWorkload } from './workload.js';

const WINDOW = 60;
const STATUSES = ['todo', 'doing', 'done', 'blocked'] as const;
const TEXT_FILE = /\.(md|markdown|txt|ts|mts|cts|js|mjs|cjs|json)$/;

/** Files of text under node_modules, sorted by path (loaded once per process). */
let corpus: string[] | undefined;
function files(): string[] {
  if (corpus) return corpus;
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'node_modules');
  const found: string[] = [];
  for (const rel of readdirSync(root, { recursive: true, encoding: 'utf8' })) {
    if (!TEXT_FILE.test(rel) || rel.includes(`${path.sep}.`) || rel.startsWith('.')) continue;
    const full = path.join(root, rel);
    try {
      const st = statSync(full);
      if (st.isFile() && st.size >= 400) found.push(full);
    } catch {
      // a dangling link: not a file to read
    }
  }
  if (found.length < 100) throw new Error(`text workload: only ${found.length} text files under ${root}; run npm ci`);
  corpus = found.sort();
  return corpus;
}

/** File texts read so far (read once per process: the generator's own garbage should not land in what is measured). */
const texts = new Map<string, string>();

/** A message of the window. */
interface Message {
  id: string;
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  ts: number;
  tokens: number;
  toolCalls?: { id: string; name: string; args: { path: string; offset: number } }[];
  toolCallId?: string;
}

/** An open file of the workspace. */
interface OpenFile {
  path: string;
  text: string;
  edits: number;
  dirty: boolean;
}

/** The coding agent's state. */
export interface CodingState {
  id: string;
  task: string;
  messages: Message[];
  plan: { revision: number; steps: { id: string; title: string; status: string; notes: string }[] };
  workspace: OpenFile[];
  memory: { facts: { id: string; text: string; confidence: number }[] };
  counters: { steps: number; toolCalls: number; tokensIn: number; tokensOut: number; costMicroUsd: number };
}

type Key = string | number;

/** The coding agent's state and per-step changes for a nominal size, change fraction and seed. */
export class CodingWorkload implements StepWorkload {
  readonly name = 'coding';
  readonly #rng: Rng;
  readonly #files = files();
  #cursor: number;
  #msg = 0;
  #clock = Date.UTC(2026, 0, 1);
  readonly #resultBytes: number;
  readonly #change: number;
  /** Paths (outside the window) of the leaves an in-place change may replace. */
  #leaves: Key[][] = [];

  constructor(
    readonly size: number,
    change = 0.01,
    seed = 1,
  ) {
    this.#rng = new Rng(seed);
    this.#change = change;
    this.#cursor = this.#rng.int(this.#files.length);
    this.#resultBytes = Math.max(200, Math.round((size * 0.45) / (WINDOW / 2)));
  }

  /** Text of the next file in the corpus (after a seeded skip), cut at `max` characters on a line end. */
  #text(max: number): { file: string; text: string } {
    for (;;) {
      this.#cursor = (this.#cursor + 1 + this.#rng.int(7)) % this.#files.length;
      const file = this.#files[this.#cursor]!;
      let text = texts.get(file);
      if (text === undefined) {
        try {
          text = readFileSync(file, 'utf8');
        } catch {
          continue;
        }
        texts.set(file, text);
      }
      if (text.length > max) {
        const cut = text.lastIndexOf('\n', max);
        text = text.slice(0, cut > max / 2 ? cut : max);
      }
      if (text.length >= Math.min(200, max / 2)) return { file: file.slice(file.indexOf('node_modules')), text };
    }
  }

  /** One line of real text (a non-empty line of some file). */
  #line(): string {
    const lines = this.#text(4000)
      .text.split('\n')
      .filter((l) => l.trim().length > 8);
    return lines.length === 0 ? '// (empty)' : lines[this.#rng.int(lines.length)]!;
  }

  #tick(): number {
    this.#clock += 500 + this.#rng.int(4000);
    return this.#clock;
  }

  /** The two messages of one `read_file` call. */
  #read(): [Message, Message] {
    const { file, text } = this.#text(this.#resultBytes);
    const id = `m${++this.#msg}`;
    const call = `call_${this.#msg}`;
    const assistant: Message = {
      id,
      role: 'assistant',
      content: `Reading ${file} to see how it handles this.`,
      ts: this.#tick(),
      tokens: 40,
      toolCalls: [{ id: call, name: 'read_file', args: { path: file, offset: 0 } }],
    };
    const tool: Message = {
      id: `m${++this.#msg}`,
      role: 'tool',
      toolCallId: call,
      content: text,
      ts: this.#tick(),
      tokens: Math.round(text.length / 4),
    };
    return [assistant, tool];
  }

  initial(): CodingState {
    const messages: Message[] = [];
    while (messages.length < WINDOW) messages.push(...this.#read());
    const steps = [];
    for (let i = 0; i < 12; i++)
      steps.push({
        id: `p${i}`,
        title: this.#line(),
        status: STATUSES[i % 4]!,
        notes: this.#text(Math.max(200, this.size * 0.006)).text,
      });
    const facts = [];
    for (let i = 0; i < Math.max(4, Math.round((this.size * 0.05) / 120)); i++)
      facts.push({ id: `f${i}`, text: this.#line().slice(0, 160), confidence: this.#rng.int(1000) / 1000 });
    const state: CodingState = {
      id: 'coding-agent-1',
      task: this.#text(600).text,
      messages,
      plan: { revision: 1, steps },
      workspace: [],
      memory: { facts },
      counters: { steps: 0, toolCalls: 0, tokensIn: 0, tokensOut: 0, costMicroUsd: 0 },
    };
    // Open files fill the rest of the nominal size.
    let bytes = packedSize(state);
    while (bytes < this.size) {
      const { file, text } = this.#text(Math.max(400, Math.min(12_000, this.size - bytes)));
      state.workspace.push({ path: file, text, edits: 0, dirty: false });
      bytes += text.length + file.length + 24;
    }
    this.#leaves = leafPaths(state);
    return state;
  }

  next(): Step {
    const rng = this.#rng;
    const read = this.#read();
    const sets: { path: Key[]; value: unknown }[] = [];
    const pick = Math.max(1, Math.round(this.#leaves.length * this.#change));
    for (let i = 0; i < pick; i++) sets.push({ path: this.#leaves[rng.int(this.#leaves.length)]!, value: undefined });
    const tokensIn = 500 + rng.int(3000);
    const tokensOut = 50 + rng.int(800);
    const line = (): string => this.#line();
    return steps(read, sets, { tokensIn, tokensOut }, rng, line);
  }
}

/** Paths of the leaves outside the window that in-place changes may replace. */
function leafPaths(s: CodingState): Key[][] {
  const out: Key[][] = [];
  s.plan.steps.forEach((_, i) => out.push(['plan', 'steps', i, 'notes'], ['plan', 'steps', i, 'status']));
  s.workspace.forEach((_, i) => out.push(['workspace', i, 'text'], ['workspace', i, 'edits']));
  s.memory.facts.forEach((_, i) => out.push(['memory', 'facts', i, 'confidence'], ['memory', 'facts', i, 'text']));
  return out;
}

/** The step's changes, computed once (same values for both styles) and applied either way. */
function steps(
  read: [Message, Message],
  sets: { path: Key[]; value: unknown }[],
  usage: { tokensIn: number; tokensOut: number },
  rng: Rng,
  line: () => string,
): Step {
  // Draw each change's new value now, from the generator, so both styles see the same values.
  const drawn = sets.map((s) => {
    const leaf = s.path[s.path.length - 1];
    if (leaf === 'text' && s.path[0] === 'workspace')
      return { ...s, kind: 'line' as const, n: rng.next(), line: line() };
    if (leaf === 'notes' || leaf === 'text') return { ...s, kind: 'set' as const, value: line() };
    if (leaf === 'status') return { ...s, kind: 'set' as const, value: STATUSES[rng.int(4)] };
    if (leaf === 'confidence') return { ...s, kind: 'set' as const, value: rng.int(1000) / 1000 };
    return { ...s, kind: 'inc' as const };
  });
  // What the step added: the two messages, each new value (for an edited line, the line), six counters.
  // Counted when asked (msgpack of the new values): the many-streams run never asks, and the
  // harness's own bookkeeping should not load the process it measures.
  let addedBytes: number | undefined;
  const added = (): number => {
    if (addedBytes !== undefined) return addedBytes;
    addedBytes = packedSize(read) + 6 * 9;
    for (const d of drawn)
      addedBytes += d.kind === 'line' ? Buffer.byteLength(d.line) + 1 : d.kind === 'set' ? packedSize(d.value) : 9;
    return addedBytes;
  };
  const valueFor = (d: (typeof drawn)[number], old: unknown): unknown => {
    if (d.kind === 'set') return d.value;
    if (d.kind === 'inc') return (old as number) + 1;
    // Replace one line of the file's text.
    const text = old as string;
    const lines = text.split('\n');
    lines[Math.floor(d.n * lines.length)] = d.line;
    return lines.join('\n');
  };
  const bump = (c: CodingState['counters']): CodingState['counters'] => ({
    steps: c.steps + 1,
    toolCalls: c.toolCalls + 1,
    tokensIn: c.tokensIn + usage.tokensIn,
    tokensOut: c.tokensOut + usage.tokensOut,
    costMicroUsd: c.costMicroUsd + usage.tokensIn * 3 + usage.tokensOut * 15,
  });
  return {
    get addedBytes() {
      return added();
    },
    inPlace(state) {
      const s = state as CodingState;
      s.messages.push(structuredClone(read[0]), structuredClone(read[1]));
      while (s.messages.length > WINDOW) s.messages.shift();
      for (const d of drawn) {
        let node = s as unknown as Record<Key, unknown>;
        for (const k of d.path.slice(0, -1)) node = node[k] as Record<Key, unknown>;
        const k = d.path[d.path.length - 1]!;
        node[k] = valueFor(d, node[k]);
      }
      Object.assign(s.counters, bump(s.counters));
      s.plan.revision++;
      return s;
    },
    immutable(state) {
      let s = state as CodingState;
      const messages = [...s.messages, structuredClone(read[0]), structuredClone(read[1])];
      s = { ...s, messages: messages.slice(Math.max(0, messages.length - WINDOW)) };
      for (const d of drawn) s = setIn(s, d.path, (old) => valueFor(d, old)) as CodingState;
      return { ...s, counters: bump(s.counters), plan: { ...s.plan, revision: s.plan.revision + 1 } };
    },
  };
}

/** A copy of `root` with the leaf at `path` replaced, sharing everything off the path. */
function setIn(root: unknown, keys: Key[], f: (old: unknown) => unknown): unknown {
  if (keys.length === 0) return f(root);
  const [k, ...rest] = keys;
  if (Array.isArray(root)) {
    const copy = root.slice();
    copy[k as number] = setIn(root[k as number], rest, f);
    return copy;
  }
  const obj = root as Record<Key, unknown>;
  return { ...obj, [k!]: setIn(obj[k!], rest, f) };
}
