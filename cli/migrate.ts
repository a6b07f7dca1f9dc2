/**
 * `statefold migrate`: a schema's migrations over the store's streams (migrateStreams), a dry run
 * or an apply, with progress, each failure reported, resumable with --after.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { migrateStreams, type MigrateReport, type Schema } from '../engine/index.js';
import type { Command, Context } from './commands.js';
import { toJson } from './json.js';
import { progressBar } from './progress.js';
import { UsageError } from './store.js';

/** The modules tried, in the working directory, when no --schema is given. */
const DEFAULT_MODULES = ['statefold.schema.mjs', 'statefold.schema.js'];

/** The `schema` a module exports (`export const schema = { version, migrate }`). */
async function schemaFrom(c: Context): Promise<Schema> {
  const given = typeof c.flags.schema === 'string' ? c.flags.schema : undefined;
  const file = given ?? DEFAULT_MODULES.find((f) => existsSync(f));
  if (file === undefined)
    throw new UsageError(`no --schema MODULE given, and no ${DEFAULT_MODULES.join(' or ')} in ${process.cwd()}`);
  let module: { schema?: unknown };
  try {
    module = (await import(pathToFileURL(path.resolve(file)).href)) as { schema?: unknown };
  } catch (err) {
    throw new UsageError(`--schema ${file}: cannot be imported: ${(err as Error).message}`);
  }
  if (module.schema === undefined) throw new UsageError(`--schema ${file}: exports no \`schema\``);
  return module.schema as Schema;
}

export const MIGRATE: Command = {
  usage: 'migrate <store> [stream...] (--dry-run | --apply) [--schema MODULE] [--after STREAM]',
  params: ['store'],
  rest: 'stream',
  options: ['schema', 'dry-run', 'apply', 'after'],
  help: "Runs a schema's migrations over the streams named (default: every stream), from the `schema` that MODULE exports (default: ./statefold.schema.mjs or .js). --dry-run restores each stream's newest checkpoint through them and writes nothing; --apply writes one base in the new version per stream stored in an older one (a stream already in it is skipped, so a rerun resumes). Each failure is reported (exit 1); --after STREAM skips the streams up to it, as a stopped run printed.",
  async run(c) {
    const dry = c.flags['dry-run'] === true;
    const apply = c.flags.apply === true;
    if (dry === apply) throw new UsageError('give exactly one of --dry-run and --apply');
    const schema = await schemaFrom(c);
    const after = typeof c.flags.after === 'string' ? c.flags.after : undefined;
    const named = c.args.slice(1);
    const bar = progressBar(dry ? 'migrate (dry run)' : 'migrate', 'streams');
    /** The last stream finished. */
    let done: string | undefined;
    const interrupted = (): void => {
      // Streams are done one at a time, in order: every stream before the one in hand is done.
      const resume = done === undefined ? '' : ` --after ${JSON.stringify(done)}`;
      process.stderr.write(`\nstopped: run it again${resume} to resume\n`);
      process.exit(130);
    };
    process.once('SIGINT', interrupted);
    let report: MigrateReport;
    try {
      report = await migrateStreams(c.store, {
        schema,
        apply,
        ...(named.length > 0 && { streams: named }),
        ...(after !== undefined && { after }),
        ...(c.encryption && { encryption: c.encryption }),
        concurrency: 1, // (in order: a stopped run's last stream has every one before it done)
        onProgress: (p) => {
          done = p.stream;
          bar.update(p.done, p.total);
        },
      });
    } finally {
      bar.stop();
      process.off('SIGINT', interrupted);
    }
    const counts = new Map<string, number>();
    for (const s of report.streams) counts.set(s.status, (counts.get(s.status) ?? 0) + 1);
    const human = () =>
      [
        ...report.streams
          .filter((s) => s.status === 'failed')
          .map((s) => `FAILED ${JSON.stringify(s.stream)}: ${s.error!.code}: ${s.error!.message}`),
        `${report.streams.length} streams: ${[...counts].map(([k, n]) => `${n} ${k}`).join(', ') || 'none'}`,
      ].join('\n');
    c.out(c.json ? JSON.stringify(toJson(report)) : human());
    return report.failed.length > 0 ? 1 : 0;
  },
};
