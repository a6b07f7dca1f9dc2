/**
 * Optional peer dependencies, checked and loaded without top-level await: `require()` of an ES
 * module (Node 20.19+, 22.12+) refuses a module graph that awaits at its top level, and every
 * statefold entry must load through `require` as well as `import`.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const requireHere = createRequire(import.meta.url);

/**
 * Where `import` would find `name` from statefold's own folder, or `message` as an error (the
 * resolution error as its cause) when the package is not installed. Any other resolution error
 * (a broken exports map) is thrown as it is.
 */
function resolvePeer(name: string, message: string): string {
  try {
    return import.meta.resolve(name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') throw new Error(message, { cause: err });
    throw err;
  }
}

/**
 * Throws `message` when one of `peers` is not installed. A peer that is installed but broken (a
 * missing dependency of its own) passes here and fails later with its own error.
 */
export function assertPeers(peers: readonly string[], message: string): void {
  for (const peer of peers) resolvePeer(peer, message);
}

/**
 * Loads a peer synchronously: the very file that `import` would load (so the same instance as the
 * application's own import of it), through `require` (which loads an ES module too), or throws
 * `message` when it is not installed.
 */
export function loadPeer<T>(name: string, message: string): T {
  const url = resolvePeer(name, message);
  return requireHere(url.startsWith('file:') ? fileURLToPath(url) : url) as T;
}
