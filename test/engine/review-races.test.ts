import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  MemoryStore,
  SnapshotEngine,
  deleteStream,
  gc,
  listCheckpoints,
  listStreams,
  restore,
  type Store,
} from 'statefold';
import { HookStore, holdOnce, latch } from '../support/hook-store.js';

/**
 * Interleavings a review of the claim, fork and delete protocols found (issue 28): each once broke
 * a stated guarantee (an engine neither fenced nor on a new stream, a stream brought back or
 * bricked after a delete, a fork through a floor that was never written).
 */

const settle = <T>(p: Promise<T>): Promise<{ ok: T } | { err: { code?: string; message?: string } }> =>
  p.then(
    (ok) => ({ ok }),
    (err: { code?: string }) => ({ err }),
  );

/** A state large enough that the next checkpoints are deltas, not bases (the size trigger). */
const PAD = randomBytes(3000).toString('hex');
const big = (n: number) => ({ n, pad: PAD });
const POLICY = { baseEvery: 4 };
const RETAIN = { keepLast: 2, minAgeMs: 0 };

async function seedSix(inner: Store): Promise<void> {
  const old = await SnapshotEngine.open({ store: inner, stream: 's', policy: POLICY });
  for (let n = 1; n <= 6; n++) await old.checkpoint(big(n));
  await old.close();
}

describe('review: deleteStream between its fence and its floor', () => {
  it('an engine that opens after the delete fenced, before its floor, keeps what it acknowledges (or is FENCED), and the stream never restores CORRUPT', async () => {
    const inner = new MemoryStore();
    await seedSix(inner);
    // The delete has fenced slot 7; its floor write (gc/8) is held.
    const d = holdOnce(inner, (op, key) => op === 'putIfAbsent' && key.includes('/gc/'));
    const deleting = deleteStream(d.store, 's');
    await d.reached;
    // E lists: the tail is the delete's fence in slot 7. E fences after it, finds no floor, and
    // opens on the old chain (seq 6), not as a new stream.
    const e = await SnapshotEngine.open<{ n: number }>({ store: inner, stream: 's', policy: POLICY });
    const seven = await settle(e.checkpoint(big(7)));
    d.release();
    await deleting;
    // E was never fenced: its next commit goes to slot(8), which is the floor's seq, so the
    // delete took it for "a new stream" and left it.
    const eight = await settle(e.checkpoint(big(8)));
    const fenced = 'err' in eight && eight.err.code === 'FENCED';
    const r = await settle(restore(inner, 's'));
    // Whatever E was told, readers must not find CORRUPT...
    expect('err' in r ? r.err.code : 'ok', JSON.stringify({ seven, eight, r })).not.toBe('CORRUPT');
    // ...and what E acknowledged must restore unless E was fenced.
    if (!fenced && 'ok' in eight) expect(r).toMatchObject({ ok: { state: big(8) } });
    if ('ok' in seven && !fenced)
      expect(await settle(restore(inner, 's', { seq: seven.ok.seq }))).toMatchObject({ ok: { state: big(7) } });
  });

  it('the same when a writer took the next seq and the delete fenced a window: an engine that opens before the floor commits at the floor seq', async () => {
    const inner = new MemoryStore();
    await seedSix(inner);
    // The writer is open. The delete lists (head 6); its first fence put (slot 7) is held while
    // the writer commits seq 7, so the put loses and the delete fences slots 8..15 at once, then
    // writes its floor gc/16, which is held.
    const w = await SnapshotEngine.open<{ n: number }>({ store: inner, stream: 's', policy: POLICY });
    let holdFence = true;
    const fenceHeld = latch();
    const fenceGo = latch();
    const d = holdOnce(
      new HookStore(inner, async (op, key) => {
        if (holdFence && op === 'putIfAbsent' && key.includes('/log/')) {
          holdFence = false;
          fenceHeld.open();
          await fenceGo.p;
        }
      }),
      (op, key) => op === 'putIfAbsent' && key.includes('/gc/'),
    );
    const deleting = deleteStream(d.store, 's');
    await fenceHeld.p;
    expect((await w.checkpoint(big(7))).seq).toBe(7);
    fenceGo.open();
    await d.reached;
    await expect(w.checkpoint(big(8))).rejects.toMatchObject({ code: 'FENCED' });
    const e = await SnapshotEngine.open<{ n: number }>({ store: inner, stream: 's', policy: POLICY });
    const first = await settle(e.checkpoint(big(100)));
    d.release();
    await deleting;
    const second = await settle(e.checkpoint(big(101)));
    const r = await settle(restore(inner, 's'));
    expect('err' in r ? r.err.code : 'ok', JSON.stringify({ eSeq: e.seq, first, second, r })).not.toBe('CORRUPT');
  });
});

