import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryStore, SnapshotEngine, gc, listCheckpoints, restore, type Store } from 'statefold';
import { HookStore, latch } from '../support/hook-store.js';
import { verified } from '../support/checkpoints.js';

/**
 * Claims racing a busy writer, step by step: each scenario holds store calls at chosen points
 * (a review of the claim protocol found these interleavings; each once lost or bricked a stream).
 */

/** Every listed seq restores, seqs are 1..n, and the newest is `newest`. */
async function expectWhole(store: Store, stream: string, newest: unknown): Promise<number> {
  const entries = await listCheckpoints(store, stream);
  expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => entries[0]!.seq + i));
  for (const e of entries) await restore(store, stream, { seq: e.seq });
  expect((await restore(store, stream)).state).toEqual(newest);
  return entries[entries.length - 1]!.seq;
}

/** A claim that waits before each of its first two putIfAbsent calls, and crashes (every call fails) after the second. */
function crashingClaim(inner: Store, stream: string) {
  const gates = [latch(), latch()];
  const reached = [latch(), latch()];
  let puts = 0;
  const store = new HookStore(inner, async (op) => {
    if (puts >= 2) throw new Error('crashed');
    if (op === 'putIfAbsent') {
      const i = puts++;
      reached[i]!.open();
      await gates[i]!.p;
    }
  });
  const open = SnapshotEngine.open({ store, stream }).then(
    () => 'opened',
    (e: { code?: string }) => e.code,
  );
  return { gates, reached, open };
}

describe('claim races: claims jumping ahead of a busy writer', () => {
  it('two claims that jump at once and crash leave a stream that restores, lists, gcs and opens', async () => {
    const inner = new MemoryStore();
    const w = await SnapshotEngine.open({ store: inner, stream: 's' });
    for (let n = 1; n <= 3; n++) await w.checkpoint({ n });
    const c1 = crashingClaim(inner, 's');
    await c1.reached[0]!.p; // C1 listed, about to fence slot 4
    await w.checkpoint({ n: 4 }); // the writer takes slot 4: C1 jumps ahead
    c1.gates[0]!.open();
    await c1.reached[1]!.p;
    const c2 = crashingClaim(inner, 's');
    await c2.reached[0]!.p; // C2 listed before C1's jump fence exists
    await w.checkpoint({ n: 5 });
    c2.gates[0]!.open();
    await c2.reached[1]!.p;
    c1.gates[1]!.open();
    c2.gates[1]!.open();
    await c1.open;
    await c2.open;
    // The writer goes on below the jump fences and is fenced at the first.
    const acked: number[] = [];
    for (let n = 6; n <= 12; n++) {
      const r = await w.checkpoint({ n }).then(
        (i) => i.seq,
        (e: { code: string }) => e.code,
      );
      if (r === 'FENCED') break;
      acked.push(r as number);
    }
    expect(w.fenced).toBe(true);
    // (Its last acknowledged state: one of those, or, fenced at once, { n: 5 }.)
    const last = acked[acked.length - 1] ?? 5;
    expect(await expectWhole(inner, 's', { n: last })).toBe(last);
    const report = await gc(inner, 's', { keepLast: 1, minAgeMs: 0 });
    expect(report.oldestRetained).toBeLessThanOrEqual(last);
    expect((await restore(inner, 's', { seq: last })).state).toEqual({ n: last });
    const next = await SnapshotEngine.open({ store: inner, stream: 's' });
    expect(next.state).toEqual({ n: last });
    await next.checkpoint({ n: 'next' });
    await next.close();
    await expectWhole(inner, 's', { n: 'next' });
  });

  it('a writer whose commit had an unknown outcome does not delete it when a claim jumped above it', async () => {
    const inner = new MemoryStore();
    let failNextPut = false;
    let phase = 0;
    const wCreated = latch();
    const wGo = latch();
    const wStore = new HookStore(inner, async (op) => {
      if (op === 'putIfAbsent' && failNextPut) {
        failNextPut = false;
        throw new Error('socket hang up'); // an unknown outcome; here it did not land
      }
      if (phase === 1 && op === 'list') {
        phase = 2;
        wCreated.open();
        await wGo.p;
      }
    });
    const w = await SnapshotEngine.open({ store: wStore, stream: 's', policy: { baseEvery: 100 } });
    const big = randomBytes(8000).toString('base64');
    await w.checkpoint({ n: 1, big });
    await w.checkpoint({ n: 2, big });
    failNextPut = true;
    await expect(w.checkpoint({ n: 3, big })).rejects.toMatchObject({ code: 'STORAGE' });
    const cAtPut = latch();
    const cGo = latch();
    let cPuts = 0;
    const cStore = new HookStore(inner, async (op) => {
      if (op === 'putIfAbsent' && cPuts++ === 0) {
        cAtPut.open();
        await cGo.p;
      }
    });
    const cOpen = SnapshotEngine.open<{ n: unknown; big?: string }>({ store: cStore, stream: 's' });
    await cAtPut.p;
    phase = 1;
    const retry = w.checkpoint({ n: 3, big }).then(
      (i) => i.seq,
      (e: { code: string }) => e.code,
    );
    await wCreated.p; // the writer's retry created slot 3 and checks whether it is stale
    cGo.open(); // the claim loses slot 3 to it, jumps ahead and fills on top of it
    const c = await cOpen;
    expect(c.state!.n).toBe(3);
    wGo.open();
    expect(await retry).toBe(3); // it stands: no retention floor above it
    await c.checkpoint({ n: 'C', big });
    await c.close();
    await expectWhole(inner, 's', { n: 'C', big });
    const reopened = await SnapshotEngine.open({ store: inner, stream: 's' });
    await reopened.close();
  });

  it('keeps a zombie writer fenced after retention deletes the fillers that closed its next seqs', async () => {
    const inner = new MemoryStore();
    const w = await SnapshotEngine.open({ store: inner, stream: 's' });
    for (let n = 1; n <= 3; n++) await w.checkpoint({ n });
    const gate = latch();
    const reached = latch();
    let puts = 0;
    const cStore = new HookStore(inner, async (op) => {
      if (op === 'putIfAbsent' && puts++ === 0) {
        reached.open();
        await gate.p;
      }
    });
    const cOpen = SnapshotEngine.open({ store: cStore, stream: 's', policy: { baseEvery: 2 } });
    await reached.p;
    await w.checkpoint({ n: 4 }); // the claim jumps ahead and fills the seqs the writer never reached
    gate.open();
    const c = await cOpen;
    expect(verified(await listCheckpoints(inner, 's')).some((e) => e.filler)).toBe(true);
    for (let i = 0; i < 4; i++) await c.checkpoint({ n: `C${i}` });
    await gc(inner, 's', { keepLast: 1, minAgeMs: 0 });
    // The writer, paused all along, wakes: its next key is still taken.
    await expect(w.checkpoint({ n: 5 })).rejects.toMatchObject({ code: 'FENCED' });
    await c.close();
    await expectWhole(inner, 's', { n: 'C3' });
  });
});
