/**
 * Ways to checkpoint an agent state, measured side by side: statefold's two diff paths, statefold
 * writing full snapshots only, and what people write by hand without statefold.
 */
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip as gzipCb } from 'node:zlib';
import jsonpatch from 'fast-json-patch';

const { compare } = jsonpatch;
import lz4 from 'lz4';
import { Packr } from 'msgpackr';
import { SnapshotEngine, type Encryption, type Policy, type Store } from 'statefold';

const gzip = promisify(gzipCb);

/** A state to checkpoint (every workload builds plain objects). */
type AgentState = object;

/** A checkpointing strategy bound to one store and stream. */
export interface Checkpointer {
  /** Takes a checkpoint: the synchronous part runs in the call; the promise resolves when durable. */
  checkpoint(state: AgentState): Promise<CheckpointResult>;
  close(): Promise<void>;
}

export interface CheckpointResult {
  kind: 'base' | 'delta' | 'full';
  bytes: number;
}

/** A strategy: how to open a checkpointer, and which update style its agent uses. */
export interface Strategy {
  id: StrategyId;
  label: string;
  /** How the agent changes its state under this strategy. */
  style: 'mutable' | 'immutable';
  open(store: Store, stream: string): Promise<Checkpointer>;
}

export type StrategyId = 'sf-immutable' | 'sf-copy' | 'sf-copy-enc' | 'sf-full' | 'json-gzip' | 'fjp-mirror';

/** The encrypted runs' keys: one random key under a short id (ids are stored in every frame). */
export const BENCH_ENCRYPTION: Encryption = { keys: { bench: randomBytes(32) }, current: 'bench' };

/** Base every this many checkpoints in the hand-rolled fast-json-patch baseline (statefold's default). */
const FJP_BASE_EVERY = 32;

function statefold(
  id: StrategyId,
  label: string,
  updates: 'copy' | 'immutable',
  policy?: Policy,
  encryption?: Encryption,
): Strategy {
  return {
    id,
    label,
    style: updates === 'copy' ? 'mutable' : 'immutable',
    async open(store, stream) {
      const engine = await SnapshotEngine.open({
        store,
        stream,
        updates,
        ...(policy ? { policy } : {}),
        ...(encryption ? { encryption } : {}),
      });
      // The engine's own promise (CheckpointInfo has kind and bytes): the call's synchronous part is the engine's alone.
      return { checkpoint: (state) => engine.checkpoint(state), close: () => engine.close() };
    },
  };
}

/** JSON.stringify (sync, in the call) + gzip (zlib's thread pool) of the whole state, one object per checkpoint. */
const jsonGzip: Strategy = {
  id: 'json-gzip',
  label: 'full JSON.stringify + gzip',
  style: 'mutable',
  async open(store, stream) {
    let seq = 0;
    return {
      async checkpoint(state) {
        const json = JSON.stringify(state);
        const key = `${stream}/${(++seq).toString(16).padStart(16, '0')}.json.gz`;
        const body = await gzip(json);
        if (!(await store.putIfAbsent(key, body))) throw new Error(`json-gzip: ${key} exists`);
        return { kind: 'full', bytes: body.byteLength };
      },
      close: async () => undefined,
    };
  },
};

const packr = new Packr({ useRecords: false });

function lz4Block(raw: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(lz4.encodeBound(raw.byteLength) + 4);
  out.writeUInt32LE(raw.byteLength, 0);
  const n = lz4.encodeBlock(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), out, 4);
  return out.subarray(0, 4 + n);
}

/**
 * The hand-rolled incremental checkpoint: fast-json-patch `compare` against a deep-cloned mirror
 * (structuredClone), ops packed with msgpackr + lz4; a full base every 32 checkpoints.
 */
const fjpMirror: Strategy = {
  id: 'fjp-mirror',
  label: 'fast-json-patch compare vs deep-cloned mirror (msgpackr + lz4)',
  style: 'mutable',
  async open(store, stream) {
    let seq = 0;
    let mirror: AgentState | undefined;
    return {
      async checkpoint(state) {
        seq++;
        let body: Buffer;
        let kind: 'base' | 'delta';
        if (mirror === undefined || (seq - 1) % FJP_BASE_EVERY === 0) {
          body = lz4Block(packr.pack(state));
          kind = 'base';
        } else {
          body = lz4Block(packr.pack(compare(mirror, state)));
          kind = 'delta';
        }
        mirror = structuredClone(state);
        const key = `${stream}/${kind}-${seq.toString(16).padStart(16, '0')}`;
        if (!(await store.putIfAbsent(key, body))) throw new Error(`fjp-mirror: ${key} exists`);
        return { kind, bytes: body.byteLength };
      },
      close: async () => undefined,
    };
  },
};

export const STRATEGIES: Record<StrategyId, Strategy> = {
  'sf-immutable': statefold('sf-immutable', "statefold, updates: 'immutable' (immutable updates)", 'immutable'),
  'sf-copy': statefold('sf-copy', "statefold, updates: 'copy' (in-place mutation)", 'copy'),
  'sf-copy-enc': statefold(
    'sf-copy-enc',
    "statefold, updates: 'copy', with encryption (AES-256-GCM)",
    'copy',
    undefined,
    BENCH_ENCRYPTION,
  ),
  'sf-full': statefold('sf-full', 'statefold full snapshots, msgpackr + lz4 (baseEvery: 1)', 'immutable', {
    baseEvery: 1,
  }),
  'json-gzip': jsonGzip,
  'fjp-mirror': fjpMirror,
};

/** Short names for tables. */
export const SHORT: Record<StrategyId, string> = {
  'sf-immutable': 'statefold immutable',
  'sf-copy': 'statefold copy',
  'sf-copy-enc': 'statefold copy, encrypted',
  'sf-full': 'full msgpackr+lz4',
  'json-gzip': 'full JSON+gzip',
  'fjp-mirror': 'fjp compare + mirror',
};
