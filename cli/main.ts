#!/usr/bin/env node
/**
 * The `statefold` command: operating streams from a shell (list, inspect, diff, verify, restore,
 * trim, delete, fork), on a directory or an S3 bucket. Exit codes: 0 ok, 1 damage found, 2 usage,
 * 3 any other failure (a missing store, stream or key, the store failing).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { isStatefoldError } from '../engine/index.js';
import { COMMANDS as BASIC, keysFrom, type Command, type Context } from './commands.js';
import { MIGRATE } from './migrate.js';
import { DU } from './du.js';

const COMMANDS: Record<string, Command> = { ...BASIC, du: DU, migrate: MIGRATE };
import { openStore, storeFailure, UsageError } from './store.js';

const GLOBAL = `
Stores: a SQLite database file or sqlite:PATH (SqliteStore; it must exist), a directory or
file:// URL (FileStore; it must exist), or s3://bucket/prefix (S3Store;
endpoint from --endpoint, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL; region from --region, AWS_REGION
or the AWS profile, us-east-1 with an endpoint; credentials from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), or AWS_PROFILE).
Options for every command:
  --json               machine-readable output on stdout (lossless JSON, see README)
  --key ID=FILE        a key of an encrypted stream (32 bytes, or 64 hex characters); repeatable
  --current ID         the key new checkpoints are sealed with (fork; default: the first --key)
  --endpoint URL       S3-compatible endpoint (MinIO, Ceph RGW, R2)
  --region REGION      S3 region
  -h, --help           help (statefold <command> --help for one command)
Exit codes: 0 ok, 1 damage found, 2 usage, 3 other failure (a missing store or stream too).`;

function usage(): string {
  const lines = Object.values(COMMANDS).map((c) => `  statefold ${c.usage}\n      ${c.help}`);
  return `Usage:\n${lines.join('\n')}\n${GLOBAL}`;
}

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  key: { type: 'string', multiple: true },
  current: { type: 'string' },
  endpoint: { type: 'string' },
  region: { type: 'string' },
  prefix: { type: 'string' },
  seq: { type: 'string' },
  path: { type: 'string' },
  limit: { type: 'string' },
  before: { type: 'string' },
  all: { type: 'boolean' },
  out: { type: 'string' },
  'keep-last': { type: 'string' },
  'keep-for-ms': { type: 'string' },
  'min-age-ms': { type: 'string' },
  yes: { type: 'boolean' },
  'if-exists': { type: 'boolean' },
  schema: { type: 'string' },
  'dry-run': { type: 'boolean' },
  apply: { type: 'boolean' },
  after: { type: 'string' },
  last: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

/** The options every command takes (see GLOBAL); each command names its own. */
const FOR_EVERY_COMMAND = new Set(['json', 'help', 'key', 'current', 'endpoint', 'region']);

/** Options whose value is a number: there `-3` is a (negative, so refused) number, not an option. */
const NUMERIC = new Set(['seq', 'limit', 'before', 'keep-last', 'keep-for-ms', 'min-age-ms', 'last']);

/**
 * Why the options of `tokens` cannot be run as given, or undefined: an unknown option, one that is
 * not `command`'s (it would be ignored: `verify --seq 5` must not verify every seq and pass), a
 * value missing or where none is taken. parseArgs' strict mode says some of this in paragraphs of
 * its own, and calls `--limit -3` ambiguous; here that is the value -3, which the command refuses.
 */
function optionProblem(
  tokens: NonNullable<ReturnType<typeof parseArgs>['tokens']>,
  name: string | undefined,
  command: Command | undefined,
): string | undefined {
  for (const t of tokens) {
    if (t.kind !== 'option') continue;
    if (!Object.hasOwn(OPTIONS, t.name)) return `unknown option ${t.rawName}`;
    if (command !== undefined && !FOR_EVERY_COMMAND.has(t.name) && !command.options.includes(t.name))
      return `${t.rawName} is not an option of ${name}`;
    const type = OPTIONS[t.name as keyof typeof OPTIONS].type;
    if (type === 'boolean' && t.value !== undefined) return `${t.rawName} takes no value`;
    if (type === 'string') {
      const v = t.value;
      if (v === undefined) return `${t.rawName} needs a value`;
      if (!t.inlineValue && v.startsWith('-') && !(NUMERIC.has(t.name) && /^-[0-9]/.test(v)))
        return `${t.rawName} needs a value (got ${v}; write ${t.rawName}=${v} to mean it)`;
    }
  }
  return undefined;
}

async function main(argv: string[]): Promise<number> {
  // Not strict: optionProblem checks the options, with the command's name known when they are wrong.
  const parsed = parseArgs({ args: argv, allowPositionals: true, strict: false, tokens: true, options: OPTIONS });
  const flags = parsed.values as Context['flags'];
  const [name, ...args] = parsed.positionals;
  const command = name === undefined ? undefined : COMMANDS[name];
  const problem = optionProblem(parsed.tokens, name, command);
  if (problem !== undefined) {
    const who = command === undefined ? 'statefold' : `statefold ${name}`;
    process.stderr.write(`${who}: ${problem}; see ${who} --help\n`);
    return 2;
  }
  if (flags.help === true || name === undefined || name === 'help') {
    const wanted = name === 'help' ? COMMANDS[args[0] ?? ''] : command;
    process.stdout.write(`${wanted ? `Usage: statefold ${wanted.usage}\n\n${wanted.help}\n${GLOBAL}` : usage()}\n`);
    return name === undefined && flags.help !== true ? 2 : 0;
  }
  if (command === undefined) {
    process.stderr.write(`statefold: unknown command ${JSON.stringify(name)}\n\n${usage()}\n`);
    return 2;
  }
  const spec = args[0] ?? '';
  let opened: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    const missing = command.params.find((_, i) => args[i] === undefined);
    if (missing !== undefined) throw new UsageError(`missing <${missing}>`);
    if (command.rest === undefined && args.length > command.params.length)
      throw new UsageError(`unexpected argument ${JSON.stringify(args[command.params.length])}`);
    opened = await openStore(spec, { endpoint: str(flags.endpoint), region: str(flags.region) });
    const encryption = await keysFrom(flags);
    return await command.run({
      args,
      flags,
      store: opened.store,
      storeName: spec,
      json: flags.json === true,
      encryption,
      out: (text) => process.stdout.write(text === '' ? '' : `${text}\n`),
    });
  } catch (caught) {
    let err = caught;
    if (err instanceof UsageError || isStatefoldError(err, 'INVALID_ARGUMENT')) {
      process.stderr.write(`statefold ${name}: ${(err as Error).message}\nUsage: statefold ${command.usage}\n`);
      return 2;
    }
    // The store failing is told in the terms of the command line, not of the keys statefold made of it.
    if (isStatefoldError(err, 'STORAGE') || isStatefoldError(err, 'TIMEOUT')) {
      const stream = command.params[1] === 'stream' ? args[1] : undefined;
      const where = stream === undefined ? `store ${spec}` : `stream ${JSON.stringify(stream)} in ${spec}`;
      err = storeFailure(err, spec, where);
    }
    const code = isStatefoldError(err) ? err.code : 'ERROR';
    process.stderr.write(`statefold ${name}: ${code}: ${(err as Error)?.message ?? String(err)}\n`);
    return isStatefoldError(err, 'CORRUPT') ? 1 : 3;
  } finally {
    await opened?.close();
  }
}

/** A flag's value when it is a string (parseArgs' values are typed loosely when not strict). */
const str = (v: Context['flags'][string]): string | undefined => (typeof v === 'string' ? v : undefined);

process.exitCode = await main(process.argv.slice(2));
