/**
 * Claim: how an engine takes a stream for writing (fencing on open, as SlateDB's writer epoch).
 * It writes a fence frame into the next free slot (see log/listing.ts) with an epoch one higher
 * than the last frame's, so that an older engine's next commit finds its key taken and fails FENCED.
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../storage-adapters/store.js';
import { StatefoldError } from '../errors.js';
import { encodeFrame, type FrameLimits } from '../format/frame.js';
import { committedView, type CommittedView } from '../log/committed.js';
import type { StreamKeys } from '../log/keys.js';
import { listLog } from '../log/listing.js';
import { sameBytes, sleep, wrapStorage } from './commit.js';

/** A claimed stream: the committed view the claim was made on, and where this engine writes next. */
export interface Claim {
  /** The writer epoch this engine claimed the stream with. */
  epoch: number;
  /** 64 random bits (hex) that tell this engine's frames from any other's (epochs may tie while racing). */
  writer: string;
  /** The committed log as it was when the fence landed. */
  view: CommittedView;
  /** The key of this engine's first commit: the one after its fence. */
  nextKey: string;
}

const MAX_CLAIM_ATTEMPTS = 64;

/** Claims `keys.stream` with a new writer epoch, fencing any engine that had it. */
export async function claimStream(store: Store, keys: StreamKeys, limits: FrameLimits): Promise<Claim> {
  const writer = randomBytes(8).toString('hex');
  for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
    const log = await listLog(store, keys);
    const view = await committedView(store, log, limits);
    const tail = view.tailFrame;
    const epoch = (tail?.header.epoch ?? 0) + 1;
    let fenceSeq: number;
    let fenceKey: string;
    if (tail === undefined) {
      fenceSeq = 1;
      fenceKey = keys.slot(1);
    } else if (tail.kind === 'fence') {
      fenceSeq = tail.header.seq;
      fenceKey = keys.afterFence(fenceSeq, tail.header.epoch);
    } else {
      fenceSeq = tail.header.seq + 1;
      fenceKey = keys.slot(fenceSeq);
    }
    const fence = encodeFrame('fence', { stream: keys.stream, seq: fenceSeq, epoch, writer, createdAt: Date.now() }, new Uint8Array(0));
    if (await createOrRecognise(store, fenceKey, fence, keys.stream, fenceSeq)) {
      return { epoch, writer, view, nextKey: keys.afterFence(fenceSeq, epoch) };
    }
    // Another engine took the slot first (a commit or a fence): look again.
    await sleep(Math.min(50, 2 ** attempt) * Math.random());
  }
  throw new StatefoldError('STORAGE', `open stream ${JSON.stringify(keys.stream)}: could not claim a slot after ${MAX_CLAIM_ATTEMPTS} attempts (other engines keep opening or committing)`, { stream: keys.stream });
}

/** Creates `key` with `frame`, or recognises that an earlier try of ours already did. */
async function createOrRecognise(store: Store, key: string, frame: Uint8Array, stream: string, seq: number): Promise<boolean> {
  try {
    if (await store.putIfAbsent(key, frame)) return true;
  } catch (err) {
    const there = await store.get(key).catch(() => undefined);
    if (there === undefined) throw wrapStorage(err, stream, seq, key, 'open');
  }
  // Ours (an earlier try landed), or another engine's; nothing there means a lost race to a
  // failed write (S3's 409): the caller lists again and retries.
  let there: Uint8Array | undefined;
  try {
    there = await store.get(key);
  } catch (err) {
    throw wrapStorage(err, stream, seq, key, 'open (reading back a key found taken)');
  }
  return there !== undefined && sameBytes(there, frame);
}
