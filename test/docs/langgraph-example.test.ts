import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listStreams } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';
import { root, userProject, type UserProject } from '../support/user-project.js';

describe('docs: the example of docs/langgraph.md', () => {
  let project: UserProject | undefined;
  let dir: string;
  const runs: string[] = [];

  beforeAll(async () => {
    const doc = await readFile(path.join(root, 'docs/langgraph.md'), 'utf8');
    const open = doc.indexOf('\n```js\n');
    const code = doc.slice(open + 7, doc.indexOf('\n```\n', open + 7) + 1);
    // A user's project: its own folder, statefold (this checkout, built) and LangGraph in its node_modules.
    project = await userProject('langgraph-example', 'example.mjs', code, ['@langchain']);
    dir = project.dir;
    for (let i = 0; i < 2; i++) runs.push(await project.run());
  }, 150_000);

  afterAll(async () => {
    await project?.remove();
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
