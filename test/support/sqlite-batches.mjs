// The keys and bodies of test/support/sqlite-batch-child.mjs, for the child and the test checking on it.

/** The key of the `j`-th create of batch `batch`. */
export function batchKey(batch, j) {
  return `b/${String(batch).padStart(6, '0')}/${j}`;
}

/** Its body: `size` bytes that depend on batch and j throughout (a torn or mixed body differs). */
export function batchBody(batch, j, size) {
  const body = Buffer.alloc(size);
  let x = (batch * 7919 + j * 104729) >>> 0 || 1;
  for (let i = 0; i < size; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    body.writeUInt32LE(x >>> 0, i);
  }
  return body;
}
