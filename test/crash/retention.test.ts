import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, gc, listCheckpoints, restore } from 'statefold';
import { FaultStore } from 'statefold/testing';
import { firstDifference } from '../support/same.js';
import { verified } from '../support/checkpoints.js';

/**
 * Retention under crashes and concurrent readers: gc deletes behind the base of the oldest kept
 * checkpoint. A gc cut short at any store operation must leave every listed seq restorable, and
 * a reader restoring the newest checkpoint while a writer's gc deletes behind it must get a
 * committed state, not NOT_FOUND (which callers read as "no such stream").
 */

const STREAM = 'agent/retention';
/** A state much larger than each change, so that checkpoints between bases are deltas. */
const noise = Array.from({ length: 400 }, (_, j) => `w${(j * 7919) % 1000}`).join(' ');

async function writeStream(store: MemoryStore, n: number, baseEvery: number): Promise<unknown[]> {
  const engine = await SnapshotEngine.open<{ noise: string; i: number }>({
    store,
    stream: STREAM,
    policy: { baseEvery },
  });
  const states: unknown[] = [undefined];
  for (let i = 1; i <= n; i++) {
    await engine.checkpoint({ noise, i });
    states.push({ noise, i });
  }
  await engine.close();
  return states;
}

async function copyOf(store: MemoryStore): Promise<MemoryStore> {
  const copy = new MemoryStore();
  for (const key of await store.list('')) await copy.putIfAbsent(key, (await store.get(key))!);
  return copy;
}

describe('retention: gc cut short by a crash', () => {
  it('leaves every listed seq restorable, whatever store operation of gc the crash comes at', async () => {
    const original = new MemoryStore();
    const states = await writeStream(original, 14, 4);
    expect(
      verified(await listCheckpoints(original, STREAM))
        .map((c) => c.kind)
        .filter((k) => k === 'delta').length,
    ).toBeGreaterThan(6);
    const counter = new FaultStore(await copyOf(original));
    const report = await gc(counter, STREAM, { keepLast: 2, minAgeMs: 0 });
    expect(report.deleted.length).toBeGreaterThan(4);
    const failures: string[] = [];
    for (let crash = 0; crash < counter.count; crash++) {
      for (const landed of [false, true]) {
        const store = await copyOf(original);
        await gc(new FaultStore(store).crashAt(crash, { landed }), STREAM, { keepLast: 2, minAgeMs: 0 }).catch(
          () => undefined,
        );
        const listed = (await listCheckpoints(store, STREAM)).map((c) => c.seq);
        // A gc cut short deletes less, never more: the newest keepLast are always there.
        if (!listed.includes(states.length - 2) || !listed.includes(states.length - 1))
          failures.push(
            `crash at gc operation ${crash}${landed ? ' after it landed' : ''}: listed [${listed.join(', ')}], without the newest two`,
          );
        for (const seq of listed) {
          const got = await restore(store, STREAM, { seq }).then(
            (r) => firstDifference(r.state, states[seq]) ?? 'ok',
            (err: { code?: string; message?: string }) => `${err.code}: ${err.message}`,
          );
          if (got !== 'ok')
            failures.push(
              `crash at gc operation ${crash}${landed ? ' after it landed' : ''}: listed [${listed[0]}..${listed[listed.length - 1]}], seq ${seq} -> ${got}`,
            );
        }
      }
    }
    expect(failures.slice(0, 6), `${failures.length} listed seqs do not restore (first 6 shown)`).toEqual([]);
  });

  it('does not keep unrestorable seqs forever when the next gc keeps by age', async () => {
    // gc deletes oldest first, so a crash right after it deleted a base leaves that base's deltas
    // listed. A later gc that keeps them by keepForMs cuts at their (missing) base: they stay.
    const store = new MemoryStore();
    const states = await writeStream(store, 14, 4);
    const bases = verified(await listCheckpoints(store, STREAM))
      .filter((c) => c.kind === 'base')
      .map((c) => c.seq);
    const secondBase = bases[1]!;
    // Crash right after the delete of the second base's key.
    const faults = new FaultStore(store);
    faults.inject(
      { op: 'delete', key: (k) => k.includes(`/log/${secondBase.toString(16).padStart(16, '0')}`), times: Infinity },
      { type: 'fail', landed: true },
    );
    // The fault did hit: the first gc rejects.
    await expect(gc(faults, STREAM, { keepLast: 1, minAgeMs: 0 })).rejects.toMatchObject({ code: 'STORAGE' });
    await gc(store, STREAM, { keepLast: 1, keepForMs: 3_600_000, minAgeMs: 0 });
    const listed = (await listCheckpoints(store, STREAM)).map((c) => c.seq);
    expect(listed).toContain(14);
    for (const seq of listed) {
      const r = await restore(store, STREAM, { seq }).catch((err: { code?: string }) => err);
      expect(
        firstDifference((r as { state?: unknown }).state, states[seq]),
        `listed seq ${seq}: ${(r as { code?: string }).code ?? 'ok'}`,
      ).toBeUndefined();
    }
  });
});

