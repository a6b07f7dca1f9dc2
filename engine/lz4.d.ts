// The lz4 package ships no types; these are the block-API calls statefold uses.
declare module 'lz4' {
  /** Compresses `input` into `output`; returns the compressed size, 0 when incompressible. */
  export function encodeBlock(input: Buffer, output: Buffer, startIdx?: number, endIdx?: number): number;
  /** Decompresses `input` into `output`; returns the decompressed size (negative on error). */
  export function decodeBlock(input: Buffer, output: Buffer, startIdx?: number, endIdx?: number): number;
  /** Largest compressed size of `inputSize` bytes. */
  export function encodeBound(inputSize: number): number;
  const lz4: { encodeBlock: typeof encodeBlock; decodeBlock: typeof decodeBlock; encodeBound: typeof encodeBound };
  export default lz4;
}
