import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restore } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';
import { root, userProject, type UserProject } from '../support/user-project.js';

const quickstartPath = path.join(root, 'examples/quickstart.ts');

/** The body of the first fenced block of `lang` after the heading `heading` in `markdown`. */
function blockAfter(markdown: string, heading: string, lang: string): string {
  const at = markdown.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README.md has no heading "${heading}"`);
  const open = markdown.indexOf(`\n\`\`\`${lang}\n`, at);
  if (open < 0) throw new Error(`README.md has no \`\`\`${lang} block after "${heading}"`);
  const start = open + lang.length + 5;
  return markdown.slice(start, markdown.indexOf('\n```\n', start) + 1);
}

interface AgentState {
  messages: unknown[];
  usage: { steps: number };
}

describe('docs: the README quickstart', () => {
  let readme: string;
  let quickstart: string;
  let project: UserProject | undefined;
  let dir: string;
  const runs: string[] = [];

  beforeAll(async () => {
    readme = await readFile(path.join(root, 'README.md'), 'utf8');
    quickstart = await readFile(quickstartPath, 'utf8');
    // Run it as a user's project would: its own folder, statefold in its node_modules (this
    // checkout, built), and the store in the folder it runs from.
    const js = ts.transpileModule(quickstart, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    project = await userProject('quickstart', 'quickstart.mjs', js);
    dir = project.dir;
    for (let i = 0; i < 2; i++) runs.push(await project.run());
  }, 120_000);

  afterAll(async () => {
    await project?.remove();
  });

  it('shows examples/quickstart.ts verbatim', () => {
    expect(blockAfter(readme, '## Quickstart', 'ts')).toBe(quickstart);
  });

  it('type-checks against the built package, strict as the sources are', () => {
    // The compiler options a user's strict project has, not tsconfig.json's: with its rootDir and
    // outDir the compiler maps the package's own name back to the sources instead of dist/*.d.ts.
    const program = ts.createProgram([quickstartPath], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2023.d.ts'],
      types: ['node'],
      strict: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      noEmit: true,
    });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
      const at = where ? `${path.relative(root, d.file!.fileName)}:${where.line + 1}` : '';
      return `${at} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    expect(problems).toEqual([]);
  }, 60_000);

  it('prints on a first run exactly the output the README shows', () => {
    expect(runs[0]).toBe(blockAfter(readme, '## Quickstart', 'text'));
  });

  it('stores a base, then deltas a small fraction of it', () => {
    const lines = runs[0]!.split('\n').filter((l) => l.startsWith('seq '));
    const checkpoints = lines.map((l) => /^seq (\d+): (base|delta), \d+ operations, (\d+) bytes$/.exec(l));
    expect(checkpoints.map((m) => m?.[2])).toEqual(['base', 'delta', 'delta', 'delta', 'delta']);
    const base = Number(checkpoints[0]![3]);
    for (const m of checkpoints.slice(1)) expect(Number(m![3])).toBeLessThan(base / 10);
  });

  it('resumes on a second run where the first stopped, on the same chain', async () => {
    expect(runs[1]).toMatch(/^opened at seq 5\n/);
    expect(runs[1]).toContain('seq 6: delta');
    expect(runs[1]).toContain('restored seq 10: 21 messages (seq 1 had 3)');
    const store = new SqliteStore({ path: path.join(dir, '.statefold/agents.db') });
    const restored = await restore<AgentState>(store, 'agent-42').finally(() => store.close());
    expect(restored.seq).toBe(10);
    expect(restored.state.usage.steps).toBe(10);
    expect(restored.state.messages).toHaveLength(21);
  });
});
