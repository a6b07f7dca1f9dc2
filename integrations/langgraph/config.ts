/** The saver's options, and the RunnableConfig fields each call needs, with INVALID_ARGUMENT errors that say which. */
import type { RunnableConfig } from '@langchain/core/runnables';
import type { SaverSchema } from './schema.js';
import type { SerializerProtocol } from '@langchain/langgraph-checkpoint';
import {
  listStreams,
  StatefoldError,
  type EffectRetention,
  type Encryption,
  type PendingPolicy,
  type Policy,
  type Retention,
  type Store,
} from '../../engine/index.js';
import { parseStream, threadPrefix } from './codec.js';

/** Options of `new StatefoldSaver`. */
export interface StatefoldSaverOptions {
  /** Where threads are stored: MemoryStore, FileStore, S3Store, or any Store. */
  store: Store;
  /** Prefix of every stream id this saver writes (default 'langgraph/'); one store can hold several savers' threads. */
  prefix?: string;
  /** When bases are written (see Policy; `baseEvery` bounds how many deltas a read folds). */
  policy?: Policy;
  /** Which checkpoints of each thread to keep (default: all). */
  retention?: Retention;
  /** Encrypts every checkpoint (see README, Encryption). */
  encryption?: Encryption;
  /** How long one store call may take before it fails TIMEOUT (default 300,000 ms). */
  storeTimeoutMs?: number;
  /** What `effect()` does with a token found pending after a crash (default `'throw'`; see SnapshotEngine.open). */
  onPendingEffect?: PendingPolicy;
  /** How long settled effect tokens are kept (defaults: 24 hours, 10,000 tokens). */
  effectRetention?: EffectRetention;
  /** Threads whose writers stay open (default 256): beyond it, the least recently used is closed. */
  maxOpenThreads?: number;
  /** LangGraph's serializer (default JsonPlusSerializer, as every saver). */
  serde?: SerializerProtocol;
  /**
   * The schema version of the graph's state and the migrations that upcast older threads (see
   * SaverSchema and docs/langgraph.md): each migration gets a checkpoint's channel values and
   * pending writes, deserialized, and returns them with values changed. Default: version 1.
   */
  schema?: SaverSchema;
}

/** The error a saver call gives for a config without what it needs. */
export function missing(op: string, field: string): StatefoldError {
  return new StatefoldError(
    'INVALID_ARGUMENT',
    `StatefoldSaver.${op}: config.configurable.${field} is required (pass it as graph.invoke(input, { configurable: { ${field}: ... } }))`,
  );
}

/** The checkpoint namespace of a config ('' when absent). */
export function nsOf(config: RunnableConfig): string {
  const ns = config?.configurable?.checkpoint_ns as unknown;
  if (ns === undefined || ns === null) return '';
  if (typeof ns !== 'string') throw invalid('call', 'checkpoint_ns', ns);
  return ns;
}

/** A string id from a config field; numbers are taken as their decimal string. */
export function idOf(value: unknown, op: string, field: string, optional = false): string | undefined {
  if (value === undefined || value === null || value === '') {
    if (optional) return undefined;
    throw missing(op, field);
  }
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string') throw invalid(op, field, value);
  return value;
}

export function invalid(op: string, field: string, value: unknown): StatefoldError {
  return new StatefoldError(
    'INVALID_ARGUMENT',
    `StatefoldSaver.${op}: ${field} must be a string (got ${value === null ? 'null' : typeof value})`,
  );
}

/** The (thread, ns) pairs a list call covers: from the config, else from the store's stream listing. */
export async function threadsOf(
  store: Store,
  prefix: string,
  config: RunnableConfig,
): Promise<{ thread: string; ns: string }[]> {
  const thread = idOf(config.configurable?.thread_id, 'list', 'thread_id', true);
  const ns = config.configurable?.checkpoint_ns as unknown;
  if (ns !== undefined && typeof ns !== 'string') throw invalid('list', 'checkpoint_ns', ns);
  if (thread !== undefined && ns !== undefined) return [{ thread, ns }];
  const found: { thread: string; ns: string }[] = [];
  for (const stream of await listStreams(store, {
    prefix: thread === undefined ? prefix : threadPrefix(prefix, thread),
  })) {
    const parsed = parseStream(prefix, stream);
    if (parsed !== undefined && (ns === undefined || parsed.ns === ns)) found.push(parsed);
  }
  return found;
}
