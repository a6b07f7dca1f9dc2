/** The key of the `j`-th create of batch `batch`. */
export function batchKey(batch: number, j: number): string;
/** Its body: `size` bytes (a multiple of 4) that depend on batch and j throughout. */
export function batchBody(batch: number, j: number, size: number): Buffer;
