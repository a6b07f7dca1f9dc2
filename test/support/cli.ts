import { execFile } from 'node:child_process';
import * as path from 'node:path';

const BIN = path.resolve(import.meta.dirname, '../../dist/cli/main.js');

/** Runs the built `statefold` bin as a user would; resolves its exit code and output (never rejects on a non-zero exit). */
export function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  /** The working directory it runs in (default: this process's). */
  cwd?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { ...process.env, ...env }, timeout: 60_000, ...(cwd !== undefined && { cwd }) },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return reject(err);
        resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}
