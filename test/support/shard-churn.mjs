// Creates, reads back and deletes keys in one shard of a FileStore (the `r/00000000000001@`
// directory): `loops` loops at once, `rounds` keys each. Rejects as soon as a create does not
// create its key or a created key does not read back; resolves how many keys were created.

/** The key of round `i` of loop `loop` of writer `name`: its last segment puts it in shard 00000000000001@. */
export const churnKey = (name, loop, i) => `r/00000000000001.${name}-${loop}-${i}`;

export async function churnShard(store, name, loops, rounds) {
  let created = 0;
  const loop = async (l) => {
    for (let i = 0; i < rounds; i++) {
      const key = churnKey(name, l, i);
      const body = new TextEncoder().encode(key);
      if (!(await store.putIfAbsent(key, body))) throw new Error(`${key}: not created`);
      created++;
      const read = await store.get(key);
      if (read === undefined || Buffer.compare(Buffer.from(read), Buffer.from(body)) !== 0)
        throw new Error(`${key}: created, then read ${read === undefined ? 'nothing' : 'other bytes'}`);
      await store.delete(key);
    }
  };
  await Promise.all(Array.from({ length: loops }, (_, l) => loop(l)));
  return created;
}
