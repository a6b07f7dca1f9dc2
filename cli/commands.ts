/** The CLI's commands: each reads its arguments, does one thing through the public API, and prints. */
import { readFile, writeFile } from 'node:fs/promises';
import {
  checkEngineOptions,
  deleteStream,
  diffCheckpoints,
  forkStream,
  gc,
  listCheckpoints,
  listStreams,
  restore,
  StatefoldError,
  verifyStream,
  type Encryption,
  type Store,
} from '../engine/index.js';
import { toJson } from './json.js';
import { progressBar } from './progress.js';
import { UsageError } from './store.js';

/** What every command gets: its positional arguments, its flags, the store (and how the user named it), and how to print. */
export interface Context {
  args: string[];
  flags: Record<string, string | boolean | string[] | undefined>;
  store: Store;
  storeName: string;
  json: boolean;
  encryption: Encryption | undefined;
  out(text: string): void;
}

/** A command: usage line, its positional arguments (all required, no more taken), options, help text, and what it does; resolves the exit code. */
export interface Command {
  usage: string;
  params: string[];
  /** The name of the further arguments it takes, any number of them (none when absent). */
  rest?: string;
  /** Its own options (long names); the options for every command come on top. */
  options: string[];
  help: string;
  run(c: Context): Promise<number>;
}

export const print = (c: Context, human: () => string, data: unknown): void =>
  c.out(c.json ? JSON.stringify(toJson(data)) : human());

function arg(c: Context, i: number, name: string): string {
  const v = c.args[i];
  if (v === undefined) throw new UsageError(`missing <${name}>`);
  return v;
}

/** `text` as a whole number of at least `min`: digits only, a leading - read to say it is too small (+5, 1e3, 0x10, 2.5 are refused). */
function wholeNumber(what: string, text: string, min: 0 | 1): number {
  if (!/^-?[0-9]+$/.test(text)) throw new UsageError(`${what} ${text}: not a whole number`);
  const n = Number(text) + 0; // + 0: -0 is 0
  if (n < min) throw new UsageError(`${what} ${text}: must be ${min} or more`);
  if (!Number.isSafeInteger(n)) throw new UsageError(`${what} ${text}: too large`);
  return n;
}

/** The whole number given to `--name` (at least `min`: 1 for a seq or a count), or undefined. */
export function numberFlag(c: Context, name: string, min: 0 | 1 = 1): number | undefined {
  const v = c.flags[name];
  return v === undefined ? undefined : wholeNumber(`--${name}`, String(v), min);
}

function seqArg(c: Context, i: number, name: string): number {
  return wholeNumber(`<${name}>`, arg(c, i, name), 1);
}

/** True when the store holds `stream` as `ls` would list it (a deleted stream's tombstone does not count). */
async function streamExists(c: Context, stream: string): Promise<boolean> {
  checkEngineOptions({ store: c.store, stream }); // INVALID_ARGUMENT for an id no stream can have
  // ls's own listing, so that a command finds a stream exactly when ls shows it.
  return (await listStreams(c.store, { prefix: stream })).includes(stream);
}

/** The NOT_FOUND of a stream the store holds nothing of: a typo must not pass as a stream with no checkpoints. */
const noStream = (c: Context, stream: string): StatefoldError =>
  new StatefoldError('NOT_FOUND', `no stream ${JSON.stringify(stream)} in ${c.storeName}`, { stream });

/** The stream argument of a command that reads or trims its history; NOT_FOUND when the store holds nothing of it. */
export async function existingStream(c: Context): Promise<string> {
  const stream = arg(c, 1, 'stream');
  if (!(await streamExists(c, stream))) throw noStream(c, stream);
  return stream;
}

export const enc = (c: Context): { encryption?: Encryption } => (c.encryption ? { encryption: c.encryption } : {});