describe('review: an open that straddles a whole deleteStream', () => {
  it('an open whose fence lands after the delete finished opens a new stream, not the deleted chain (prefetched frames hide the deletion)', async () => {
    const inner = new MemoryStore();
    await seedSix(inner);
    // B lists from the hint and prefetches the chain (seqs 5, 6); its fence put (slot 7) is held...
    const b = holdOnce(inner, (op, key) => op === 'putIfAbsent' && key.includes('/log/'));
    const opening = SnapshotEngine.open<{ n: number }>({ store: b.store, stream: 's', policy: POLICY });
    await b.reached;
    // ...while the whole delete runs: fence 7, floor 8, everything deleted but its tombstone.
    await deleteStream(inner, 's');
    expect(await inner.list('s.s/')).toEqual([
      's.s/gc/0000000000000009',
      's.s/log/0000000000000007',
      's.s/log/0000000000000008',
    ]);
    b.release();
    const engine = await opening;
    // Its fence landed in an empty stream, with no floor left to see; the resume read uses frames
    // read before the fence, so nothing "vanishes" and B continues the deleted chain.
    const opened = { seq: engine.seq, n: engine.state?.n };
    const info = await settle(engine.checkpoint(big(99)));
    const r = await settle(restore(inner, 's'));
    expect(
      { opened, restore: 'err' in r ? r.err.code : 'ok' },
      JSON.stringify({ info, r: 'err' in r ? r.err.message : 'ok' }),
    ).toEqual({ opened: { seq: expect.any(Number), n: undefined }, restore: 'ok' });
  });
});

describe('review: a hint that lands after deleteStream', () => {
  it('a closed engine whose hint write timed out and landed after the delete does not brick the stream id', async () => {
    const inner = new MemoryStore();
    // The hint put of the base at seq 5 reaches the store only when released (a request that
    // outlived its client-side timeout).
    const late = latch();
    const hinted = latch();
    const store = new HookStore(inner, async (op, key) => {
      if (op === 'putIfAbsent' && key.endsWith('/hint/0000000000000005')) {
        hinted.open();
        await late.p;
      }
    });
    const w = await SnapshotEngine.open({ store, stream: 's', policy: POLICY, storeTimeoutMs: 50 });
    for (let n = 1; n <= 6; n++) await w.checkpoint(big(n));
    await hinted.p;
    await w.close(); // the hint write failed TIMEOUT as far as the engine knows
    await deleteStream(inner, 's');
    expect(await inner.list('s.s/')).toHaveLength(3); // its tombstone: a floor and two fences
    late.open(); // the late write lands
    await sleep(10);
    // A deleted stream reads as nothing (NOT_FOUND), opens as new, and deletes again.
    const r = await settle(restore(inner, 's'));
    const o = await settle(SnapshotEngine.open({ store: inner, stream: 's' }));
    if ('ok' in o) await o.ok.close();
    await deleteStream(inner, 's');
    expect({
      restore: 'err' in r ? r.err.code : 'ok',
      open: 'err' in o ? o.err.code : 'ok',
      left: (await inner.list('s.s/')).length,
      streams: await listStreams(inner),
    }).toEqual({ restore: 'NOT_FOUND', open: 'ok', left: 3, streams: [] });
  });
});

