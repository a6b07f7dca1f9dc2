/** Capture, the first stage of a checkpoint: one capturer per update mode over a shared walk. */
import { Capturer, unreadable, type UpdateMode } from './capturer.js';
import { CopyCapturer, cloneInto } from './copy.js';
import { ImmutableCapturer } from './immutable.js';
import { Walk } from './walk.js';

export { Capturer, type Capture, type UpdateMode } from './capturer.js';
export { thaw } from '../value.js';
export { estimateSize } from './walk.js';

/** A capturer for `mode`. */
export function createCapturer(mode: UpdateMode): Capturer {
  return mode === 'copy' ? new CopyCapturer() : new ImmutableCapturer();
}

/** Validates a value (meta, an effect's result) and returns a frozen private copy; `root` names it in errors. */
export function captureValue(value: unknown, root: string): unknown {
  const walk = new Walk(root, false);
  try {
    return cloneInto(value, walk);
  } catch (err) {
    throw unreadable(err, walk);
  }
}
