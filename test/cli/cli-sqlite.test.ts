import { existsSync } from 'node:fs';
import { copyFile, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SnapshotEngine } from 'statefold';
import { SqliteStore } from 'statefold/sqlite';
import { cli } from '../support/cli.js';
import { tempDir } from '../support/stores.js';

/** A database with `agent-1` (5 steps) and `agent-2` (1 step); returns its path. */
async function database(): Promise<string> {
  const file = path.join(await tempDir(), 'agents.db');
  const store = new SqliteStore({ path: file });
  try {
    const e = await SnapshotEngine.open({ store, stream: 'agent-1', policy: { baseEvery: 3 } });
    for (let step = 1; step <= 5; step++) await e.checkpoint({ step, notes: ['n'.repeat(step)] });
    await e.close();
    const other = await SnapshotEngine.open({ store, stream: 'agent-2' });
    await other.checkpoint({ ok: true });
    await other.close();
  } finally {
    await store.close();
  }
  return file;
}

describe('statefold CLI on a SQLite database', () => {
  it('reads a database given as a file path, as sqlite:PATH and as sqlite://PATH, and one renamed without .db', async () => {
    const file = await database();
    const renamed = path.join(path.dirname(file), 'agents');
    await copyFile(file, renamed);
    for (const spec of [file, `sqlite:${file}`, `sqlite://${file}`, renamed]) {
      expect(await cli(['ls', spec]), spec).toMatchObject({ code: 0, stdout: 'agent-1\nagent-2\n' });
    }
    const shown = await cli(['show', file, 'agent-1', '--path', '/step']);
    expect(shown).toMatchObject({ code: 0, stdout: '5\n' });
    const log = JSON.parse((await cli(['log', file, 'agent-1', '--all', '--json'])).stdout) as { seq: number }[];
    expect(log.length).toBeGreaterThanOrEqual(5);
    expect(await cli(['verify', `sqlite:${file}`, 'agent-1'])).toMatchObject({ code: 0 });
  });

  it('writes through it: gc and rm change what a later command reads', async () => {
    const file = await database();
    expect((await cli(['rm', file, 'agent-2', '--yes'])).code).toBe(0);
    expect(await cli(['ls', file])).toMatchObject({ code: 0, stdout: 'agent-1\n' });
    expect((await cli(['gc', file, 'agent-1', '--keep-last', '1'])).code).toBe(0);
    expect(await cli(['show', file, 'agent-1', '--path', '/step'])).toMatchObject({ code: 0, stdout: '5\n' });
  });

  it('a missing database is NOT_FOUND (exit 3), never created; a file that is not a database is CORRUPT (exit 1)', async () => {
    const dir = await tempDir();
    for (const spec of [path.join(dir, 'missing.db'), `sqlite:${path.join(dir, 'missing')}`]) {
      const r = await cli(['ls', spec]);
      expect(r.code, spec).toBe(3);
      expect(r.stderr).toMatch(/NOT_FOUND: store .*no such database file/);
    }
    expect(existsSync(path.join(dir, 'missing.db'))).toBe(false);
    expect(existsSync(path.join(dir, 'missing'))).toBe(false);
    expect((await cli(['ls', 'sqlite:'])).code).toBe(2);
    const junk = path.join(dir, 'notes.db');
    await writeFile(junk, 'not a database, but long enough to have a header of its own: '.repeat(20));
    const r = await cli(['ls', junk]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('CORRUPT');
    expect(r.stderr).toContain('notes.db');
    // Any other file that is not a database is not a store at all (as before SqliteStore).
    await writeFile(path.join(dir, 'notes.txt'), 'text');
    expect(await cli(['ls', path.join(dir, 'notes.txt')])).toMatchObject({
      code: 3,
      stderr: expect.stringMatching(/not a directory/),
    });
  });
});
