/**
 * The benchmark workload: a seeded, realistic agent state (messages with tool calls and results,
 * a plan, retrieved documents with Float32Array embeddings, remembered facts, counters) of a
 * chosen size, and a per-step change pattern applied two ways: in place (for `updates: 'copy'`
 * and hand-rolled mirrors) and immutably with structural sharing (for `updates: 'immutable'`).
 *
 * Both appliers consume the same `Change` objects, so both modes see the same logical states.
 *
 * Per step (defaults, as fractions of the nominal state size S, with `change` = 1%):
 *   - append one message (assistant with a tool call, tool result, or user), ~0.6 x change x S
 *   - edit the plan: rewrite one step's notes (~0.3 x change x S), move its status, bump revision
 *   - bump the counters
 * Left alone, appending would grow the state without bound (tripling a 500 KB state in a few
 * hundred steps), so the conversation is compacted as agents do when their context fills: once
 * it holds twice its initial number of messages, the older half is replaced by one summary
 * message. That happens every ~n0 steps (n0 ~ 75 initial messages), so the state stays between
 * S and ~1.45 S.
 */
import { pack } from 'msgpackr';

/** One message of the conversation. */
export interface Message {
  id: string;
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  ts: number;
  tokens: number;
  toolCalls?: { id: string; name: string; args: Record<string, string | number | boolean> }[];
  toolCallId?: string;
}

/** One step of the plan. */
export interface PlanStep {
  id: string;
  title: string;
  status: 'todo' | 'doing' | 'done' | 'blocked';
  notes: string;
}

/** A retrieved document with its embedding. */
export interface Doc {
  id: string;
  source: string;
  title: string;
  score: number;
  text: string;
  embedding: Float32Array;
}

/** The agent state checkpointed by every scenario. */
export interface AgentState {
  id: string;
  startedAt: number;
  messages: Message[];
  plan: { goal: string; revision: number; steps: PlanStep[] };
  documents: Doc[];
  memory: { facts: { id: string; text: string; confidence: number }[] };
  counters: {
    steps: number;
    llmCalls: number;
    toolCalls: number;
    tokensIn: number;
    tokensOut: number;
    errors: number;
    costMicroUsd: number;
  };
}

/** One step of a workload: what it adds, applied in place or immutably (same logical state either way). */
export interface Step {
  /** msgpack bytes of what the step put into the state (new messages, new values; for an edited line, the line). */
  addedBytes: number;
  inPlace(state: object): object;
  immutable(state: object): object;
}

/** A seeded state generator: an initial state and a stream of steps. */
export interface StepWorkload {
  readonly name: WorkloadName;
  readonly size: number;
  initial(): object;
  next(): Step;
}

/** The workloads: real text (the headline), and the generated state with embeddings. */
export type WorkloadName = 'coding' | 'embeddings';

/** A small, fast, seeded PRNG (mulberry32). */
export class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.#s += 0x6d2b79f5);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

const SYLLABLES = [
  'ka',
  'lo',
  'mi',
  'ne',
  'ru',
  'ta',
  'vo',
  'si',
  'de',
  'pa',
  'gri',
  'son',
  'tel',
  'quo',
  'ber',
  'an',
  'ex',
  'ul',
  'ion',
  'ment',
  'ing',
  'er',
  'al',
  'st',
];
const TOOLS = ['web_search', 'read_file', 'run_python', 'sql_query', 'fetch_url', 'write_file', 'vector_search'];
const STATUSES: PlanStep['status'][] = ['todo', 'doing', 'done', 'blocked'];
const EMBEDDING_DIMS = 256;

/** Words of a seeded vocabulary, picked with a skew towards frequent ones, as natural text is. */
class Text {
  readonly #words: string[] = [];
  constructor(readonly rng: Rng) {
    for (let i = 0; i < 4096; i++) {
      let w = '';
      const n = 1 + rng.int(3);
      for (let j = 0; j < n; j++) w += rng.pick(SYLLABLES);
      this.#words.push(w);
    }
  }
  /** About `bytes` bytes of sentence-like text. */
  of(bytes: number): string {
    const parts: string[] = [];
    let n = 0;
    let sentence = 0;
    while (n < bytes) {
      const r = this.rng.next();
      let w = this.#words[Math.floor(r * r * r * this.#words.length)]!;
      if (sentence === 0) w = w[0]!.toUpperCase() + w.slice(1);
      sentence++;
      if (sentence > 6 && this.rng.next() < 0.15) {
        w += '.';
        sentence = 0;
      }
      parts.push(w);
      n += w.length + 1;
    }
    return parts.join(' ');
  }
}

/** Sizes that define a workload, derived from the nominal state size and change fraction. */
export interface WorkloadShape {
  /** Nominal msgpack size of the state, bytes. */
  size: number;
  /** Fraction of the state changed per step. */
  change: number;
  /** Bytes of the message appended per step. */
  messageBytes: number;
  /** Bytes of the plan notes rewritten per step. */
  notesBytes: number;
  /** Initial number of messages; compaction at twice this. */
  initialMessages: number;
}