describe('retention: readers while a writer deletes behind itself', () => {
  it('restores the newest checkpoint when gc deletes the chain the restore was reading', async () => {
    const inner = new MemoryStore();
    const writer = await SnapshotEngine.open<{ noise: string; i: number }>({
      store: inner,
      stream: STREAM,
      policy: { baseEvery: 3 },
    });
    await writer.checkpoint({ noise, i: 1 }); // base
    await writer.checkpoint({ noise, i: 2 }); // delta on 1
    // The reader lists [1, 2], reads 2, and its read of base 1 is held...
    const reader = new FaultStore(inner).inject({ op: 'get', nth: 1 }, { type: 'hold' });
    const restoring = restore<{ i: number }>(reader, STREAM).then(
      (r) => r.state.i,
      (err: { code?: string; message?: string }) => `${err.code}: ${err.message}`,
    );
    for (let i = 0; i < 100 && reader.held === 0; i++) await new Promise((r) => setImmediate(r));
    expect(reader.held).toBe(1);
    // ...while the writer commits a new base and its retention deletes everything before it.
    await writer.checkpoint({ noise, i: 3 });
    await writer.checkpoint({ noise, i: 4 }); // base (baseEvery 3)
    expect((await gc(inner, STREAM, { keepLast: 1, minAgeMs: 0 })).deleted).toEqual([1, 2, 3]);
    await reader.release();
    // A committed state (the one listed, or a newer one), never NOT_FOUND for a stream that exists.
    expect([2, 4]).toContain(await restoring);
  });

  it('never rejects a restore of the newest checkpoint while a writer with retention runs (seeded delays)', async () => {
    const inner = new MemoryStore();
    let seed = 7;
    const rand = (): number => (seed = (seed * 48271) % 2147483647) / 2147483647;
    const slowReads = new FaultStore(inner, { log: false }).inject(
      { op: 'get', times: Infinity },
      { type: 'delay', ms: () => Math.floor(rand() * 6) },
    );
    const writer = await SnapshotEngine.open<{ noise: string; i: number }>({
      store: inner,
      stream: STREAM,
      policy: { baseEvery: 2 },
      retention: { keepLast: 1 },
    });
    await writer.checkpoint({ noise, i: 0 });
    let stop = false;
    const errors: string[] = [];
    let restores = 0;
    const readers = Array.from({ length: 3 }, async () => {
      for (let n = 0; n < 10_000 && !stop; n++) {
        try {
          await restore(slowReads, STREAM);
          restores++;
        } catch (err) {
          errors.push(`${(err as { code?: string }).code}: ${(err as Error).message}`);
        }
      }
    });
    // Write until the readers have done enough restores (bounded), pausing now and then so they keep up.
    for (let i = 1; i <= 5_000 && restores + errors.length < 60; i++) {
      await writer.checkpoint({ noise, i });
      if (i % 2 === 0) await sleep(1);
    }
    stop = true;
    await Promise.all(readers);
    await writer.close();
    expect(restores + errors.length).toBeGreaterThanOrEqual(60);
    expect(errors.slice(0, 3), `${errors.length} of ${restores + errors.length} restores rejected`).toEqual([]);
  });
});
