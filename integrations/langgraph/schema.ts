/**
 * StatefoldSaver's `schema`: migrations of the user state inside LangGraph checkpoints (channel
 * values and pending writes), turned into the engine's migrations over a thread's stored state.
 * A migration sees values as the graph sees them (deserialized with the saver's serde) and
 * returns the same channels and writes with values changed; the saver serializes them again.
 * The saver's own bookkeeping (ids, parents, channel versions, its meta) never reaches it.
 */
import { JsonPlusSerializer, type SerializerProtocol } from '@langchain/langgraph-checkpoint';
import { StatefoldError, type Schema } from '../../engine/index.js';
import { fromPlain, toPlain, type Plain, type ThreadState, type WriteRecord } from './codec.js';

/** What a StatefoldSaver migration receives and returns: one thread checkpoint's user state. */
export interface SaverState {
  /** The checkpoint's channel values, deserialized (none before the thread's first put). */
  channel_values: Record<string, unknown>;
  /** Every pending write the stored state holds, in order: task id, channel, value (deserialized). */
  pendingWrites: [taskId: string, channel: string, value: unknown][];
}

/** The schema of a StatefoldSaver: migrations over SaverState, one version to the next. */
export interface SaverSchema {
  version: number;
  migrate?: Record<number, (state: SaverState) => SaverState | Promise<SaverState>>;
  readableFrom?: number;
}

/**
 * The engine schema of a StatefoldSaver's streams for `schema`, for `statefold migrate` and
 * `migrateStreams` (a schema module exports `schema = saverMigrations({ version, migrate })`),
 * with the saver's serde (default: LangGraph's JsonPlusSerializer, as the saver's).
 */
export function saverMigrations(schema: SaverSchema, serde: SerializerProtocol = new JsonPlusSerializer()): Schema {
  return threadSchema(schema, serde) ?? { version: 1 };
}

/** The engine's schema for a saver's streams: each migration wrapped to deserialize, migrate, serialize. */
export function threadSchema(schema: SaverSchema | undefined, serde: SerializerProtocol): Schema | undefined {
  if (schema === undefined || schema === null || typeof schema !== 'object') return schema as undefined;
  const migrate = schema.migrate;
  if (migrate === undefined || migrate === null || typeof migrate !== 'object') return schema as Schema;
  const wrapped: Record<number, (state: ThreadState) => Promise<ThreadState>> = {};
  for (const [k, fn] of Object.entries(migrate)) {
    // (Not a function: left as it is, for the engine's check to name.)
    wrapped[Number(k)] = typeof fn === 'function' ? (state) => migrateThread(state, fn, serde, Number(k)) : fn;
  }
  return { ...schema, migrate: wrapped } as Schema;
}

async function migrateThread(
  state: ThreadState,
  fn: (s: SaverState) => SaverState | Promise<SaverState>,
  serde: SerializerProtocol,
  from: number,
): Promise<ThreadState> {
  const names = Object.keys(state.cp?.channel_values ?? {});
  const writes = Object.entries(state.writes).flatMap(([id, byKey]) =>
    Object.entries(byKey).map(([key, record]) => ({ id, key, record })),
  );
  const given: SaverState = {
    channel_values: Object.fromEntries(
      await Promise.all(names.map(async (n) => [n, await fromPlain(serde, state.cp!.channel_values[n]!)] as const)),
    ),
    pendingWrites: await Promise.all(
      writes.map(
        async ({ record }) => [record[0], record[1], await fromPlain(serde, record[2])] as [string, string, unknown],
      ),
    ),
  };
  const out = await fn(given);
  const problem = shapeProblem(
    out,
    names,
    writes.map((w) => w.record),
  );
  if (problem !== undefined)
    throw new StatefoldError('INVALID_STATE', `StatefoldSaver schema migration from version ${from}: ${problem}`);
  const values: Record<string, Plain> = {};
  for (const n of names) values[n] = await toPlain(serde, out.channel_values[n]);
  const newWrites: Record<string, Record<string, WriteRecord>> = {};
  for (const [i, { id, key, record }] of writes.entries()) {
    const value = await toPlain(serde, out.pendingWrites[i]![2]);
    (newWrites[id] ??= {})[key] = [record[0], record[1], value, record[3], record[4]];
  }
  for (const id of Object.keys(state.writes)) newWrites[id] ??= {};
  return { ...state, cp: state.cp && { ...state.cp, channel_values: values }, writes: newWrites };
}

/**
 * Why a migration's result cannot be stored, or undefined: LangGraph keeps versions per channel
 * and records which task wrote what, so a migration changes values, not which channels exist or
 * which writes were made.
 */
function shapeProblem(out: SaverState, names: string[], writes: WriteRecord[]): string | undefined {
  if (out === null || typeof out !== 'object') return 'it must return { channel_values, pendingWrites }';
  const got = Object.keys(out.channel_values ?? {}).sort();
  if (got.join('\u0000') !== [...names].sort().join('\u0000'))
    return `it returned channels ${JSON.stringify(got)} where the checkpoint has ${JSON.stringify([...names].sort())} (a migration changes values, not which channels exist)`;
  if (!Array.isArray(out.pendingWrites) || out.pendingWrites.length !== writes.length)
    return `it returned ${String(out.pendingWrites?.length)} pending writes where there are ${writes.length} (a migration changes their values only)`;
  for (const [i, w] of out.pendingWrites.entries())
    if (!Array.isArray(w) || w[0] !== writes[i]![0] || w[1] !== writes[i]![1])
      return `pending write ${i} is not task ${writes[i]![0]}'s to channel ${writes[i]![1]} (a migration changes its value only)`;
  return undefined;
}
