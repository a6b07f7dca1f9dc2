import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { expect } from 'vitest';
import { SnapshotEngine, listCheckpoints, restore, type Store } from 'statefold';
import { verified } from './checkpoints.js';

const WRITER = path.join(import.meta.dirname, 'busy-writer.mjs');

/** What one takeover did, for the test's report. */
export interface TakeoverReport {
  /** Milliseconds the new engine's open took while the old writer ran. */
  openMs: number;
  /** Checkpoints the old writer had acknowledged when it stopped. */
  acked: number;
  fillers: number;
  /** The new engine's first seq. */
  seq: number;
}

/**
 * Starts a child that commits back to back with 3 checkpoints in flight (busy-writer.mjs), opens a
 * new engine on the same stream once the child has acknowledged `warmup` checkpoints, and checks:
 * the child is fenced, seqs are contiguous, every acknowledged seq restores to its state, every
 * other seq is a filler equal to the seq before, and the newest state is the new engine's.
 */
export async function takeOverBusyWriter(
  store: Store,
  args: [kind: 'file' | 's3' | 'sqlite', where: string],
  stream: string,
  warmup = 10,
): Promise<TakeoverReport> {
  const child = spawn(process.execPath, [WRITER, ...args, stream], { stdio: ['ignore', 'pipe', 'pipe'] });
  const acks = new Map<number, number>();
  const lines: string[] = [];
  let stderr = '';
  let partial = '';
  let warmedUp: () => void;
  const warm = new Promise<void>((resolve) => (warmedUp = resolve));
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    partial += chunk;
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      lines.push(line);
      const [kind, seq, n] = line.split(' ');
      if (kind === 'ack') acks.set(Number(seq), Number(n));
      if (acks.size >= warmup || kind === 'error' || kind === 'done') warmedUp();
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk.slice(0, 2000)));
  const killer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  try {
    await warm;
    expect(acks.size, `the busy writer got going: ${lines.slice(-3).join(' | ')} ${stderr}`).toBeGreaterThanOrEqual(
      warmup,
    );
    const t0 = performance.now();
    const fresh = await SnapshotEngine.open<{ by: string; n: number }>({ store, stream });
    const openMs = performance.now() - t0;
    const code = await exited;
    expect(lines[lines.length - 1], `the old writer is fenced (exit ${code}): ${stderr}`).toBe('fenced');
    const mine = await fresh.checkpoint({ by: 'new', n: 0 });
    await fresh.close();
    const entries = verified(await listCheckpoints(store, stream));
    expect(
      entries.map((e) => e.seq),
      'seqs are contiguous',
    ).toEqual(entries.map((_, i) => i + 1));
    expect(entries[entries.length - 1]!.seq).toBe(mine.seq);
    expect((await restore(store, stream)).state, 'the newest state is the new engine').toEqual({ by: 'new', n: 0 });
    let fillers = 0;
    for (const entry of entries.slice(0, -1)) {
      const got = (await restore(store, stream, { seq: entry.seq })).state;
      if (entry.filler) {
        fillers++;
        expect(acks.has(entry.seq), `filler seq ${entry.seq} was never acknowledged`).toBe(false);
        expect(got).toEqual((await restore(store, stream, { seq: entry.seq - 1 })).state);
      } else {
        expect(got, `seq ${entry.seq}`).toEqual({ by: 'old', n: acks.get(entry.seq) });
      }
    }
    return { openMs, acked: acks.size, fillers, seq: mine.seq };
  } finally {
    clearTimeout(killer);
    child.kill('SIGKILL');
  }
}
