import { createHash } from 'node:crypto';
import { StatefoldError, describeValue } from '../errors.js';

/** Longest stream id accepted, in UTF-8 bytes. */
export const MAX_STREAM_ID_BYTES = 512;
/** Longest encoded id kept readable; longer ones are stored under a SHA-256 name. */
const MAX_READABLE_SEGMENT = 160;

/** Throws INVALID_ARGUMENT unless `stream` is a non-empty string of at most 512 UTF-8 bytes. */
export function assertStreamId(stream: unknown): asserts stream is string {
  if (typeof stream !== 'string' || stream.length === 0) {
    throw new StatefoldError('INVALID_ARGUMENT', `stream id ${describeValue(stream)}: must be a non-empty string`);
  }
  if (!stream.isWellFormed()) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `stream id ${JSON.stringify(stream)}: contains a lone surrogate, which has no UTF-8 form`,
      { stream },
    );
  }
  const size = Buffer.byteLength(stream, 'utf8');
  if (size > MAX_STREAM_ID_BYTES) {
    throw new StatefoldError(
      'INVALID_ARGUMENT',
      `stream id ${JSON.stringify(stream.slice(0, 40))}...: ${size} UTF-8 bytes, more than ${MAX_STREAM_ID_BYTES}`,
      { stream },
    );
  }
}

/**
 * Encodes a stream id into one key segment that no other id shares and that cannot escape its
 * own key space: bytes outside `[a-z0-9_-]` (upper case too, so case-insensitive filesystems
 * keep `A` and `a` apart) become `~xx`; `s.` marks this readable form. Ids whose readable form
 * would be too long for a file name become `h.` + the SHA-256 of the id; the frame header keeps
 * the full id, so even a hash collision would be detected on read.
 */
export function encodeStreamId(stream: string): string {
  let out = 's.';
  for (const byte of Buffer.from(stream, 'utf8')) {
    const safe = (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte === 0x5f || byte === 0x2d;
    out += safe ? String.fromCharCode(byte) : `~${byte.toString(16).padStart(2, '0')}`;
    if (out.length > MAX_READABLE_SEGMENT) {
      return `h.${createHash('sha256').update(stream, 'utf8').digest('hex')}`;
    }
  }
  return out;
}

/** Fixed-width lower-case hex, so that key order is numeric order. */
export function hex16(n: number): string {
  return n.toString(16).padStart(16, '0');
}

/**
 * The layout of one stream's keys: `<stream>/log/<seq>[.<epoch>]` (see listing.ts for slots) and
 * `<stream>/gc/<seq>` (retention floors), `<stream>/hint/<seq>` (hints) and `<stream>/idx/...` (index
 * objects). The engine owns key naming; stores only see keys.
 */
export class StreamKeys {
  readonly stream: string;
  /** Prefix of every key of this stream. */
  readonly root: string;
  /** Prefix of the stream's log: one or more keys per seq. */
  readonly log: string;

  constructor(stream: string) {
    assertStreamId(stream);
    this.stream = stream;
    this.root = `${encodeStreamId(stream)}/`;
    this.log = `${this.root}log/`;
  }

  /** The first key of slot `seq`: `<log>/<seq as 16 hex>`. */
  slot(seq: number): string {
    return `${this.log}${hex16(seq)}`;
  }

  /** The key that follows a fence of `epoch` in slot `seq`: `<log>/<seq>.<epoch>`. */
  afterFence(seq: number, epoch: number): string {
    return `${this.log}${hex16(seq)}.${hex16(epoch)}`;
  }

  /** Prefix of the stream's hints: the seqs of its newest bases, so that readers list from there (see hint.ts). */
  get hints(): string {
    return `${this.root}hint/`;
  }

  /**
   * The hint that a base was committed at `seq`: `<stream>/hint/<seq as 16 hex>`, and when its
   * chain is written with span deltas `.<span length as 16 hex>` after it, so that a reader knows
   * which of the listed seqs a restore reads before it reads any of them.
   */
  hint(seq: number, span?: number): string {
    return `${this.hints}${hex16(seq)}${span === undefined || span < 2 ? '' : `.${hex16(span)}`}`;
  }

  /** Parses a hint key into its seq. */
  parseHint(key: string): number | undefined {
    return this.parseHintKey(key)?.seq;
  }

  /** Parses a hint key into its seq and, for a chain with span deltas, its span length. */
  parseHintKey(key: string): { seq: number; span: number | undefined } | undefined {
    const dot = key.indexOf('.', this.hints.length);
    const seq = seqUnder(this.hints, dot < 0 ? key : key.slice(0, dot));
    if (seq === undefined) return undefined;
    if (dot < 0) return { seq, span: undefined };
    const span = /^[0-9a-f]{16}$/.test(key.slice(dot + 1)) ? parseInt(key.slice(dot + 1), 16) : NaN;
    return Number.isSafeInteger(span) && span >= 2 ? { seq, span } : undefined;
  }

  /** Prefix of the stream's retention floors (see retention.ts). */
  get floors(): string {
    return `${this.root}gc/`;
  }

  /** The key that records that every seq below `seq` is deleted: `<stream>/gc/<seq as 16 hex>`. */
  floor(seq: number): string {
    return `${this.floors}${hex16(seq)}`;
  }

  /** Parses a floor key into its seq. */
  parseFloor(key: string): number | undefined {
    return seqUnder(this.floors, key);
  }

  /**
   * Prefix of the stream's index objects (see restore/indexed.ts): one per base of a stream written
   * with an index, named by the index key its base's meta gives.
   */
  get index(): string {
    return `${this.root}idx/`;
  }

  /**
   * The index object of base `base` whose chain starts at base `prev`, for index key `key`:
   * `<stream>/idx/<the key's UTF-8 as hex>.<prev as 16 hex>.<base as 16 hex>`. Hex keeps the
   * key's byte order, and a key that is a prefix of another sorts first ('.' sorts below hex digits).
   */
  indexEntry(key: string, prev: number, base: number): string {
    return `${this.index}${Buffer.from(key, 'utf8').toString('hex')}.${hex16(prev)}.${hex16(base)}`;
  }

  /** Where a listing of the index objects whose key is at least `key` starts after. */
  indexFrom(key: string): string {
    return `${this.index}${Buffer.from(key, 'utf8').toString('hex')}`;
  }

  /** Parses an index object's key into its index key, the base its chain starts at and its base. */
  parseIndex(key: string): { key: string; prev: number; base: number } | undefined {
    if (!key.startsWith(this.index)) return undefined;
    const m = /^((?:[0-9a-f]{2})*)\.([0-9a-f]{16})\.([0-9a-f]{16})$/.exec(key.slice(this.index.length));
    if (!m) return undefined;
    const prev = parseInt(m[2]!, 16);
    const base = parseInt(m[3]!, 16);
    if (!Number.isSafeInteger(prev) || !Number.isSafeInteger(base) || prev < 1 || base <= prev) return undefined;
    const indexKey = Buffer.from(m[1]!, 'hex').toString('utf8');
    return indexKeyError(indexKey) === undefined ? { key: indexKey, prev, base } : undefined;
  }

  /** Parses a log key into its seq and, for a key that follows a fence, that fence's epoch. */
  parse(key: string): { seq: number; afterEpoch: number } | undefined {
    if (!key.startsWith(this.log)) return undefined;
    const name = key.slice(this.log.length);
    const m = /^([0-9a-f]{16})(?:\.([0-9a-f]{16}))?$/.exec(name);
    if (!m) return undefined;
    const seq = parseInt(m[1]!, 16);
    const afterEpoch = m[2] === undefined ? 0 : parseInt(m[2], 16);
    if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(afterEpoch) || seq < 1) return undefined;
    return { seq, afterEpoch };
  }
}

