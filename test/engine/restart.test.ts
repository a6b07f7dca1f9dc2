import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { FileStore, listCheckpoints, restore } from 'statefold';
import { tempDir } from '../support/stores.js';

const run = promisify(execFile);
const child = fileURLToPath(new URL('../support/restart-child.mjs', import.meta.url));

describe('restart: a new process continues the stream on the same FileStore dir', () => {
  it('resumes from the last checkpoint of the previous process, three times over', async () => {
    const dir = await tempDir();
    const outputs = [];
    for (const count of [4, 5, 2]) {
      const { stdout } = await run(process.execPath, [child, dir, 'agent-7', String(count)], { timeout: 30_000 });
      outputs.push(JSON.parse(stdout) as { seq: number; state: { steps: number[]; pid: number[] } });
    }
    expect(outputs.map((o) => o.seq)).toEqual([4, 9, 11]);
    const last = outputs[2]!;
    expect(last.state.steps).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
    expect(new Set(last.state.pid).size).toBe(3);
    const store = new FileStore({ dir });
    expect((await restore(store, 'agent-7')).state).toEqual(last.state);
    expect((await listCheckpoints(store, 'agent-7')).map((c) => c.seq)).toEqual(
      Array.from({ length: 11 }, (_, i) => i + 1),
    );
  });
});
