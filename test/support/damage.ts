import type { Store } from 'statefold';

/** Flips bits of one byte of the object at `key` (by default the middle one), as a bad disk or a bad copy would. */
export async function flipByte(store: Store, key: string, at?: (length: number) => number, mask = 0x10): Promise<void> {
  const bytes = Buffer.from((await store.get(key))!);
  bytes[at === undefined ? bytes.length >> 1 : at(bytes.length)]! ^= mask;
  await store.delete(key);
  await store.putIfAbsent(key, bytes);
}
