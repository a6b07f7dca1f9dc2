import type { Store } from 'statefold';
/** The key of round `i` of loop `loop` of writer `name`: its last segment puts it in shard 00000000000001@. */
export function churnKey(name: string, loop: number, i: number): string;
/** Creates, reads back and deletes `rounds` keys in each of `loops` loops at once; resolves how many were created. */
export function churnShard(store: Store, name: string, loops: number, rounds: number): Promise<number>;
