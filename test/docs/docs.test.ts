import { existsSync, readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** The directories whose every source file the repository map must name. */
const SOURCE_DIRS = ['engine', 'storage-adapters', 'cli', 'integrations'];

/** Every .ts file under `dir` (relative to the root), or none when `dir` does not exist. */
function sources(dir: string): string[] {
  if (!existsSync(path.join(root, dir))) return [];
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sources(rel);
    return entry.name.endsWith('.ts') ? [rel] : [];
  });
}

/** The paths the repository map of docs/ARCHITECTURE.md names: the first word of each line of its block. */
function mapPaths(): string[] {
  const text = readFileSync(path.join(root, 'docs/ARCHITECTURE.md'), 'utf8');
  const section = text.split('\n## Repository map\n')[1];
  if (section === undefined) throw new Error('docs/ARCHITECTURE.md has no "## Repository map" section');
  const block = /\n```text\n([\s\S]*?)\n```/.exec(section);
  if (block === null) throw new Error('docs/ARCHITECTURE.md: the repository map has no ```text block');
  return block[1]!
    .split('\n')
    .map((line) => line.split(/\s+/)[0]!)
    .filter((p) => p !== '');
}

/** The Markdown files whose links must hold: the README, CONTRIBUTING.md and docs/ (not the generated docs/api/). */
function markdownFiles(): string[] {
  const docs = readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return ['README.md', 'CONTRIBUTING.md', ...docs];
}

/** The links of a Markdown text to files of the repository (`#fragment` kept), outside code blocks and code spans. */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  const targets = [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
  return targets.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t)).map((t) => decodeURI(t));
}

/** The anchors GitHub gives the headings of a Markdown text: lower case, punctuation dropped, spaces as dashes. */
function anchors(markdown: string): Set<string> {
  const headings = markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} (.+)$/gm);
  return new Set(
    [...headings].map((m) =>
      m[1]!
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    ),
  );
}

/** Why `link`, found in `file`, leads nowhere, or undefined when it leads to a file (and heading) that exists. */
function brokenLink(file: string, link: string): string | undefined {
  const [target, fragment] = link.split('#') as [string, string | undefined];
  const resolved = target === '' ? file : path.join(path.dirname(file), target);
  if (!existsSync(path.join(root, resolved))) return `${file}: ${link} (no such file)`;
  if (fragment === undefined || !resolved.endsWith('.md')) return undefined;
  const known = anchors(readFileSync(path.join(root, resolved), 'utf8'));
  return known.has(fragment) ? undefined : `${file}: ${link} (no heading #${fragment} in ${resolved})`;
}

describe('docs: the repository map in docs/ARCHITECTURE.md', () => {
  const listed = mapPaths();

  it('names every source file under engine/, storage-adapters/, cli/ and integrations/', () => {
    const named = new Set(listed);
    const missing = SOURCE_DIRS.flatMap(sources).filter((file) => !named.has(file));
    expect(missing, `source files missing from the map in docs/ARCHITECTURE.md:\n  ${missing.join('\n  ')}`).toEqual(
      [],
    );
  });

  it('names only paths that exist', () => {
    const stale = listed.filter((p) => !existsSync(path.join(root, p)));
    expect(stale, `paths in docs/ARCHITECTURE.md's map that do not exist:\n  ${stale.join('\n  ')}`).toEqual([]);
  });

  it('names each path once', () => {
    const twice = listed.filter((p, i) => listed.indexOf(p) !== i);
    expect(twice).toEqual([]);
  });
});

/**
 * Every benchmark page the bench generates: BENCHMARKS*.md at the root, its appendix in docs/, and any
 * Markdown under bench/.
 */
function benchmarkPages(): string {
  const top = [...readdirSync(root).filter((f) => /^BENCHMARKS.*\.md$/.test(f)), 'docs/benchmarks-appendix.md'];
  // (Not a recursive readdir of bench/: it would list the whole of bench/node_modules first, which took
  // over 30 s on a loaded CI machine.)
  const bench: string[] = [];
  const walk = (dir: string): void => {
    for (const e of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      if (e.isDirectory() && e.name !== 'node_modules') walk(`${dir}/${e.name}`);
      else if (e.isFile() && e.name.endsWith('.md')) bench.push(`${dir}/${e.name}`);
    }
  };
  walk('bench');
  return [...top, ...bench].map((f) => readFileSync(path.join(root, f), 'utf8')).join('\n');
}

describe('docs: the README quotes the benchmark pages', () => {
  it('takes every figure of "When to choose statefold" from a page the bench generated', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const section = readme.split('\n## When to choose statefold\n')[1]?.split('\n## ')[0];
    expect(section, 'README.md has no "When to choose statefold" section').toBeDefined();
    // Figures with decimals, and whole numbers with a unit: the ones a reader would quote.
    const figures = [...section!.matchAll(/\d[\d,]*\.\d+|\d[\d,]*(?= ?(?:KB|MB|GB|ms|µs|×|%))/g)].map((m) => m[0]);
    expect(figures.length).toBeGreaterThan(20);
    const pages = benchmarkPages();
    const absent = [...new Set(figures)].filter(
      (f) => !new RegExp(`(?<![\\d.])${f.replace(/\./g, '\\.')}(?!\\d)`).test(pages),
    );
    expect(absent, `figures in README.md that no benchmark page holds: ${absent.join(', ')}`).toEqual([]);
  });
});

describe('docs: relative links', () => {
  it('point at files and headings that exist, from README.md, CONTRIBUTING.md and docs/*.md', () => {
    const broken = markdownFiles().flatMap((file) =>
      relativeLinks(readFileSync(path.join(root, file), 'utf8')).flatMap((link) => brokenLink(file, link) ?? []),
    );
    expect(broken, `broken relative links:\n  ${broken.join('\n  ')}`).toEqual([]);
  });

  it('are found by the link scan, and headings get the anchors GitHub gives them', () => {
    const links = relativeLinks(readFileSync(path.join(root, 'README.md'), 'utf8'));
    expect(links).toContain('docs/ARCHITECTURE.md');
    expect(links).toContain('examples/quickstart.ts');
    expect([...anchors('# A\n## `SnapshotEngine.open` options\n### S3: AWS, MinIO, Ceph RGW, R2\n')]).toEqual([
      'a',
      'snapshotengineopen-options',
      's3-aws-minio-ceph-rgw-r2',
    ]);
  });
});