export const COMMANDS: Record<string, Command> = {
  ls: {
    usage: 'ls <store> [--prefix P]',
    params: ['store'],
    options: ['prefix'],
    help: 'Lists the streams in the store (ids as given, hashed ids too), optionally those starting with P.',
    async run(c) {
      const prefix = typeof c.flags.prefix === 'string' ? c.flags.prefix : undefined;
      const bar = progressBar('ls', 'streams found');
      const ids = await listStreams(c.store, {
        ...(prefix !== undefined && { prefix }),
        onProgress: (p) => bar.update(p.found, p.found),
      }).finally(() => bar.stop());
      print(c, () => ids.join('\n'), ids);
      return 0;
    },
  },
  log: {
    usage: 'log <store> <stream> [--limit N] [--before SEQ] [--all]',
    params: ['store', 'stream'],
    options: ['limit', 'before', 'all'],
    help: 'Lists checkpoints, newest first: 20 unless --limit N or --all; --before SEQ pages back. Damaged ones are listed as such (exit 1).',
    async run(c) {
      const before = numberFlag(c, 'before');
      const given = numberFlag(c, 'limit');
      const limit = c.flags.all === true ? undefined : (given ?? 20);
      const stream = await existingStream(c);
      const list = await listCheckpoints(c.store, stream, {
        reverse: true,
        ...(limit !== undefined && { limit }),
        ...(before !== undefined && { before }),
        ...enc(c),
      });
      const rows = list.map((e) =>
        e.damaged
          ? `${String(e.seq).padStart(8)}  DAMAGED  ${e.error.message}`
          : `${String(e.seq).padStart(8)}  ${e.kind.padEnd(5)} ${String(e.bytes).padStart(9)} B  ${new Date(e.createdAt).toISOString()}  base ${e.base}  epoch ${e.epoch}${e.filler ? '  filler' : ''}${e.effects.length ? `  effects ${e.effects.map((x) => `${x.token}:${x.status}`).join(',')}` : ''}`,
      );
      print(
        c,
        () => [`     seq  kind       bytes    created                   chain`, ...rows].join('\n'),
        list.map((e) =>
          e.damaged ? { seq: e.seq, damaged: true, error: { code: e.error.code, message: e.error.message } } : e,
        ),
      );
      return list.some((e) => e.damaged) ? 1 : 0;
    },
  },
  show: {
    usage: 'show <store> <stream> [--seq N] [--path /json/pointer]',
    params: ['store', 'stream'],
    options: ['seq', 'path'],
    help: 'Prints the state of the newest checkpoint (or of --seq N), or the value at --path in it, as JSON (lossless, see README).',
    async run(c) {
      const seq = numberFlag(c, 'seq');
      const r = await restore(c.store, arg(c, 1, 'stream'), {
        ...(seq !== undefined && { seq }),
        ...enc(c),
        schema: 'stored',
      });
      const path = typeof c.flags.path === 'string' ? c.flags.path : '';
      const value = at(r.state, path);
      const data = {
        seq: r.seq,
        kind: r.kind,
        createdAt: new Date(r.createdAt).toISOString(),
        meta: r.meta,
        path,
        value,
      };
      print(c, () => JSON.stringify(toJson(value), null, 2), data);
      return 0;
    },
  },
  diff: {
    usage: 'diff <store> <stream> <seqA> <seqB>',
    params: ['store', 'stream', 'seqA', 'seqB'],
    options: [],
    help: 'Prints the RFC 6902 operations that turn checkpoint seqA into seqB.',
    async run(c) {
      const ops = await diffCheckpoints(
        c.store,
        arg(c, 1, 'stream'),
        seqArg(c, 2, 'seqA'),
        seqArg(c, 3, 'seqB'),
        enc(c),
      );
      const line = (o: (typeof ops)[number]): string =>
        `${o.op.padEnd(7)} ${o.path}${'value' in o ? ` ${JSON.stringify(toJson(o.value))}` : ''}`;
      print(c, () => ops.map(line).join('\n'), ops);
      return 0;
    },
  },
  verify: {
    usage: 'verify <store> <stream>',
    params: ['store', 'stream'],
    options: [],
    help: 'Reads, verifies and folds every retained checkpoint. Exit 1 when any does not restore.',
    async run(c) {
      const stream = await existingStream(c);
      const bar = progressBar('verify');
      const report = await verifyStream(c.store, stream, {
        ...enc(c),
        onProgress: (p) => bar.update(p.checked, p.total),
      }).finally(() => bar.stop());
      const human = (): string =>
        [
          `${report.checked} checked, ${report.intact.length} intact, ${report.damaged.length} damaged; newest intact seq ${report.newestIntact}`,
          ...report.damaged.map((d) => `  seq ${d.seq}: ${d.error.message}`),
        ].join('\n');
      const data = {
        ...report,
        damaged: report.damaged.map((d) => ({ seq: d.seq, code: d.error.code, message: d.error.message })),
      };
      print(c, human, data);
      return report.damaged.length > 0 ? 1 : 0;
    },
  },
  restore: {
    usage: 'restore <store> <stream> [--seq N] --out FILE',
    params: ['store', 'stream'],
    options: ['seq', 'out'],
    help: 'Writes the state of the newest checkpoint (or --seq N) to FILE as JSON (lossless, see README); - for stdout.',
    async run(c) {
      const out = c.flags.out;
      if (typeof out !== 'string') throw new UsageError('restore needs --out FILE (- for stdout)');
      const seq = numberFlag(c, 'seq');
      const r = await restore(c.store, arg(c, 1, 'stream'), {
        ...(seq !== undefined && { seq }),
        ...enc(c),
        schema: 'stored',
      });
      const text = `${JSON.stringify(toJson(r.state), null, 2)}\n`;
      if (out === '-') process.stdout.write(text);
      else await writeFile(out, text);
      if (out !== '-') print(c, () => `restored seq ${r.seq} (${r.kind}) to ${out}`, { seq: r.seq, kind: r.kind, out });
      return 0;
    },
  },
  gc: {
    usage: 'gc <store> <stream> --keep-last N [--keep-for-ms MS] [--min-age-ms MS]',
    params: ['store', 'stream'],
    options: ['keep-last', 'keep-for-ms', 'min-age-ms'],
    help: 'Deletes the checkpoints the retention does not keep (and never one a kept checkpoint needs).',
    async run(c) {
      const keepLast = numberFlag(c, 'keep-last');
      const keepForMs = numberFlag(c, 'keep-for-ms', 0);
      const minAgeMs = numberFlag(c, 'min-age-ms', 0);
      if (keepLast === undefined && keepForMs === undefined)
        throw new UsageError('gc needs --keep-last N or --keep-for-ms MS');
      const stream = await existingStream(c);
      const bar = progressBar('gc');
      const report = await gc(
        c.store,
        stream,
        {
          ...(keepLast !== undefined && { keepLast }),
          ...(keepForMs !== undefined && { keepForMs }),
          ...(minAgeMs !== undefined && { minAgeMs }),
        },
        { onProgress: (p) => bar.update(p.deleted, p.total) },
      ).finally(() => bar.stop());
      print(
        c,
        () =>
          `deleted ${report.deleted.length} checkpoints (${report.deletedKeys} objects); oldest retained seq ${report.oldestRetained}`,
        report,
      );
      return 0;
    },
  },
  rm: {
    usage: 'rm <store> <stream> --yes [--if-exists]',
    params: ['store', 'stream'],
    options: ['yes', 'if-exists'],
    help: 'Deletes the stream (fencing it first; a tombstone of three small objects without state stays). Needs --yes. A stream the store holds nothing of is NOT_FOUND (exit 3), or with --if-exists nothing to do (exit 0).',
    async run(c) {
      const stream = arg(c, 1, 'stream');
      if (c.flags.yes !== true) throw new UsageError(`rm deletes all of ${JSON.stringify(stream)}: add --yes`);
      if (!(await streamExists(c, stream))) {
        if (c.flags['if-exists'] !== true) throw noStream(c, stream);
        print(c, () => `no stream ${JSON.stringify(stream)}: nothing deleted`, { deletedKeys: 0 });
        return 0;
      }
      const bar = progressBar('rm');
      const report = await deleteStream(c.store, stream, { onProgress: (p) => bar.update(p.deleted, p.total) }).finally(
        () => bar.stop(),
      );
      print(c, () => `deleted ${JSON.stringify(stream)}: ${report.deletedKeys} objects`, report);
      return 0;
    },
  },
  fork: {
    usage: 'fork <store> <from> <to> [--seq N]',
    params: ['store', 'from', 'to'],
    options: ['seq'],
    help: 'Creates stream <to> from checkpoint N (default: newest) of <from>, carrying its effect ledger.',
    async run(c) {
      const seq = numberFlag(c, 'seq');
      const info = await forkStream(c.store, arg(c, 1, 'from'), arg(c, 2, 'to'), {
        ...(seq !== undefined && { seq }),
        ...enc(c),
      });
      print(
        c,
        () =>
          `forked ${JSON.stringify(info.from.stream)} seq ${info.from.seq} into ${JSON.stringify(info.stream)} (${info.effects} effect records carried)`,
        info,
      );
      return 0;
    },
  },
};

