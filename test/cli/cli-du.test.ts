import { describe, expect, it } from 'vitest';
import { FileStore, SnapshotEngine, sizeReport } from 'statefold';
import { fromJson } from '../../dist/cli/json.js';
import { cli } from '../support/cli.js';
import { tempDir } from '../support/stores.js';

describe('statefold du', () => {
  it('prints where the bytes go, and the same report as sizeReport with --json', async () => {
    const dir = await tempDir();
    const store = new FileStore({ dir });
    const engine = await SnapshotEngine.open({ store, stream: 'agent', policy: { baseEvery: 3 } });
    const page = Array.from({ length: 400 }, (_, i) => `row ${i} of the fetched page\n`).join('');
    const state = { pages: [] as string[], notes: { copy: page } };
    for (let i = 0; i < 6; i++) {
      state.pages.push(i % 2 === 0 ? page : `note ${i}`);
      await engine.checkpoint(state);
    }
    await engine.close();

    const json = await cli(['du', dir, 'agent', '--json', '--limit', '4', '--last', '3']);
    expect(json.code).toBe(0);
    expect(fromJson(JSON.parse(json.stdout))).toEqual(await sizeReport(store, 'agent', { top: 4, last: 3 }));

    const human = await cli(['du', dir, 'agent', '--seq', '5', '--last', '2']);
    expect(human.code).toBe(0);
    const report = await sizeReport(store, 'agent', { seq: 5, last: 2 });
    expect(human.stdout).toContain(`stream "agent" seq 5: state ${(report.stateBytes / 1024).toFixed(1)} KB`);
    expect(human.stdout).toContain(`${report.stored.checkpoints} checkpoints: ${report.stored.bases} bases`);
    // The page is held at four paths by seq 5 (pages/0, 2, 4, notes/copy): one line names them all.
    expect(human.stdout).toMatch(/x 4 \(.* extra\): \/pages\/0, \/pages\/2, \/pages\/4, \/notes\/copy\n/);
    for (const p of report.paths) expect(human.stdout).toContain(`  ${p.path}\n`);
    expect(human.stdout).toMatch(/\n +4  delta .*\n +5  (base |delta) .* \/pages\/4 /);

    expect((await cli(['du', dir, 'agent', '--last', '-1'])).code).toBe(2);
    expect((await cli(['du', dir, 'agent', '--seq', '9'])).code).toBe(3);
    expect((await cli(['du', dir, 'nobody'])).code).toBe(3);
  });
});
