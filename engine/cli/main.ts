#!/usr/bin/env node
/**
 * The `statefold` command: operating streams from a shell (list, inspect, diff, verify, restore,
 * trim, delete, fork), on a directory or an S3 bucket. Exit codes: 0 ok, 1 damage found, 2 usage,
 * 3 any other failure (a missing stream or key, the store failing).
 */
import { parseArgs } from 'node:util';
import { isStatefoldError } from '../errors.js';
import { COMMANDS, keysFrom } from './commands.js';
import { openStore, UsageError } from './store.js';

const GLOBAL = `
Stores: a directory or file:// URL (FileStore), or s3://bucket/prefix (S3Store; endpoint and region
from --endpoint/--region or AWS_ENDPOINT_URL and AWS_REGION, credentials from the usual AWS variables).
Options for every command:
  --json               machine-readable output on stdout (lossless JSON, see README)
  --key ID=FILE        a key of an encrypted stream (32 bytes, or 64 hex characters); repeatable
  --current ID         the key new checkpoints are sealed with (fork; default: the first --key)
  --endpoint URL       S3-compatible endpoint (MinIO, Ceph RGW, R2)
  --region REGION      S3 region
  -h, --help           help (statefold <command> --help for one command)
Exit codes: 0 ok, 1 damage found, 2 usage, 3 other failure.`;

function usage(): string {
  const lines = Object.values(COMMANDS).map((c) => `  statefold ${c.usage}\n      ${c.help}`);
  return `Usage:\n${lines.join('\n')}\n${GLOBAL}`;
}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
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
      },
    });
  } catch (err) {
    process.stderr.write(`statefold: ${(err as Error).message}\n\n${usage()}\n`);
    return 2;
  }
  const [name, ...args] = parsed.positionals;
  const command = name === undefined ? undefined : COMMANDS[name];
  if (parsed.values.help === true || name === undefined || name === 'help') {
    const wanted = name === 'help' ? COMMANDS[args[0] ?? ''] : command;
    process.stdout.write(`${wanted ? `Usage: statefold ${wanted.usage}\n\n${wanted.help}\n${GLOBAL}` : usage()}\n`);
    return name === undefined && parsed.values.help !== true ? 2 : 0;
  }
  if (command === undefined) {
    process.stderr.write(`statefold: unknown command ${JSON.stringify(name)}\n\n${usage()}\n`);
    return 2;
  }
  let opened: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    if (args[0] === undefined) throw new UsageError('missing <store>');
    opened = await openStore(args[0], { endpoint: parsed.values.endpoint, region: parsed.values.region });
    const encryption = await keysFrom(parsed.values);
    return await command.run({
      args,
      flags: parsed.values,
      store: opened.store,
      json: parsed.values.json === true,
      encryption,
      out: (text) => process.stdout.write(text === '' ? '' : `${text}\n`),
    });
  } catch (err) {
    if (err instanceof UsageError || isStatefoldError(err, 'INVALID_ARGUMENT')) {
      process.stderr.write(`statefold ${name}: ${(err as Error).message}\nUsage: statefold ${command.usage}\n`);
      return 2;
    }
    const code = isStatefoldError(err) ? err.code : 'ERROR';
    process.stderr.write(`statefold ${name}: ${code}: ${(err as Error)?.message ?? String(err)}\n`);
    return isStatefoldError(err, 'CORRUPT') ? 1 : 3;
  } finally {
    opened?.close();
  }
}

process.exitCode = await main(process.argv.slice(2));
