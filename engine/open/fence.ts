/**
 * Fences: the frames a claim writes into a slot so that an older engine's commit there finds its
 * key taken and fails FENCED, and the create-if-absent write that recognises its own earlier try.
 */
import type { Store } from '../../storage-adapters/store.js';
import { decodeFrame, encodeFrame, type Frame, type FrameReading } from '../format/frame.js';
import type { StreamKeys } from '../log/keys.js';
import { createOrRead } from '../log/create.js';
import { wrapStorage } from '../errors.js';

/** Who claims: the stream, the writer epoch, and 64 random bits that tell this engine's frames from any other's. */
export interface Identity {
  stream: string;
  epoch: number;
  writer: string;
}

/** Keys followed within one slot (fence after fence) before giving up. */
export const MAX_KEYS_PER_SLOT = 64;

/** A fence of `writer` at `epoch` in slot `seq`; sealed in an encrypted stream, so that none can be forged there. */
export async function fenceFrame(
  keys: StreamKeys,
  seq: number,
  epoch: number,
  writer: string,
  limits: FrameReading,
): Promise<Uint8Array> {
  const header = { stream: keys.stream, seq, epoch, writer, createdAt: Date.now() };
  return encodeFrame('fence', header, new Uint8Array(0), 1, await limits.keyring?.sealing(keys.stream));
}

/** What held a key a claim tried to create: a checkpoint, a fence, or nothing readable (a write still landing). */
export type LostTo = 'checkpoint' | 'fence' | 'nothing';

/** Writes a fence of `id` into slot `seq` at `key`: `lostTo` is undefined when it stands there, else what holds the key (`frame`, when readable). */
export async function putFence(
  store: Store,
  keys: StreamKeys,
  id: Identity,
  seq: number,
  key: string,
  limits: FrameReading,
  epoch = id.epoch,
): Promise<{ lostTo?: LostTo; frame?: Frame }> {
  const fence = await fenceFrame(keys, seq, epoch, id.writer, limits);
  const there = await createOrRecognise(store, key, fence, keys.stream, seq);
  if (there === 'ours') return {};
  if (there === undefined) return { lostTo: 'nothing' };
  const frame = decodeFrame(there, { stream: keys.stream, key, seq }, limits);
  return { lostTo: frame.kind === 'fence' ? 'fence' : 'checkpoint', frame };
}

/**
 * Creates `key` with `frame`, or recognises that an earlier try of ours already did: 'ours', or
 * the bytes another engine put there (undefined when none can be read: see createOrRead). A store
 * failure is STORAGE naming the stream, seq and key.
 */
export async function createOrRecognise(
  store: Store,
  key: string,
  frame: Uint8Array,
  stream: string,
  seq: number,
): Promise<'ours' | Uint8Array | undefined> {
  try {
    return await createOrRead(store, key, frame);
  } catch (err) {
    throw wrapStorage(err, stream, seq, key, 'open');
  }
}
