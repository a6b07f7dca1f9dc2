/**
 * Sizes of a state as stored: the bytes of msgpack encodeValue writes for it and for each of its
 * subtrees, computed in one walk without encoding (sizeReport, budgets). Containers, strings and
 * numbers are sized by msgpack's rules; the rare values encodeValue tags (Dates, typed arrays,
 * strings with lone surrogates, -0, keys that need entries) are encoded to be sized.
 */
import { escapePathComponent } from 'fast-json-patch';
import { classify, Kind } from '../value.js';
import { OP_REMOVE, type Op } from './ops.js';
import { encodeValue } from './values.js';

/** A subtree of a state: its JSON Pointer and its size as stored, uncompressed. */
export interface PathSize {
  path: string;
  bytes: number;
}

/** A string or binary value held at more than one path. */
export interface Repeated {
  /** Its size as stored, once. */
  bytes: number;
  paths: string[];
}

/** What a walk of a state found. */
export interface SizeWalk {
  /** The whole state's size as stored (msgpack, uncompressed). */
  bytes: number;
  /** The largest subtrees below the root, largest first (ancestors included: /a before /a/b). */
  top: PathSize[];
  /** Strings and binary values of at least `repeatMin` bytes held at more than one path, most bytes repeated first. */
  repeated: Repeated[];
}

/** Options of walkSizes. */
export interface WalkOptions {
  /** How many subtrees `top` keeps. Default 20. */
  top?: number;
  /** Smallest value (bytes) looked for among repeated values. Default 256. */
  repeatMin?: number;
}

/** The size msgpack (encodeValue) gives `value`. */
export function sizeOf(value: unknown): number {
  return walk(value, '', undefined);
}

/** The `n` operations (adds, replaces, appends) whose values are largest, largest first: what grew most. */
export function largestOps(ops: readonly Op[], n: number): PathSize[] {
  return ops
    .filter((op) => op[0] !== OP_REMOVE)
    .map((op) => ({ path: op[1], bytes: sizeOf(op[2]) }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, n);
}

/** Walks `value` once: its size, its largest subtrees, and its repeated large values. */
export function walkSizes(value: unknown, options: WalkOptions = {}): SizeWalk {
  const seen: Seen = { top: [], keep: options.top ?? 20, repeatMin: options.repeatMin ?? 256, values: new Map() };
  const bytes = walk(value, '', seen);
  const repeated: Repeated[] = [];
  for (const entry of seen.values.values()) if (entry.paths.length > 1) repeated.push(entry);
  repeated.sort((a, b) => b.bytes * (b.paths.length - 1) - a.bytes * (a.paths.length - 1));
  return { bytes, top: seen.top, repeated };
}

interface Seen {
  top: PathSize[];
  keep: number;
  repeatMin: number;
  /** Large values by content (strings as themselves, binary as 'b' + base64). */
  values: Map<string, Repeated>;
}

function walk(value: unknown, path: string, seen: Seen | undefined): number {
  let bytes: number;
  switch (typeof value) {
    case 'string': {
      if (!value.isWellFormed()) {
        bytes = encodeValue(value).byteLength;
        break;
      }
      const length = Buffer.byteLength(value, 'utf8');
      bytes = length + header(length, 32, 1);
      if (seen !== undefined && bytes >= seen.repeatMin) note(seen, value, bytes, path);
      break;
    }
    case 'number':
      bytes = numberSize(value);
      break;
    case 'boolean':
      return 1;
    case 'object': {
      if (value === null) return 1;
      if (Array.isArray(value)) {
        bytes = header(value.length, 16, 0);
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i];
          bytes += item === undefined ? 1 : walk(item, seen ? `${path}/${i}` : '', seen);
        }
        break;
      }
      if (classify(value) === Kind.Object) {
        const obj = value as Record<string, unknown>;
        let count = 0;
        bytes = 0;
        for (const key of Object.keys(obj)) {
          // (Such a key makes toWire store entries, even when its value is undefined and dropped.)
          if (key === '__proto__' || !key.isWellFormed()) return tagged(value, path, seen);
          const item = obj[key];
          if (item === undefined) continue;
          count++;
          bytes += walk(key, '', undefined) + walk(item, seen ? `${path}/${escapePathComponent(key)}` : '', seen);
        }
        bytes += header(count, 16, 0);
        break;
      }
      bytes = tagged(value, path, seen);
      if (seen !== undefined && ArrayBuffer.isView(value) && bytes >= seen.repeatMin) {
        const view = value as ArrayBufferView;
        const content = Buffer.from(view.buffer, view.byteOffset, view.byteLength).toString('base64');
        note(seen, `b${value.constructor.name}:${content}`, bytes, path);
      }
      return bytes;
    }
    default:
      // (undefined: encodeValue writes it as nil where it keeps it at all.)
      return 1;
  }
  if (seen !== undefined && path !== '') keepTop(seen, path, bytes);
  return bytes;
}

/** A value encodeValue tags (a Date, a typed array, keys that need entries): sized by encoding it. */
function tagged(value: unknown, path: string, seen: Seen | undefined): number {
  const bytes = encodeValue(value).byteLength;
  if (seen !== undefined && path !== '') keepTop(seen, path, bytes);
  return bytes;
}

/** msgpack header bytes of a string (fix limit 32, str8 exists) or container (fix limit 16, no 8-bit form). */
function header(length: number, fixLimit: number, has8: 0 | 1): number {
  if (length < fixLimit) return 1;
  if (has8 === 1 && length < 0x100) return 2;
  if (length < 0x10000) return 3;
  return 5;
}

function numberSize(n: number): number {
  if (!Number.isInteger(n) || Object.is(n, -0)) return Object.is(n, -0) ? encodeValue(n).byteLength : 9;
  if (n >= 0) return n < 0x80 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x100000000 ? 5 : 9;
  return n >= -0x20 ? 1 : n >= -0x80 ? 2 : n >= -0x8000 ? 3 : n >= -0x80000000 ? 5 : 9;
}

function note(seen: Seen, content: string, bytes: number, path: string): void {
  const entry = seen.values.get(content);
  if (entry === undefined) seen.values.set(content, { bytes, paths: [path] });
  else entry.paths.push(path);
}

/** Keeps `seen.keep` largest subtrees, largest first (ties: the path met first). */
function keepTop(seen: Seen, path: string, bytes: number): void {
  const top = seen.top;
  if (seen.keep <= 0) return;
  if (top.length === seen.keep && bytes <= top[top.length - 1]!.bytes) return;
  let i = top.length;
  while (i > 0 && top[i - 1]!.bytes < bytes) i--;
  top.splice(i, 0, { path, bytes });
  if (top.length > seen.keep) top.pop();
}
