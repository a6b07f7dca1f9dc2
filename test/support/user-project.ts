/**
 * A user's project, as the docs tests run an example: a folder of its own with statefold (this
 * checkout, built) and the packages it names from this checkout's node_modules in its
 * node_modules, the example written there and run with this Node from that folder.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** This checkout's root. */
export const root = fileURLToPath(new URL('../..', import.meta.url));

export interface UserProject {
  dir: string;
  /** Runs the example once more (a process of its own) and resolves its stdout. */
  run(): Promise<string>;
  remove(): Promise<void>;
}

/**
 * Makes the project in a new temp folder named after `name`: `file` holds `code`, and `packages`
 * (besides statefold) are linked from this checkout's node_modules.
 */
export async function userProject(
  name: string,
  file: string,
  code: string,
  packages: string[] = [],
): Promise<UserProject> {
  const dir = await mkdtemp(path.join(tmpdir(), `statefold-${name}-`));
  await mkdir(path.join(dir, 'node_modules'));
  await symlink(root, path.join(dir, 'node_modules/statefold'), 'dir');
  for (const p of packages) await symlink(path.join(root, 'node_modules', p), path.join(dir, 'node_modules', p), 'dir');
  await writeFile(path.join(dir, file), code);
  return {
    dir,
    run: async () => (await run(process.execPath, [file], { cwd: dir, timeout: 60_000 })).stdout,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