/**
 * Longest index key, in characters: its hex form and two seqs (2 * 90 + 34 characters) stay within
 * a file name's 255 bytes with the file store's temporary-file suffix (23 or more) added.
 */
export const MAX_INDEX_KEY = 90;

/**
 * Why `key` cannot be an index key, or undefined when it can: a string of 1 to 90 printable ASCII
 * characters, so that the store's byte order of its hex form is the order of `<` on strings.
 */
export function indexKeyError(key: unknown): string | undefined {
  if (typeof key !== 'string' || key.length === 0) return `must be a non-empty string, not ${JSON.stringify(key)}`;
  if (key.length > MAX_INDEX_KEY) return `${key.length} characters, more than ${MAX_INDEX_KEY}`;
  if (!/^[\x20-\x7e]*$/.test(key)) return 'holds a character outside printable ASCII';
  return undefined;
}

/** The seq a key `<prefix><seq as 16 hex>` names, or undefined for any other key. */
function seqUnder(prefix: string, key: string): number | undefined {
  if (!key.startsWith(prefix)) return undefined;
  const name = key.slice(prefix.length);
  if (!/^[0-9a-f]{16}$/.test(name)) return undefined;
  const seq = parseInt(name, 16);
  return Number.isSafeInteger(seq) && seq >= 1 ? seq : undefined;
}

/**
 * The stream id a readable key segment (`s.` + escaped UTF-8, see encodeStreamId) stands for, or
 * undefined when `segment` is not one (a hashed `h.` segment names its id only inside its objects).
 */
export function decodeStreamSegment(segment: string): string | undefined {
  if (!segment.startsWith('s.')) return undefined;
  const bytes: number[] = [];
  for (let i = 2; i < segment.length; i++) {
    const c = segment.charCodeAt(i);
    if (c === 0x7e) {
      const hex = segment.slice(i + 1, i + 3);
      if (!/^[0-9a-f]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else bytes.push(c);
  }
  const id = Buffer.from(bytes).toString('utf8');
  // Only the segment this id encodes to (a well-formed, canonical one) names it.
  return id.length > 0 && id.isWellFormed() && encodeStreamId(id) === segment ? id : undefined;
}
