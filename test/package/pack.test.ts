import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The package as a user gets it: `npm pack` on a copy of the repository's files, so that its
// prepare script builds dist/ there as on a fresh clone (and no build races the other test files
// reading this repository's dist/), then `npm install <tarball>` into an empty folder outside the
// repository, and plain node processes importing 'statefold' by name from there. The AWS SDK is
// an optional peer: nothing installs it.

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const npmBin = process.platform === 'win32' ? 'npm.cmd' : 'npm';
let tmp: string;
let consumer: string;
let packed: { filename: string; files: { path: string }[] };

/** The environment without the variables an enclosing `npm test` set for itself (its prefix, its package). */
function childEnv(): NodeJS.ProcessEnv {
  const drop = /^(npm_(lifecycle_|package_|command$|execpath$|node_execpath$|config_local_prefix$)|INIT_CWD$)/i;
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !drop.test(k)));
}

async function npm(args: string[], cwd: string, timeout: number): Promise<string> {
  try {
    const { stdout } = await run(npmBin, args, { cwd, env: childEnv(), timeout, maxBuffer: 64 << 20 });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm ${args.join(' ')} failed: ${e.message}\n${e.stderr ?? ''}`);
  }
}

/**
 * Runs a script in the consumer folder with the node running the tests (an ES module, or CommonJS
 * for `probe.cjs`); returns what it prints as JSON.
 */
async function node(script: string, nodeArgs: string[] = [], name = 'probe.mjs'): Promise<unknown> {
  const file = path.join(consumer, name);
  await writeFile(file, script);
  const { stdout } = await run(process.execPath, [...nodeArgs, file], {
    cwd: consumer,
    env: childEnv(),
    timeout: 60_000,
  });
  return JSON.parse(stdout);
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'statefold-pack-'));
  // What a clone would hold: the tracked files plus new ones not ignored (so uncommitted work counts).
  const src = path.join(tmp, 'src');
  const { stdout: listed } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    maxBuffer: 64 << 20,
  });
  for (const rel of new Set(listed.split('\0').filter(Boolean))) {
    if (!existsSync(path.join(root, rel))) continue; // deleted in the working tree
    await mkdir(path.dirname(path.join(src, rel)), { recursive: true });
    await cp(path.join(root, rel), path.join(src, rel));
  }
  expect(existsSync(path.join(src, 'dist'))).toBe(false);
  await symlink(path.join(root, 'node_modules'), path.join(src, 'node_modules'), 'dir');
  const out = await npm(['pack', '--json', '--pack-destination', tmp], src, 180_000);
  // npm pack prints the prepare script's output first; its JSON starts on a line of its own.
  const [entry] = JSON.parse(out.slice(out.search(/^\[$/m))) as (typeof packed)[];
  if (entry === undefined) throw new Error(`npm pack listed no package: ${out}`);
  packed = entry;

  consumer = path.join(tmp, 'consumer');
  await mkdir(consumer);
  const tarball = path.join(tmp, packed.filename);
  // What a user writes to approve the native builds (npm 11 warns about any install script not listed).
  // The tarball's own prepare is denied (matched by its path, as npm matches non-registry packages):
  // it carries dist/ already.
  const allowScripts = { lz4: true, 'msgpackr-extract': true, [`file:${tarball}`]: false };
  await writeFile(
    path.join(consumer, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type: 'module', allowScripts }),
  );
  // --strict-allow-scripts: an install script not approved above fails the install instead of warning.
  await npm(
    ['install', '--prefer-offline', '--no-audit', '--no-fund', '--strict-allow-scripts', tarball],
    consumer,
    300_000,
  );
}, 540_000);

afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('package: npm pack', () => {
  it('ships dist/ with declarations, LICENSE and README, and no TypeScript sources or tests', async () => {
    const files = packed.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'LICENSE',
        'README.md',
        'dist/engine/index.js',
        'dist/engine/index.d.ts',
      ]),
    );
    expect(
      files.filter((f) => !f.startsWith('dist/') && !['package.json', 'LICENSE', 'README.md'].includes(f)),
    ).toEqual([]);
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => /(^|\/)(test|bench)\//.test(f))).toEqual([]);
    // Declaration maps would point at .ts files that are not shipped.
    expect(files.filter((f) => f.endsWith('.d.ts.map'))).toEqual([]);
    // Every file that an export of package.json names is in the tarball.
    const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as {
      exports: Record<string, string | Record<string, string>>;
    };
    const targets = Object.values(pkg.exports).flatMap((t) => (typeof t === 'string' ? [t] : Object.values(t)));
    expect(targets.length).toBeGreaterThan(4);
    expect(targets.map((t) => t.replace(/^\.\//, '')).filter((t) => !files.includes(t))).toEqual([]);
  });

  it('installs into an empty folder without the AWS SDK', () => {
    expect(existsSync(path.join(consumer, 'node_modules', 'statefold', 'dist', 'engine', 'index.js'))).toBe(true);
    expect(existsSync(path.join(consumer, 'node_modules', '@aws-sdk'))).toBe(false);
  });
});

describe('package: installed from the tarball', () => {
  it('checkpoints to a FileStore and restores, importing statefold by name', async () => {
    const out = await node(`
import { SnapshotEngine, FileStore, restore, listCheckpoints } from 'statefold';
const store = new FileStore({ dir: './data' });
const states = [];
let engine = await SnapshotEngine.open({ store, stream: 'agent' });
const state = { messages: [], notes: 'x'.repeat(4000) };
for (let i = 0; i < 4; i++) {
  state.messages.push({ role: 'user', text: 'step ' + i });
  await engine.checkpoint(state, { meta: { step: i } });
  states.push(structuredClone(state));
}
await engine.close();
engine = await SnapshotEngine.open({ store, stream: 'agent' });
const reopened = { seq: engine.seq, state: engine.state };
await engine.close();
const first = await restore(store, 'agent', { seq: 1 });
const list = await listCheckpoints(store, 'agent');
const out = { states, reopened, first: { state: first.state, meta: first.meta }, kinds: list.map((c) => c.kind) };
console.log(JSON.stringify(out));
`);
    const { states, reopened, first, kinds } = out as {
      states: unknown[];
      reopened: { seq: number; state: unknown };
      first: unknown;
      kinds: string[];
    };
    expect(reopened).toEqual({ seq: 4, state: states[3] });
    expect(first).toEqual({ state: states[0], meta: { step: 0 } });
    expect(kinds).toHaveLength(4);
    // The 4 KB note is written once: later checkpoints are deltas, through msgpackr and the lz4 addon.
    expect(kinds.slice(1)).toContain('delta');
  });

  it('resolves stack traces to the TypeScript sources through the shipped source maps', async () => {
    const script = `
import { FileStore } from 'statefold';
let stack;
try { new FileStore({ dir: '' }); } catch (e) { stack = e.stack; }
console.log(JSON.stringify(stack));
`;
    const mapped = (await node(script, ['--enable-source-maps'])) as string;
    expect(mapped).toMatch(/INVALID_ARGUMENT|options\.dir/);
    expect(mapped).toMatch(/storage-adapters\/file\/index\.ts:\d+:\d+/);
    expect((await node(script)) as string).toMatch(/dist\/storage-adapters\/file\/index\.js:\d+:\d+/);
    // The maps carry the sources themselves: the .ts files are not in the package.
    const dist = path.join(consumer, 'node_modules', 'statefold', 'dist');
    const map = JSON.parse(await readFile(path.join(dist, 'storage-adapters', 'file', 'index.js.map'), 'utf8')) as {
      sources: string[];
      sourcesContent?: string[];
    };
    expect(map.sources).toEqual(['../../../storage-adapters/file/index.ts']);
    expect(map.sourcesContent).toEqual([
      await readFile(path.join(root, 'storage-adapters', 'file', 'index.ts'), 'utf8'),
    ]);
  });

  it('typechecks a consumer against the shipped declarations', async () => {
    await writeFile(
      path.join(consumer, 'check.ts'),
      `import { SnapshotEngine, FileStore, restore, type CheckpointInfo } from 'statefold';
const engine: SnapshotEngine<{ n: number }> = await SnapshotEngine.open<{ n: number }>({ store: new FileStore({ dir: 'data' }), stream: 's' });
const info: CheckpointInfo = await engine.checkpoint({ n: 1 });
const seq: number = info.seq;
// @ts-expect-error a stream needs a store
await SnapshotEngine.open({ stream: 's' });
// @ts-expect-error the state's type is checked
await engine.checkpoint({ n: 'one' });
export const restored = [seq, (await restore(new FileStore({ dir: 'data' }), 's')).seq];
`,
    );
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const args = [
      '--noEmit',
      '--strict',
      '--target',
      'es2022',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
    ];
    // @types/node comes from the repository: a TypeScript user of a Node library has it.
    args.push('--typeRoots', path.join(root, 'node_modules', '@types'), '--types', 'node', 'check.ts');
    const result = await run(process.execPath, [tsc, ...args], { cwd: consumer, timeout: 120_000 }).then(
      () => '',
      (err: { stdout?: string; message: string }) => err.stdout || err.message,
    );
    expect(result).toBe('');
  });

  it('runs the statefold bin npm linked: ls lists a stream written through the package', async () => {
    await node(`
import { SnapshotEngine, FileStore } from 'statefold';
const engine = await SnapshotEngine.open({ store: new FileStore({ dir: './bin-data' }), stream: 'tenant/agent-7' });
await engine.checkpoint({ step: 1 });
await engine.close();
console.log('null');
`);
    // Run as a shell would: the link npm made, through its #! line, with this test's node first on PATH.
    const bin = path.join(consumer, 'node_modules', '.bin', 'statefold');
    const env = { ...childEnv(), PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}` };
    const { stdout } = await run(bin, ['ls', 'bin-data'], { cwd: consumer, env, timeout: 60_000 });
    expect(stdout).toBe('tenant/agent-7\n');
  });

  it('fails to import statefold/s3 with a message that names the missing peer dependency', async () => {
    const out = await node(`
let out;
try { await import('statefold/s3'); out = 'loaded'; } catch (e) { out = String(e.message); }
console.log(JSON.stringify(out));
`);
    expect(out).toMatch(/optional peer dependency @aws-sdk\/client-s3/);
  });

  it('fails to import statefold/testing without vitest with a message that names the missing peer dependency', async () => {
    expect(existsSync(path.join(consumer, 'node_modules', 'vitest'))).toBe(false);
    const out = await node(`
let out;
try { await import('statefold/testing'); out = 'loaded'; } catch (e) { out = String(e.message); }
console.log(JSON.stringify(out));
`);
    expect(out).toMatch(/^statefold\/testing needs the optional peer dependency vitest, which is not installed/);
  });

  it('fails to import statefold/langgraph with a message that names the missing peer dependencies', async () => {
    const out = await node(`
let out;
try { await import('statefold/langgraph'); out = 'loaded'; } catch (e) { out = String(e.message); }
console.log(JSON.stringify(out));
`);
    expect(out).toMatch(/optional peer dependencies @langchain\/langgraph-checkpoint and @langchain\/core/);
  });
});

