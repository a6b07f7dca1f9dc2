// Runs a bench script (TypeScript, through tsx) once the bench's own dependencies are installed:
//   node bench/start.mjs bench/run.ts [args...]
// The bench is its own package (bench/package.json), so that the library's `npm ci` installs none
// of its dependencies; without them, this says what to run instead of failing on a missing import.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8'));
const missing = Object.keys(pkg.dependencies).filter((name) => {
  try {
    import.meta.resolve(name);
    return false;
  } catch {
    return true;
  }
});
if (missing.length > 0) {
  process.stderr.write(
    `statefold bench: its dependencies are not installed (${missing.join(', ')} not found): run npm ci --prefix bench\n`,
  );
  process.exit(1);
}

const [script, ...args] = process.argv.slice(2);
const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), script, ...args], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
