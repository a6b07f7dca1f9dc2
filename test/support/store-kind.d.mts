import type { Store } from 'statefold';

/** The kind the harness asked this child for. */
export const childKind: 'file' | 'sqlite' | 'postgres';
/** A store of `kind` at `where` (see store-kind.mjs). */
export function storeAt(
  kind: 'file' | 'sqlite' | 'postgres',
  where: string,
): Promise<Store & { close?(): Promise<void> }>;
/** After a child was killed: on PostgreSQL, waits until the server has no backend of a child left. */
export function afterChildExit(kind: 'file' | 'sqlite' | 'postgres', where: string): Promise<void>;
