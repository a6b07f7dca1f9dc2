/** A small seeded PRNG (mulberry32): numbers in [0, 1). */
export function mulberry32(seed: number): () => number;