describe('review: deleteStream over a jump fence that a crashed claim left above the writer', () => {
  it('a writer that commits while the delete runs fails FENCED, and commits nothing into the deleted stream afterwards', async () => {
    const inner = new MemoryStore();
    const w = await SnapshotEngine.open<{ n: number }>({ store: inner, stream: 's', policy: POLICY });
    for (let n = 1; n <= 3; n++) await w.checkpoint(big(n));
    // A claim lists (head 3), is held before its fence; the writer takes slot 4; the claim jumps to
    // slot 8, fences it, and crashes (every later call fails): the documented "claim that crashed
    // after fencing ahead of a busy writer".
    const gates = [latch(), latch()];
    const reached = [latch(), latch()];
    let puts = 0;
    const crashing = new HookStore(inner, async (op) => {
      if (puts >= 2) throw new Error('crashed');
      if (op === 'putIfAbsent') {
        const i = puts++;
        reached[i]!.open();
        await gates[i]!.p;
      }
    });
    const claim = SnapshotEngine.open({ store: crashing, stream: 's' }).catch(() => 'crashed');
    await reached[0]!.p;
    await w.checkpoint(big(4));
    gates[0]!.open();
    await reached[1]!.p;
    gates[1]!.open();
    expect(await claim).toBe('crashed');
    // The delete fences after the tail (the crashed claim's fence in slot 8), floor gc/9; its first
    // delete is held while the writer, whose next key is slot 5, commits.
    const d = holdOnce(inner, (op) => op === 'delete');
    const deleting = deleteStream(d.store, 's');
    await d.reached;
    const during = await settle(w.checkpoint(big(5)));
    d.release();
    await deleting;
    const after: unknown[] = [];
    for (let n = 6; n <= 8; n++)
      after.push(await settle(w.checkpoint(big(n))).then((r) => ('ok' in r ? r.ok.seq : r.err.code)));
    const r = await settle(restore(inner, 's'));
    expect({
      during: 'err' in during ? during.err.code : `acked ${during.ok.seq}`,
      after,
      restore: 'err' in r ? r.err.code : 'ok',
    }).toEqual({ during: 'FENCED', after: ['FENCED', 'FENCED', 'FENCED'], restore: 'NOT_FOUND' });
  });
});

/**
 * S3's 409 ConditionalRequestConflict as the engine itself models it (commit.ts: "a conditional
 * write that lost a race to a write that then failed ... The key may be free again"): two
 * conditional creates of one key that overlap both answer false, and neither is written.
 */
class Conflicting409 extends HookStore {
  readonly #pending = new Map<string, { conflict: boolean; arrived: () => void }>();
  constructor(
    inner: Store,
    private readonly conflicts: (key: string) => boolean,
  ) {
    super(inner);
  }
  override async putIfAbsent(key: string, body: Uint8Array): Promise<boolean> {
    if (!this.conflicts(key)) return this.inner.putIfAbsent(key, body);
    const first = this.#pending.get(key);
    if (first) {
      first.conflict = true;
      first.arrived();
      return false; // 409: nothing written
    }
    let arrived!: () => void;
    const p = new Promise<void>((r) => (arrived = r));
    const me = { conflict: false, arrived };
    this.#pending.set(key, me);
    await Promise.race([p, sleep(200)]);
    this.#pending.delete(key);
    if (me.conflict) return false; // 409 for this one too: neither landed
    return this.inner.putIfAbsent(key, body);
  }
}

