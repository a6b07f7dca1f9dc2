import { readdir, readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { SnapshotEngine, type Encryption, type Store } from 'statefold';

/** A string that must appear in no stored byte of an encrypted stream. */
export const CANARY = 'canary-4f1d9b-secret';

/**
 * Writes a stream whose state, meta and effects all carry CANARY: bases (one over 64 KB, sealed
 * on the frame worker) and deltas (in-place changes, appends to a growing string, a sliding
 * window), then returns the state committed last.
 */
export async function writeCanaryStream(
  store: Store,
  stream: string,
  encryption: Encryption | undefined,
): Promise<unknown> {
  const engine = await SnapshotEngine.open<Record<string, unknown>>({
    store,
    stream,
    policy: { baseEvery: 4 },
    ...(encryption && { encryption }),
  });
  const state = {
    reply: `${CANARY} begins:`,
    window: [] as { id: number; text: string }[],
    notes: { secret: CANARY },
    big: Array.from({ length: 1600 }, (_, i) => `${CANARY} filler line ${i} of a large tool result`).join('\n'),
  };
  for (let i = 0; i < 10; i++) {
    state.reply += ` token ${i} ${CANARY}`;
    state.window.push({ id: i, text: `${CANARY} message ${i}` });
    if (state.window.length > 3) state.window.shift();
    state.notes = { secret: `${CANARY} ${i}` };
    await engine.checkpoint(state, { meta: { note: `${CANARY} meta ${i}` } });
  }
  await engine.effect(`charge:${CANARY}`, async () => ({ receipt: `${CANARY} receipt` }));
  await engine.close();
  return structuredClone(state);
}

/** Every stored object of `store` (memory, S3): its key and bytes. */
export async function storedObjects(store: Store): Promise<{ key: string; bytes: Uint8Array }[]> {
  const out = [];
  for (const key of await store.list('')) {
    const bytes = await store.get(key);
    if (bytes !== undefined) out.push({ key, bytes });
  }
  return out;
}

/** Every file under `dir` as it is on disk (temp leftovers and markers included): its path and bytes. */
export async function filesUnder(dir: string): Promise<{ key: string; bytes: Uint8Array }[]> {
  const out = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    out.push({ key: file, bytes: await readFile(file) });
  }
  return out;
}

/** The objects (or files) whose bytes hold CANARY, in UTF-8 or UTF-16. */
export function holdingCanary(objects: { key: string; bytes: Uint8Array }[]): string[] {
  const needles = [Buffer.from(CANARY, 'utf8'), Buffer.from(CANARY, 'utf16le')];
  return objects.filter((o) => needles.some((n) => Buffer.from(o.bytes).includes(n))).map((o) => o.key);
}