export function shapeOf(size: number, change: number): WorkloadShape {
  const budget = size * change;
  const messageBytes = Math.max(60, Math.round(budget * 0.6));
  const notesBytes = Math.max(30, Math.round(budget * 0.3));
  // Messages hold ~45% of the state; at ~0.6% of S each that is ~75 of them.
  const initialMessages = Math.max(8, Math.round((size * 0.45) / messageBytes));
  return { size, change, messageBytes, notesBytes, initialMessages };
}

/** Generates the initial state of a workload and the stream of per-step changes. */
export class Workload implements StepWorkload {
  readonly name = 'embeddings';
  readonly size: number;
  readonly shape: WorkloadShape;
  readonly #rng: Rng;
  readonly #text: Text;
  #step = 0;
  #msgId = 0;
  #messages: number;
  #clock = Date.UTC(2026, 0, 1);

  constructor(size: number, change = 0.01, seed = 1) {
    this.size = size;
    this.shape = shapeOf(size, change);
    this.#rng = new Rng(seed);
    this.#text = new Text(this.#rng);
    this.#messages = 0;
  }

  /** A fresh initial state of about the nominal size (fresh objects: never shared). */
  initial(): AgentState {
    const { size, messageBytes, initialMessages } = this.shape;
    const rng = this.#rng;
    const messages: Message[] = [
      { id: 'm0', role: 'system', content: this.#text.of(Math.min(2000, size * 0.01)), ts: this.#tick(), tokens: 400 },
    ];
    for (let i = 1; i < initialMessages; i++) messages.push(this.#message(messageBytes * (0.5 + rng.next())));
    this.#messages = messages.length;
    const steps: PlanStep[] = [];
    const planSteps = 12;
    for (let i = 0; i < planSteps; i++) {
      steps.push({
        id: `p${i}`,
        title: this.#text.of(40),
        status: rng.pick(STATUSES),
        notes: this.#text.of((size * 0.1) / planSteps),
      });
    }
    // Documents: ~35% of the state, ~4 KB each (1 KB embedding + text).
    const documents: Doc[] = [];
    const docBytes = 4096;
    const docs = Math.max(2, Math.round((size * 0.35) / docBytes));
    for (let i = 0; i < docs; i++) documents.push(this.#doc(i, docBytes - EMBEDDING_DIMS * 4 - 120));
    const facts: AgentState['memory']['facts'] = [];
    const factBytes = 160;
    for (let i = 0; i < Math.max(2, Math.round((size * 0.1) / factBytes)); i++)
      facts.push({
        id: `f${i}`,
        text: this.#text.of(factBytes - 30),
        confidence: Math.round(rng.next() * 1000) / 1000,
      });
    return {
      id: 'agent-7f3a',
      startedAt: this.#clock,
      messages,
      plan: { goal: this.#text.of(200), revision: 1, steps },
      documents,
      memory: { facts },
      counters: { steps: 0, llmCalls: 0, toolCalls: 0, tokensIn: 0, tokensOut: 0, errors: 0, costMicroUsd: 0 },
    };
  }

  /** The next step. */
  next(): Step {
    const c = this.change();
    let addedBytes = packedSize(c.message) + packedSize(c.notes) + 8 * 9;
    if (c.compact) addedBytes += packedSize(c.compact);
    return {
      addedBytes,
      inPlace: (s) => applyInPlace(s as AgentState, c),
      immutable: (s) => applyImmutable(s as AgentState, c),
    };
  }

  /** The next step's change. Deterministic for a seed; independent of how it is applied. */
  change(): Change {
    const rng = this.#rng;
    this.#step++;
    const message = this.#message(this.shape.messageBytes);
    this.#messages++;
    let compact: Message | undefined;
    if (this.#messages > 2 * this.shape.initialMessages) {
      compact = {
        id: `s${this.#step}`,
        role: 'system',
        content: 'Summary of earlier conversation: ' + this.#text.of(this.shape.messageBytes),
        ts: message.ts,
        tokens: 300,
      };
      this.#messages = this.shape.initialMessages;
    }
    const tokensIn = 500 + rng.int(3000);
    const tokensOut = 50 + rng.int(800);
    return {
      message,
      compact,
      keepMessages: this.shape.initialMessages - 1,
      planStep: rng.int(12),
      status: rng.pick(STATUSES),
      notes: this.#text.of(this.shape.notesBytes),
      counters: {
        llmCalls: 1,
        toolCalls: message.toolCalls ? 1 : 0,
        tokensIn,
        tokensOut,
        errors: rng.next() < 0.02 ? 1 : 0,
        costMicroUsd: tokensIn * 3 + tokensOut * 15,
      },
    };
  }

  #tick(): number {
    this.#clock += 500 + this.#rng.int(4000);
    return this.#clock;
  }

  #message(bytes: number): Message {
    const rng = this.#rng;
    const id = `m${++this.#msgId}`;
    const kind = rng.int(3);
    const ts = this.#tick();
    if (kind === 0) {
      return {
        id,
        role: 'assistant',
        content: this.#text.of(bytes * 0.6),
        ts,
        tokens: Math.round(bytes / 4),
        toolCalls: [
          {
            id: `call_${id}`,
            name: rng.pick(TOOLS),
            args: { query: this.#text.of(bytes * 0.3), limit: 1 + rng.int(20), strict: rng.next() < 0.5 },
          },
        ],
      };
    }
    if (kind === 1)
      return {
        id,
        role: 'tool',
        toolCallId: `call_m${this.#msgId - 1}`,
        content: this.#text.of(bytes),
        ts,
        tokens: Math.round(bytes / 4),
      };
    return { id, role: 'user', content: this.#text.of(bytes), ts, tokens: Math.round(bytes / 4) };
  }

  #doc(i: number, textBytes: number): Doc {
    const rng = this.#rng;
    const embedding = new Float32Array(EMBEDDING_DIMS);
    for (let d = 0; d < EMBEDDING_DIMS; d++) embedding[d] = (rng.next() + rng.next() + rng.next() - 1.5) * 0.8;
    return {
      id: `d${i}`,
      source: `https://docs.example.com/${this.#text.of(20).replace(/\W+/g, '-')}`,
      title: this.#text.of(50),
      score: Math.round(rng.next() * 1e4) / 1e4,
      text: this.#text.of(textBytes),
      embedding,
    };
  }
}

/** One step's change, applied by `applyInPlace` or `applyImmutable`. */
export interface Change {
  message: Message;
  /** When set, the conversation is compacted: this summary, then the newest `keepMessages` messages. */
  compact: Message | undefined;
  keepMessages: number;
  planStep: number;
  status: PlanStep['status'];
  notes: string;
  counters: Omit<AgentState['counters'], 'steps'>;
}

/** Applies a change by mutating the state in place (new objects only for what is new). */
export function applyInPlace(s: AgentState, c: Change): AgentState {
  s.messages.push(structuredCloneMessage(c.message));
  if (c.compact) s.messages.splice(0, s.messages.length - c.keepMessages, structuredCloneMessage(c.compact));
  const step = s.plan.steps[c.planStep]!;
  step.notes = c.notes;
  step.status = c.status;
  s.plan.revision++;
  const k = s.counters;
  k.steps++;
  k.llmCalls += c.counters.llmCalls;
  k.toolCalls += c.counters.toolCalls;
  k.tokensIn += c.counters.tokensIn;
  k.tokensOut += c.counters.tokensOut;
  k.errors += c.counters.errors;
  k.costMicroUsd += c.counters.costMicroUsd;
  return s;
}

/** Applies a change immutably: new objects along every changed path, everything else shared. */
export function applyImmutable(s: AgentState, c: Change): AgentState {
  let messages = [...s.messages, structuredCloneMessage(c.message)];
  if (c.compact) messages = [structuredCloneMessage(c.compact), ...messages.slice(messages.length - c.keepMessages)];
  const steps = s.plan.steps.slice();
  steps[c.planStep] = { ...steps[c.planStep]!, notes: c.notes, status: c.status };
  const k = s.counters;
  return {
    ...s,
    messages,
    plan: { ...s.plan, revision: s.plan.revision + 1, steps },
    counters: {
      steps: k.steps + 1,
      llmCalls: k.llmCalls + c.counters.llmCalls,
      toolCalls: k.toolCalls + c.counters.toolCalls,
      tokensIn: k.tokensIn + c.counters.tokensIn,
      tokensOut: k.tokensOut + c.counters.tokensOut,
      errors: k.errors + c.counters.errors,
      costMicroUsd: k.costMicroUsd + c.counters.costMicroUsd,
    },
  };
}

/** A message object of its own (the two appliers must not share the change's objects). */
function structuredCloneMessage(m: Message): Message {
  const out: Message = { ...m };
  if (m.toolCalls) out.toolCalls = m.toolCalls.map((t) => ({ ...t, args: { ...t.args } }));
  return out;
}

/** A workload's state and step stream in one of the two update styles. */
export class Agent {
  state: object;
  /** Bytes the steps so far added (see Step.addedBytes). */
  addedBytes = 0;
  constructor(
    readonly style: 'mutable' | 'immutable',
    readonly workload: StepWorkload,
    /** Whether to count addedBytes (the many-streams run does not read it). */
    readonly countBytes = true,
  ) {
    this.state = this.workload.initial();
  }
  /** Advances one step. */
  step(): object {
    const step = this.workload.next();
    if (this.countBytes) this.addedBytes += step.addedBytes;
    this.state = this.style === 'mutable' ? step.inPlace(this.state) : step.immutable(this.state);
    return this.state;
  }
}

/** msgpack size of a value (how state sizes are reported). */
export function packedSize(v: unknown): number {
  return pack(v).byteLength;
}