describe('review: two gc runs whose floor writes conflict (S3 409)', () => {
  it('gc does not delete below a floor it failed to write: no fork, no CORRUPT, no gap', async () => {
    const inner = new MemoryStore();
    const w = await SnapshotEngine.open<{ n: number }>({ store: inner, stream: 's', policy: POLICY });
    for (let n = 1; n <= 10; n++) await w.checkpoint(big(n));
    // C lists (head 10, prefetching the chain) and is held before its fence in slot 11...
    const c = holdOnce(inner, (op, key) => op === 'putIfAbsent' && key.includes('/log/'));
    const opening = SnapshotEngine.open<{ n: number }>({ store: c.store, stream: 's', policy: POLICY });
    await c.reached;
    // ...while W commits on, and two gc runs (the engine's own and a cron job, say) race.
    for (let n = 11; n <= 20; n++) await w.checkpoint(big(n));
    const s409 = new Conflicting409(inner, (key) => key.includes('/gc/'));
    // A gc whose floor write keeps conflicting may give up (STORAGE), having deleted nothing.
    const runs = await Promise.allSettled([gc(s409, 's', RETAIN), gc(s409, 's', RETAIN)]);
    const floors = await inner.list('s.s/gc/');
    const deleted = (await listCheckpoints(inner, 's'))[0]!.seq > 1;
    c.release();
    const engine = await opening;
    const cOpenedAt = engine.seq;
    const cAck = await settle(engine.checkpoint(big(1000)));
    const wAck = await settle(w.checkpoint(big(21)));
    const list = await listCheckpoints(inner, 's').then((l) => l.map((e) => (e.damaged ? `${e.seq}!` : e.seq)));
    expect(runs.every((r) => r.status === 'fulfilled' || (r.reason as { code?: string }).code === 'STORAGE')).toBe(
      true,
    );
    expect({
      floorsIfDeleted: deleted ? floors.length : 1,
      cOpenedAt,
      bothAcked: 'ok' in cAck && 'ok' in wAck,
      damaged: list.filter((e) => typeof e === 'string'),
    }).toEqual({ floorsIfDeleted: 1, cOpenedAt: expect.any(Number), bothAcked: false, damaged: [] });
    // C opened on W's newest checkpoint, or on fillers after it (it jumped ahead of W).
    expect(cOpenedAt).toBeGreaterThanOrEqual(20);
  });
});

describe('review: a restore that reads across a delete and a zombie write (race harness seed 252)', () => {
  // A restore lists the chain (base 5, delta 6) and reads seq 6; before it reads seq 5, the whole
  // stream is deleted and an engine fenced before the delete, its write held, lands a frame of
  // another life in the emptied slot 5 (below the floor, by design). The chain then does not link.
  async function readAcross(deleteFirst: boolean): Promise<{ code?: string; message?: string } | 'ok'> {
    const inner = new MemoryStore();
    await seedSix(inner);
    // The other life's seq 5: the same stream id written again with other values.
    const other = new MemoryStore();
    const zombie = await SnapshotEngine.open({ store: other, stream: 's', policy: POLICY });
    for (let n = 1; n <= 6; n++) await zombie.checkpoint({ n: -n, pad: PAD.slice(1) });
    await zombie.close();
    const slot5 = 's.s/log/0000000000000005';
    const frame = (await other.get(slot5))!;
    const held = holdOnce(inner, (op, key) => op === 'get' && key === slot5);
    const reading = settle(restore(held.store, 's'));
    await held.reached;
    if (deleteFirst) await deleteStream(inner, 's');
    else await inner.delete(slot5); // no floor: the slot was emptied by something else
    expect(await inner.putIfAbsent(slot5, frame)).toBe(true);
    held.release();
    const r = await reading;
    return 'err' in r ? r.err : 'ok';
  }

  it('is deleted history when a floor above the chain is recorded: NOT_FOUND (list again), not CORRUPT', async () => {
    const err = await readAcross(true);
    expect(err === 'ok' ? 'ok' : err.code, JSON.stringify(err)).toBe('NOT_FOUND');
  });

  it('is damage when no floor says the chain was deleted: CORRUPT, naming the seq that does not link', async () => {
    const err = await readAcross(false);
    expect(err === 'ok' ? 'ok' : err.code, JSON.stringify(err)).toBe('CORRUPT');
    expect(err === 'ok' ? '' : err.message).toMatch(/seq 6/);
  });
});