/** A CommonJS script that requires each of `subpaths` and prints, per subpath, its export names or its error. */
const requireEach = (subpaths: string[]): string => `
const out = {};
for (const p of ${JSON.stringify(subpaths)}) {
  try { out[p] = Object.keys(require(p)).sort(); } catch (e) { out[p] = { code: e.code, message: e.message }; }
}
console.log(JSON.stringify(out));
`;

describe('package: required from CommonJS', () => {
  it('requires statefold and statefold/kit, and checkpoints and restores through require', async () => {
    const out = (await node(requireEach(['statefold', 'statefold/kit']), [], 'probe.cjs')) as Record<string, unknown>;
    expect(out['statefold']).toEqual(expect.arrayContaining(['SnapshotEngine', 'FileStore', 'restore']));
    expect(out['statefold/kit']).toEqual(expect.arrayContaining(['retry', 'TransientError']));
    const restored = await node(
      `
const { SnapshotEngine, FileStore, restore } = require('statefold');
(async () => {
  const store = new FileStore({ dir: './cjs-data' });
  const engine = await SnapshotEngine.open({ store, stream: 'cjs' });
  await engine.checkpoint({ n: 1, text: 'y'.repeat(2000) });
  await engine.checkpoint({ n: 2, text: 'y'.repeat(2000) });
  await engine.close();
  const { seq, state } = await restore(store, 'cjs');
  console.log(JSON.stringify({ seq, n: state.n }));
})();
`,
      [],
      'probe.cjs',
    );
    expect(restored).toEqual({ seq: 2, n: 2 });
  });

  it('requires the optional entries without their peers and gets the same messages as import', async () => {
    const out = (await node(
      requireEach(['statefold/s3', 'statefold/postgres', 'statefold/langgraph', 'statefold/testing']),
      [],
      'probe.cjs',
    )) as Record<string, { message: string }>;
    expect(out['statefold/s3']!.message).toMatch(/optional peer dependency @aws-sdk\/client-s3/);
    expect(out['statefold/postgres']!.message).toMatch(/optional peer dependency pg, which is not installed/);
    expect(out['statefold/langgraph']!.message).toMatch(
      /optional peer dependencies @langchain\/langgraph-checkpoint and @langchain\/core/,
    );
    expect(out['statefold/testing']!.message).toMatch(/optional peer dependency vitest/);
  });

  it('requires every entry once its peers are installed', async () => {
    // The repository's own copies of the peers, linked into the consumer's node_modules.
    const peers = ['@aws-sdk', '@langchain', 'pg', 'vitest'];
    for (const name of peers)
      await symlink(path.join(root, 'node_modules', name), path.join(consumer, 'node_modules', name), 'dir');
    try {
      const out = await node(
        requireEach([
          'statefold',
          'statefold/s3',
          'statefold/postgres',
          'statefold/langgraph',
          'statefold/kit',
          'statefold/testing',
        ]),
        [],
        'probe.cjs',
      );
      expect(out).toEqual({
        statefold: expect.arrayContaining(['SnapshotEngine']),
        'statefold/s3': expect.arrayContaining(['S3Store']),
        'statefold/postgres': expect.arrayContaining(['PostgresStore', 'postgresSchema']),
        'statefold/langgraph': ['StatefoldSaver', 'saverMigrations'],
        'statefold/kit': expect.arrayContaining(['retry']),
        'statefold/testing': ['FaultStore', 'describeStoreConformance'],
      });
    } finally {
      for (const name of peers) await rm(path.join(consumer, 'node_modules', name));
    }
  });
});
