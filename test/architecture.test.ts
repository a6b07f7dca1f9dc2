import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

// The module map's rules, checked on the sources: imports follow the data's way (stores at the
// bottom, then format, log, restore; capture and the writer on top), the CLI and the integrations
// stand on the public API alone, and no file grows past what one reader can hold.

const root = path.resolve(import.meta.dirname, '..');
const MAX_LINES = 350;

interface Module {
  /** Path from the repository root, with `/`. */
  file: string;
  lines: number;
  /** Resolved import targets inside the repository (paths from the root, `.ts`). */
  imports: string[];
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...sources(rel));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

function load(file: string): Module {
  const text = readFileSync(path.join(root, file), 'utf8');
  const imports: string[] = [];
  // Static imports and re-exports (`import ... from '...'`, `export ... from '...'`) and dynamic imports.
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*'([^']+)'|import\(\s*'([^']+)'\s*\)/g)) {
    const spec = m[1] ?? m[2]!;
    if (!spec.startsWith('.')) continue;
    imports.push(path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts'));
  }
  return { file, lines: text.split('\n').length, imports };
}

const modules = [
  ...sources('engine'),
  ...sources('storage-adapters'),
  ...sources('cli'),
  ...sources('integrations'),
].map(load);

/** The modules the package exports (package.json "exports"; the file and memory stores come through engine/index.ts). */
const PUBLIC_ENTRIES = [
  'engine/index.ts',
  'storage-adapters/s3/index.ts',
  'storage-adapters/sqlite/index.ts',
  'storage-adapters/kit/index.ts',
  'storage-adapters/testing/index.ts',
];

/** The directory an application's files share: `cli`, or `integrations/<name>`. */
function appDir(file: string): string {
  const parts = file.split('/');
  return parts[0] === 'integrations' ? parts.slice(0, 2).join('/') : parts[0]!;
}

function importsOf(where: (file: string) => boolean): [string, string][] {
  return modules.filter((m) => where(m.file)).flatMap((m) => m.imports.map((to): [string, string] => [m.file, to]));
}

/**
 * One import cycle of `graph` (module -> the modules it imports), as the path that closes it
 * (first module repeated last), or undefined when there is none. A depth-first search that keeps
 * the path it is on: an edge back into that path is a cycle.
 */
function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const done = new Set<string>();
  const onPath: string[] = [];
  const visit = (node: string): string[] | undefined => {
    const at = onPath.indexOf(node);
    if (at >= 0) return [...onPath.slice(at), node];
    if (done.has(node)) return undefined;
    onPath.push(node);
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    onPath.pop();
    done.add(node);
    return undefined;
  };
  for (const node of graph.keys()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}

const under =
  (...dirs: string[]) =>
  (file: string) =>
    dirs.some((d) => file === d || file.startsWith(`${d}/`));

describe('architecture: the module map', () => {
  it('finds the sources it checks', () => {
    expect(modules.length).toBeGreaterThan(30);
    expect(modules.map((m) => m.file)).toContain('engine/engine.ts');
    // The import scan sees imports: every engine module but the leaves imports something.
    expect(importsOf(under('engine')).length).toBeGreaterThan(60);
    expect(modules.map((m) => m.file)).toEqual(
      expect.arrayContaining(['cli/main.ts', 'integrations/langgraph/saver.ts']),
    );
    // Static, multi-line, type-only and dynamic imports are all seen (cli/store.ts loads S3Store on demand).
    expect(importsOf(under('cli', 'integrations'))).toEqual(
      expect.arrayContaining([
        ['cli/commands.ts', 'engine/index.ts'],
        ['cli/store.ts', 'storage-adapters/s3/index.ts'],
        ['integrations/langgraph/index.ts', 'integrations/langgraph/saver.ts'],
      ]),
    );
  });

  it("keeps the CLI and the integrations on the public API: they import only the package's entry modules and their own files", () => {
    const internal = importsOf(under('cli', 'integrations')).filter(
      ([from, to]) => !PUBLIC_ENTRIES.includes(to) && !under(appDir(from))(to),
    );
    expect(internal).toEqual([]);
    // Each of them is what an import path of the package loads.
    const exported = JSON.stringify(JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).exports);
    expect(PUBLIC_ENTRIES.filter((f) => !exported.includes(`dist/${f.replace(/\.ts$/, '.js')}`))).toEqual([]);
  });

  it('keeps the library below its applications: nothing under engine/ or storage-adapters/ imports cli/ or integrations/', () => {
    const upward = importsOf(under('engine', 'storage-adapters')).filter(([, to]) => under('cli', 'integrations')(to));
    expect(upward).toEqual([]);
  });

  it('keeps stores at the bottom: nothing under storage-adapters/ imports engine/', () => {
    const climbing = importsOf(under('storage-adapters')).filter(([, to]) => to.startsWith('engine/'));
    expect(climbing).toEqual([]);
  });

  it('keeps the commit path off the open path: writer/ imports nothing from open/', () => {
    expect(importsOf(under('engine/writer')).filter(([, to]) => under('engine/open')(to))).toEqual([]);
  });

  it('keeps the read side off the write side: format/, log/, restore/ and retention import no capture, writer, open or effect runner', () => {
    const readSide = under(
      'engine/format',
      'engine/log',
      'engine/restore',
      'engine/retention.ts',
      'engine/args.ts',
      'engine/effects/ledger.ts',
    );
    const writeSide = under(
      'engine/capture',
      'engine/writer',
      'engine/open',
      'engine/effects/runner.ts',
      'engine/engine.ts',
      'engine/options.ts',
      'engine/policy.ts',
    );
    expect(importsOf(readSide).filter(([, to]) => writeSide(to))).toEqual([]);
  });

  it('keeps the frame format below the log: format/ imports only format/, value.ts and errors', () => {
    const allowed = under('engine/format', 'engine/value.ts', 'engine/errors.ts', 'storage-adapters/errors.ts');
    expect(importsOf(under('engine/format')).filter(([, to]) => !allowed(to))).toEqual([]);
  });

  it('finds an import cycle when there is one, and none when there is not', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c', 'd']],
      ['c', []],
      ['d', ['b']],
    ]);
    expect(findCycle(graph)).toEqual(['b', 'd', 'b']);
    graph.set('d', ['c']);
    expect(findCycle(graph)).toBeUndefined();
    expect(findCycle(new Map([['self', ['self']]]))).toEqual(['self', 'self']);
  });

  it('has no import cycle among engine/ and storage-adapters/ sources (type-only imports included)', () => {
    const graph = new Map(modules.map((m) => [m.file, m.imports]));
    expect(findCycle(graph)).toBeUndefined();
  });

  it(`keeps every source file under ${MAX_LINES} lines`, () => {
    const long = modules.filter((m) => m.lines > MAX_LINES).map((m) => `${m.file}: ${m.lines}`);
    expect(long).toEqual([]);
  });
});
