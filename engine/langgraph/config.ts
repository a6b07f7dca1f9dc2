/** Reading the RunnableConfig fields a saver call needs, with INVALID_ARGUMENT errors that say which. */
import type { RunnableConfig } from '@langchain/core/runnables';
import { StatefoldError } from '../errors.js';

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
