/**
 * Keys of encrypted streams: the `encryption` option, checked, and the keys it names, fetched once
 * per key id and stream. A key is 32 bytes (AES-256); where it comes from is the caller's: a table
 * of keys, or a provider that fetches them (from a KMS, per stream for crypto-erasure).
 */
import { StatefoldError, describeValue } from '../errors.js';

/** Returns the 32-byte key `keyId` of `stream`, or undefined when there is none (destroyed, never made). */
export type KeyProvider = (keyId: string, stream: string) => Uint8Array | undefined | Promise<Uint8Array | undefined>;

/** The `encryption` option: where keys come from, and which one encrypts new frames. */
export interface Encryption {
  /** Keys by id (each 32 bytes), or a provider asked for a key id and a stream id. */
  keys: Readonly<Record<string, Uint8Array>> | KeyProvider;
  /** The id of the key that encrypts new frames; older frames decrypt with the key their header names. */
  current: string;
}

/** A key and its id, as frames are sealed with. */
export interface SealingKey {
  id: string;
  key: Uint8Array;
}

/** Bytes of AES-256 key. */
export const KEY_BYTES = 32;
/** Longest key id, in UTF-8 bytes (every frame stores its key id). */
export const MAX_KEY_ID_BYTES = 128;

/** The keys of one `encryption` option: checked when made, each fetched once per stream. */
export class Keyring {
  readonly current: string;
  readonly #table: Readonly<Record<string, Uint8Array>> | undefined;
  readonly #provider: KeyProvider | undefined;
  /** Keys fetched from the provider, by stream and id: one call each (a failed call is asked again). */
  readonly #fetched = new Map<string, Promise<Uint8Array>>();

  private constructor(encryption: Encryption) {
    this.current = encryption.current;
    const { keys } = encryption;
    if (typeof keys === 'function') this.#provider = keys;
    // Copies: a key the caller later changes or zeroes does not change what this keyring seals with.
    else this.#table = Object.fromEntries(Object.entries(keys).map(([id, key]) => [id, ownCopy(key)]));
  }

  /** The keyring of an `encryption` option (undefined when encryption is off); INVALID_ARGUMENT when malformed. */
  static of(encryption: Encryption | undefined, op: string): Keyring | undefined {
    if (encryption === undefined) return undefined;
    const bad = (why: string): never => {
      throw new StatefoldError('INVALID_ARGUMENT', `${op}: encryption ${why}`);
    };
    if (encryption === null || typeof encryption !== 'object' || Array.isArray(encryption))
      bad(`must be an object: { keys, current }, not ${describeValue(encryption)}`);
    const { keys, current } = encryption;
    checkKeyId(current, (why) => bad(`.current ${why}`));
    if (typeof keys === 'function') return new Keyring(encryption);
    if (keys === null || typeof keys !== 'object' || Array.isArray(keys))
      bad('.keys must be an object of keys by id, or a function (keyId, stream) => key');
    for (const [id, key] of Object.entries(keys)) {
      checkKeyId(id, (why) => bad(`.keys: key id ${why}`));
      if (!isKey(key)) bad(`.keys[${JSON.stringify(id)}] is ${describe(key)}, not a ${KEY_BYTES}-byte Uint8Array`);
    }
    if (!Object.hasOwn(keys, current))
      bad(`.current ${JSON.stringify(current)} is not one of .keys (${Object.keys(keys).join(', ') || 'none'})`);
    return new Keyring(encryption);
  }

  /** The key new frames of `stream` are sealed with. */
  async sealing(stream: string): Promise<SealingKey> {
    return { id: this.current, key: await this.key(this.current, stream) };
  }

  /** Key `keyId` of `stream`; KEY_UNAVAILABLE naming the id when there is none. */
  key(keyId: string, stream: string, where?: { seq?: number; key?: string }): Promise<Uint8Array> {
    if (this.#table !== undefined) {
      const key = Object.hasOwn(this.#table, keyId) ? this.#table[keyId] : undefined;
      if (key === undefined)
        return Promise.reject(unavailable(keyId, stream, 'it is not one of the keys given', where));
      return Promise.resolve(key);
    }
    const slot = `${keyId}\u0000${stream}`;
    let fetched = this.#fetched.get(slot);
    if (fetched === undefined) {
      fetched = this.#ask(keyId, stream);
      this.#fetched.set(slot, fetched);
      fetched.catch(() => this.#fetched.delete(slot));
    }
    return fetched.catch((err: unknown) => {
      throw unavailable(keyId, stream, (err as Error).message, where, err);
    });
  }

  async #ask(keyId: string, stream: string): Promise<Uint8Array> {
    const key = await this.#provider!(keyId, stream);
    if (key === undefined || key === null) throw new Error('the key provider has no such key');
    if (!isKey(key)) throw new Error(`the key provider returned ${describe(key)}, not a ${KEY_BYTES}-byte Uint8Array`);
    return ownCopy(key);
  }
}

/** The error of a frame whose key cannot be had. */
export function unavailable(
  keyId: string,
  stream: string,
  why: string,
  where: { seq?: number; key?: string } = {},
  cause?: unknown,
): StatefoldError {
  const at = where.seq === undefined ? '' : ` seq ${where.seq}${where.key === undefined ? '' : ` (${where.key})`}`;
  return new StatefoldError(
    'KEY_UNAVAILABLE',
    `stream ${JSON.stringify(stream)}${at}: encryption key ${JSON.stringify(keyId)} is not available: ${why}`,
    { stream, ...where, ...(cause !== undefined && { cause }) },
  );
}

/** True for a key id as frames may name one: a non-empty string of at most MAX_KEY_ID_BYTES. */
export function isKeyId(id: unknown): id is string {
  return typeof id === 'string' && id !== '' && Buffer.byteLength(id) <= MAX_KEY_ID_BYTES;
}

function checkKeyId(id: unknown, bad: (why: string) => never): void {
  if (typeof id !== 'string' || id === '') bad(`${describeValue(id)} is not a non-empty string`);
  if (Buffer.byteLength(id as string) > MAX_KEY_ID_BYTES)
    bad(`${JSON.stringify(id)} is longer than ${MAX_KEY_ID_BYTES} UTF-8 bytes`);
}

/** A key in a buffer of its own (not a view into a larger one, such as Node's Buffer pool). */
function ownCopy(key: Uint8Array): Uint8Array {
  return new Uint8Array(key);
}

function isKey(key: unknown): key is Uint8Array {
  return key instanceof Uint8Array && key.byteLength === KEY_BYTES;
}

/** What a key is, never its bytes or text (keys are secrets). */
function describe(v: unknown): string {
  if (v instanceof Uint8Array) return `${v.byteLength} bytes`;
  return v === null ? 'null' : `a ${typeof v}`;
}
