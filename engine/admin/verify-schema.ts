/**
 * verifyStream's schema check: with `schema`, every intact seq is also upcast (a copy), and the
 * seqs whose state the code cannot read (a migration that fails, a version too new) are reported
 * beside the damaged ones, so that a migration can be checked over a stream's whole history
 * before code that drops an old version ships.
 */
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import type { Encryption } from '../format/keyring.js';
import { restore } from '../restore/index.js';
import { restoreRange } from '../restore/range.js';
import type { Schema } from '../schema.js';

/** Most seqs restored together. */
const WINDOW = 64;

/**
 * The seqs of `intact` (ascending) whose state `schema`'s code cannot read, each with its
 * MIGRATION_FAILED or SCHEMA_TOO_NEW: each window restored together, a window that fails seq by seq.
 */
export async function unreadableSeqs(
  store: Store,
  stream: string,
  intact: number[],
  schema: Schema,
  reading: { encryption?: Encryption; signal?: AbortSignal; maxPayloadBytes?: number },
): Promise<{ seq: number; error: StatefoldError }[]> {
  const out: { seq: number; error: StatefoldError }[] = [];
  const failed = (err: unknown): err is StatefoldError =>
    err instanceof StatefoldError && (err.code === 'MIGRATION_FAILED' || err.code === 'SCHEMA_TOO_NEW');
  for (let i = 0; i < intact.length;) {
    const from = intact[i]!;
    let j = i;
    while (j + 1 < intact.length && intact[j + 1]! - from < WINDOW) j++;
    try {
      await restoreRange(store, stream, { ...reading, from, to: intact[j]!, schema });
    } catch (err) {
      if (err instanceof StatefoldError && (err.code === 'ABORTED' || err.code === 'STORAGE' || err.code === 'TIMEOUT'))
        throw err;
      // Seq by seq: the window's failure may be a damaged seq between intact ones (verify reports
      // damage itself) or a seq the code cannot read.
      for (const seq of intact.slice(i, j + 1)) {
        await restore(store, stream, { ...reading, seq, schema }).catch((e: unknown) => {
          if (failed(e)) out.push({ seq, error: e });
          else if (e instanceof StatefoldError && e.code !== 'CORRUPT' && e.code !== 'NOT_FOUND') throw e;
        });
      }
    }
    i = j + 1;
  }
  return out;
}
