/**
 * Optional peer dependencies, checked and loaded without top-level await: `require()` of an ES
 * module (Node 20.19+, 22.12+) refuses a module graph that awaits at its top level, and every
 * statefold entry must load through `require` as well as `import`.
 */
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const requireHere = createRequire(import.meta.url);

const code = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code;
const isMissing = (err: unknown): boolean => code(err) === 'ERR_MODULE_NOT_FOUND' || code(err) === 'MODULE_NOT_FOUND';

/** Where `import` would find `name` from statefold's own folder (a URL); throws when it is not installed. */
function resolve(name: string): string {
  try {
    return import.meta.resolve(name);
  } catch (err) {
    if (code(err) !== undefined) throw err;
    // A loader without import.meta.resolve (Vite's module runner, as in a vitest globalSetup file): require's resolution.
    return pathToFileURL(requireHere.resolve(name)).href;
  }
}

/**
 * Throws `message` (the resolution error as its cause) when one of `peers` is not installed. A peer
 * that is installed but broken (a missing dependency of its own) passes here and fails later with
 * its own error.
 */
export function assertPeers(peers: readonly string[], message: string): void {
  for (const peer of peers) {
    try {
      resolve(peer);
    } catch (err) {
      if (isMissing(err)) throw new Error(message, { cause: err });
      // Installed, with no entry for require (only the fallback resolves that way): enough here.
      if (code(err) !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') throw err;
    }
  }
}

/**
 * Loads a peer synchronously: the very file that `import` would load (so the same instance as the
 * application's own import of it), through `require` (which loads an ES module too), or throws
 * `message` when it is not installed.
 */
export function loadPeer<T>(name: string, message: string): T {
  let url: string;
  try {
    url = resolve(name);
  } catch (err) {
    if (isMissing(err)) throw new Error(message, { cause: err });
    throw err;
  }
  return requireHere(fileURLToPath(url)) as T;
}