/** The value at a JSON Pointer ('' for the whole). */
function at(root: unknown, path: string): unknown {
  if (path === '') return root;
  if (!path.startsWith('/')) throw new UsageError(`--path ${path}: a JSON Pointer starts with /`);
  let v = root;
  for (const raw of path.split('/').slice(1)) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key))
      throw new UsageError(`--path ${path}: nothing at ${JSON.stringify(key)}`);
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/** Keys from `--key id=FILE` (32 raw bytes, or 64 hex characters) and `--current id` (default: the first). */
export async function keysFrom(flags: Context['flags']): Promise<Encryption | undefined> {
  const specs = flags.key === undefined ? [] : ([] as string[]).concat(flags.key as string | string[]);
  if (specs.length === 0) return undefined;
  const keys: Record<string, Uint8Array> = {};
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    if (eq <= 0) throw new UsageError(`--key ${spec}: give id=FILE`);
    const raw = await readFile(spec.slice(eq + 1)).catch((err: Error) => {
      throw new UsageError(`--key ${spec}: ${err.message}`);
    });
    const text = raw.toString('utf8').trim();
    keys[spec.slice(0, eq)] = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : raw;
  }
  const current = typeof flags.current === 'string' ? flags.current : Object.keys(keys)[0]!;
  return { keys, current };
}
