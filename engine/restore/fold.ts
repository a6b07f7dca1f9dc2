/**
 * Fold: applies a delta's JSON Patch operations (RFC 6902 add, remove, replace, and in format
 * version 2 append to a string) to a state decoded from its base, in place. Keys are set as own data properties, so a `__proto__` key
 * is data and no patch can reach a prototype. A patch that does not fit the state is CORRUPT.
 */
import { unescapePathComponent } from 'fast-json-patch';
import { OP_ADD, OP_APPEND, OP_REMOVE, OP_REPLACE, type Op } from '../format/ops.js';
import { setOwn } from '../value.js';

/** Thrown by applyOps when an operation does not fit; the restorer turns it into CORRUPT. */
export class PatchMismatch extends Error {}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/**
 * Applies `ops` in order to `root` and returns the new root (the same object unless the root was
 * replaced). `version` is the frame's: appends exist only from version 2.
 */
export function applyOps(root: unknown, ops: readonly Op[], version = 1): unknown {
  for (const op of ops) {
    if (!Array.isArray(op) || typeof op[1] !== 'string') throw new PatchMismatch('malformed operation');
    const [code, pointer] = op;
    const value = op[2];
    if (code === OP_APPEND) {
      if (version < 2) throw new PatchMismatch(`append at ${pointer} in a format version ${version} frame`);
      root = append(root, pointer, value);
      continue;
    }
    if (pointer === '') {
      if (code === OP_REMOVE) throw new PatchMismatch('remove of the root');
      root = value;
      continue;
    }
    if (pointer[0] !== '/') throw new PatchMismatch(`bad pointer ${JSON.stringify(pointer)}`);
    const tokens = pointer.slice(1).split('/');
    let node: unknown = root;
    for (let i = 0; i < tokens.length - 1; i++) node = child(node, unescapePathComponent(tokens[i]!), pointer);
    const last = unescapePathComponent(tokens[tokens.length - 1]!);
    if (Array.isArray(node)) {
      const index = last === '-' ? node.length : arrayIndex(last, pointer);
      if (code === OP_ADD) {
        if (index > node.length) throw new PatchMismatch(`add at ${pointer} past the end`);
        if (index === node.length) node.push(value);
        else node.splice(index, 0, value);
      } else if (code === OP_REMOVE || code === OP_REPLACE) {
        if (index >= node.length)
          throw new PatchMismatch(`${code === OP_REMOVE ? 'remove' : 'replace'} at ${pointer} past the end`);
        if (code === OP_REMOVE) node.splice(index, 1);
        else node[index] = value;
      } else throw new PatchMismatch(`unknown operation ${String(code)}`);
    } else if (isObject(node)) {
      if (code === OP_ADD) setOwn(node, last, value);
      else if (code === OP_REPLACE || code === OP_REMOVE) {
        if (!hasOwn(node, last))
          throw new PatchMismatch(`${code === OP_REMOVE ? 'remove' : 'replace'} of missing ${pointer}`);
        if (code === OP_REMOVE) delete node[last];
        else setOwn(node, last, value);
      } else throw new PatchMismatch(`unknown operation ${String(code)}`);
    } else {
      throw new PatchMismatch(`${pointer}: parent is not an object or array`);
    }
  }
  return root;
}

/** Appends `suffix` to the string at `pointer`; returns the new root. */
function append(root: unknown, pointer: string, suffix: unknown): unknown {
  if (typeof suffix !== 'string') throw new PatchMismatch(`append at ${pointer} of a non-string`);
  if (pointer === '') {
    if (typeof root !== 'string') throw new PatchMismatch('append to a root that is not a string');
    return root + suffix;
  }
  if (pointer[0] !== '/') throw new PatchMismatch(`bad pointer ${JSON.stringify(pointer)}`);
  const tokens = pointer.slice(1).split('/');
  let node: unknown = root;
  for (let i = 0; i < tokens.length - 1; i++) node = child(node, unescapePathComponent(tokens[i]!), pointer);
  const last = unescapePathComponent(tokens[tokens.length - 1]!);
  const current = child(node, last, pointer);
  if (typeof current !== 'string') throw new PatchMismatch(`append at ${pointer}, which is not a string`);
  if (Array.isArray(node)) node[arrayIndex(last, pointer)] = current + suffix;
  else setOwn(node as Record<string, unknown>, last, current + suffix);
  return root;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v) && !(v instanceof Date);
}

function child(node: unknown, key: string, pointer: string): unknown {
  if (Array.isArray(node)) {
    const i = arrayIndex(key, pointer);
    if (i >= node.length) throw new PatchMismatch(`${pointer}: index ${i} past the end`);
    return node[i];
  }
  if (isObject(node) && hasOwn(node, key)) return node[key];
  throw new PatchMismatch(`${pointer}: no ${JSON.stringify(key)} to descend into`);
}

function arrayIndex(token: string, pointer: string): number {
  if (!/^(0|[1-9][0-9]*)$/.test(token))
    throw new PatchMismatch(`${pointer}: ${JSON.stringify(token)} is not an array index`);
  return Number(token);
}
