import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listStreams } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('docs: the example of docs/langgraph.md', () => {
  let dir: string;
  const runs: string[] = [];

  beforeAll(async () => {
    const doc = await readFile(path.join(root, 'docs/langgraph.md'), 'utf8');
    const open = doc.indexOf('\n```js\n');
    const code = doc.slice(open + 7, doc.indexOf('\n```\n', open + 7) + 1);
    // A user's project: its own folder, statefold (this checkout, built) and LangGraph in its node_modules.
    dir = await mkdtemp(path.join(tmpdir(), 'statefold-langgraph-example-'));
    await mkdir(path.join(dir, 'node_modules'));
    await symlink(root, path.join(dir, 'node_modules/statefold'), 'dir');
    await symlink(path.join(root, 'node_modules/@langchain'), path.join(dir, 'node_modules/@langchain'), 'dir');
    await writeFile(path.join(dir, 'example.mjs'), code);
    for (let i = 0; i < 2; i++) {
      const { stdout } = await run(process.execPath, ['example.mjs'], { cwd: dir, timeout: 60_000 });
      runs.push(stdout);
    }
  }, 150_000);

  afterAll(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('prints what the doc says it prints, on the store it names', async () => {
    const [first] = runs;
    expect(first!.split('\n')[0]).toBe("[ 'hello', 'message 2', 'again', 'message 4' ]");
    // Two checkpoints listed, newest first: a step number and a checkpoint id each.
    const listed = first!.trim().split('\n').slice(1);
    expect(listed).toHaveLength(2);
    for (const line of listed) expect(line).toMatch(/^-?\d+ [0-9a-f-]{36}$/);
    const store = new SqliteStore({ path: path.join(dir, 'checkpoints.db') });
    try {
      expect(await listStreams(store)).toEqual(['langgraph/["user-42",""]']);
    } finally {
      await store.close();
    }
  });

  it('goes on with the same thread when run again', () => {
    // The second run adds its two messages to the four the first stored, and lists its own steps.
    const [messages, steps] = runs[1]!.split(']\n');
    expect([...messages!.matchAll(/'([^']+)'/g)].map((m) => m[1])).toEqual([
      'hello',
      'message 2',
      'again',
      'message 4',
      'hello',
      'message 6',
      'again',
      'message 8',
    ]);
    expect(
      steps!
        .trim()
        .split('\n')
        .map((l) => l.split(' ')[0]),
    ).toEqual(['10', '9']);
  });
});
