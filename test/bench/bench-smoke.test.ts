import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

/**
 * What a run could overwrite in the repository: BENCHMARKS.md and its appendix, bench/results.json and every file
 * in bench/charts/, each with the SHA-256 of its bytes ('absent' when it does not exist).
 */
function repositoryOutputs(): Record<string, string> {
  const hash = (rel: string): string => {
    const file = path.join(root, rel);
    return existsSync(file) ? createHash('sha256').update(readFileSync(file)).digest('hex') : 'absent';
  };
  const charts = existsSync(path.join(root, 'bench', 'charts'))
    ? readdirSync(path.join(root, 'bench', 'charts')).map((name) => `bench/charts/${name}`)
    : [];
  return Object.fromEntries(
    ['BENCHMARKS.md', 'docs/benchmarks-appendix.md', 'bench/results.json', ...charts].map((rel) => [rel, hash(rel)]),
  );
}

/** Whether every element of an XML document is closed in order (a minimal parse, enough for SVG). */
function wellFormed(xml: string): boolean {
  const stack: string[] = [];
  for (const [tag] of xml.matchAll(/<[^>]+>/g)) {
    if (tag.startsWith('<?') || tag.startsWith('<!')) continue;
    const name = /^<\/?([A-Za-z][\w:.-]*)/.exec(tag)?.[1];
    if (name === undefined) return false;
    if (tag.startsWith('</')) {
      if (stack.pop() !== name) return false;
    } else if (!tag.endsWith('/>')) stack.push(name);
  }
  return stack.length === 0;
}

/** The bench package's dependencies (bench/package.json) that do not resolve from bench/. */
function missingBenchDependencies(): string[] {
  const pkg = JSON.parse(readFileSync(path.join(root, 'bench', 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  const fromBench = createRequire(path.join(root, 'bench', 'package.json'));
  return Object.keys(pkg.dependencies).filter((name) => {
    try {
      fromBench.resolve(name);
      return false;
    } catch (err) {
      // Found, but with no entry for require (an ES-only package): installed all the same.
      return (err as NodeJS.ErrnoException).code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED';
    }
  });
}

// Structure only: the benchmark's figures are never asserted (they depend on the machine).
describe('bench: smoke run', () => {
  // Not a skip: CI installs them (.ci/run), and a bench nobody runs rots unseen.
  it("finds the bench package's own dependencies installed (npm ci --prefix bench)", () => {
    expect(missingBenchDependencies(), 'bench dependencies missing: run npm ci --prefix bench').toEqual([]);
  });

  const out = mkdtempSync(path.join(tmpdir(), 'statefold-bench-smoke-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('writes BENCHMARKS.md, its appendix with every table, and three SVG charts, to the --out directory', async () => {
    // Hermetic: no S3 rows even where STATEFOLD_S3_* are set (the S3 path is exercised by `npm run bench` with them).
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('STATEFOLD_S3_')));
    const before = repositoryOutputs();
    // Through the launcher `npm run bench` uses, which checks the bench package's own dependencies.
    const { stderr } = await run(process.execPath, ['bench/start.mjs', 'bench/run.ts', '--smoke', '--out', out], {
      cwd: root,
      env,
      timeout: 80_000,
    });
    expect(stderr).toMatch(/\[bench 1\/\d+ /);
    expect(stderr).toContain('done in');

    // One summary page, and an appendix with every table; each links to the other.
    const md = readFileSync(path.join(out, 'BENCHMARKS.md'), 'utf8');
    const appendix = readFileSync(path.join(out, 'docs', 'benchmarks-appendix.md'), 'utf8');
    for (const heading of [
      '## Machine',
      '## Headline: targets, earlier figures, and this run',
      '## statefold against the other ways to checkpoint',
      '## Charts',
      '## How to reproduce',
    ]) {
      expect(md).toContain(heading);
    }
    for (const heading of [
      '## Workloads',
      '## Stall and commit latency',
      '## What each checkpoint stores against what its step added',
      '## Memory an engine keeps',
      '## Bytes and write requests per 1,000 steps',
      '## Agent-loop throughput against the checkpoint interval',
      '## Restore time against chain length',
      '## Reading a stream against the length of its history',
      '## Many streams in one process',
      '## Resume from a fresh process',
      '## Each store alone, and the disk',
      '## LangGraph savers side by side',
      '## What the pieces cost (tinybench micro-benchmarks)',
    ]) {
      expect(appendix).toContain(heading);
      expect(md).not.toContain(heading);
    }
    expect(md).toContain('](docs/benchmarks-appendix.md)');
    expect(appendix).toContain('](../BENCHMARKS.md)');
    for (const page of [md, appendix]) expect(page).toContain('npm run bench -- --smoke');
    for (const strategy of [
      'statefold immutable',
      'statefold copy',
      'full msgpackr+lz4',
      'full JSON+gzip',
      'fjp compare + mirror',
    ]) {
      expect(md).toContain(`| ${strategy} |`);
      expect(appendix).toContain(`| ${strategy} |`);
    }
    // Markdown tables: a header row followed by an alignment row.
    expect(md.match(/^\| :-- \|/gm)?.length ?? 0).toBeGreaterThanOrEqual(3);
    expect(appendix.match(/^\| :-- \|/gm)?.length ?? 0).toBeGreaterThanOrEqual(6);

    // The summary shows the three charts; the appendix links them from docs/.
    const charts = [...md.matchAll(/!\[[^\]]*\]\(([^)]+\.svg)\)/g)].map((m) => m[1]!);
    expect(charts).toHaveLength(3);
    for (const [rel] of appendix.matchAll(/(?<=\]\()[^)]+\.svg(?=\))/g))
      expect(existsSync(path.join(out, 'docs', rel))).toBe(true);
    for (const rel of charts) {
      const file = path.join(out, rel);
      expect(existsSync(file)).toBe(true);
      const svg = readFileSync(file, 'utf8');
      expect(svg.startsWith('<svg')).toBe(true);
      expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
      expect(svg).toContain('xmlns="http://www.w3.org/2000/svg"');
      expect(wellFormed(svg)).toBe(true);
    }

    const results = JSON.parse(readFileSync(path.join(out, 'bench', 'results.json'), 'utf8'));
    expect(results.run.mode).toBe('smoke');
    expect(results.stall.length).toBeGreaterThan(0);
    expect(results.restore.length).toBeGreaterThan(0);
    // Both workloads ran: the coding agent on real files (the headline) and the embeddings one.
    expect(new Set(results.stall.map((r: { workload: string }) => r.workload))).toEqual(
      new Set(['coding', 'embeddings']),
    );
    expect(results.memory.length).toBeGreaterThan(0);
    expect(results.history.length).toBeGreaterThan(0);
    expect(results.many[0].committed).toBeGreaterThan(0);
    // SqliteStore runs beside the others: many streams, resume, each store alone, and under StatefoldSaver.
    expect(results.many.map((r: { store: string }) => r.store)).toContain('sqlite');
    expect(results.resume.map((r: { store: string }) => r.store)).toEqual(['file', 'sqlite']);
    expect(results.storesAlone.sequential.map((r: { store: string }) => r.store)).toContain('sqlite');
    expect(appendix).toContain('| StatefoldSaver, SqliteStore (synchronous=FULL) |');
    // A run with --out leaves the repository's own report, results and charts as they were.
    expect(repositoryOutputs()).toEqual(before);
  }, 90_000);
});
