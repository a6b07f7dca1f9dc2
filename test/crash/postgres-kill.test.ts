import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listCheckpoints } from 'statefold';
import type { PostgresStore } from 'statefold/postgres';
import { killRounds, raceRound } from '../support/kill-harness.mjs';
import { PG_SKIP_LINE, dropTables, freshTable, pgTestUrl } from '../support/pg-env.js';
import { batchBody, batchKey } from '../support/sqlite-batches.mjs';
import { afterChildExit, storeAt } from '../support/store-kind.mjs';

/**
 * Real processes on one PostgresStore table. SIGKILL of processes committing through it, at random
 * moments and in the middle of statements (large group commits); processes racing on one stream
 * (fencing across processes: create-if-absent is INSERT ... ON CONFLICT DO NOTHING on the primary
 * key). After a kill the checks wait until the server has dropped the dead process's connections
 * (its last statement may commit until then). Seeds: STATEFOLD_KILL_SEED (default 1).
 */

const url = pgTestUrl();
if (url === undefined) console.log(PG_SKIP_LINE);
const describePg = url === undefined ? describe.skip : describe;

const seed = Number(process.env.STATEFOLD_KILL_SEED ?? 1);
const BATCH_CHILD = path.join(import.meta.dirname, '../support/postgres-batch-child.mjs');

const tables: string[] = [];
afterAll(async () => {
  if (url !== undefined) await dropTables(url, tables);
});
/** A table of its own, as the harness and the children name it: `<URL>#<table>`. */
function where(): string {
  const table = freshTable('kill');
  tables.push(table);
  return `${url!}#${table}`;
}

describePg('postgres kill: SIGKILL in the middle of statements', () => {
  it('keeps every batch whole or absent and every acknowledged batch', async () => {
    const file = where();
    const KEYS = 8;
    const SIZE = 128 * 1024;
    let random = seed * 2654435761;
    const next = (): number => ((random = (random * 1103515245 + 12345) >>> 0) % 1000) / 1000;
    let acked = -1;
    let firstBatch = 0;
    const stats = { kills: 0, inFlight: 0, inFlightLanded: 0, transactions: 0, batches: 0 };
    for (let round = 0; round < 15; round++) {
      const child = spawn(process.execPath, [BATCH_CHILD, file, String(firstBatch), String(KEYS), String(SIZE)], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, STATEFOLD_TEST_STORE: 'postgres' },
      });
      const lines: string[] = [];
      let partial = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        partial += chunk;
        const cut = partial.lastIndexOf('\n');
        if (cut >= 0) {
          lines.push(...partial.slice(0, cut).split('\n'));
          partial = partial.slice(cut + 1);
        }
      });
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const exited = new Promise<string | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)));
      // Once it commits, a random moment a few transactions later.
      for (let i = 0; i < 2000 && !lines.some((l) => l.startsWith('ack')) && child.exitCode === null; i++)
        await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, Math.floor(next() * 120)));
      child.kill('SIGKILL');
      expect(await exited, `round ${round}: killed (${stderr} ${lines.slice(-2).join(' | ')})`).toBe('SIGKILL');
      // What the dead process sent may still commit until the server drops its connection.
      await afterChildExit('postgres', file);
      stats.kills++;
      let sent = -1;
      let txAtFirstAck: number | undefined;
      let roundAcks = 0;
      for (const line of lines) {
        const [kind, batch, tx] = line.split(' ');
        if (kind === 'sent') sent = Number(batch);
        else if (kind === 'ack') {
          expect(Number(batch), `round ${round}: ack of batch ${batch} after ${acked}`).toBe(acked + 1);
          acked = Number(batch);
          roundAcks++;
          txAtFirstAck ??= Number(tx);
          stats.transactions = Number(tx) - txAtFirstAck + 1;
        } else throw new Error(`round ${round}: the child said "${line}"`);
      }
      // One statement per batch: the batch's creates were one group commit.
      if (roundAcks > 0) expect(stats.transactions, `round ${round}`).toBe(roundAcks);
      stats.batches += roundAcks;
      const inFlight = sent > acked ? sent : undefined;
      // A new store on the table, as a process starting after the crash: every batch whole or absent.
      const store = (await storeAt('postgres', file)) as PostgresStore;
      try {
        const keys = await store.list('b/');
        const byBatch = new Map<number, number>();
        for (const k of keys) {
          const batch = Number(k.split('/')[1]);
          byBatch.set(batch, (byBatch.get(batch) ?? 0) + 1);
        }
        for (const [batch, n] of byBatch) expect(n, `round ${round}: keys of batch ${batch}`).toBe(KEYS);
        const last = Math.max(-1, ...byBatch.keys());
        expect(
          last === acked || (inFlight !== undefined && last === inFlight),
          `round ${round}: newest batch ${last}, acked ${acked}`,
        ).toBe(true);
        expect(byBatch.size, `round ${round}: batches 0..${last} all there`).toBe(last + 1);
        if (inFlight !== undefined) {
          stats.inFlight++;
          if (last === inFlight) stats.inFlightLanded++;
        }
        // The newest batches' bodies, byte for byte.
        for (let batch = Math.max(0, last - 1); batch <= last; batch++)
          for (let j = 0; j < KEYS; j++)
            expect(Buffer.compare(Buffer.from((await store.get(batchKey(batch, j)))!), batchBody(batch, j, SIZE))).toBe(
              0,
            );
        acked = last;
        firstBatch = last + 1;
      } finally {
        await store.close();
      }
    }
    console.log(
      `postgres kill: seed ${seed}: ${stats.kills} kills, ${stats.batches} batches acknowledged (one transaction each), killed with a batch in flight ${stats.inFlight}x (it landed whole ${stats.inFlightLanded}x, else not at all)`,
    );
    // Most kills fell inside a transaction (the child does little else).
    expect(stats.inFlight).toBeGreaterThanOrEqual(8);
  }, 180_000);
});

describePg('postgres kill: SIGKILL of agents checkpointing through a PostgresStore', () => {
  it('restores the last acknowledged checkpoint or the one in flight after each kill, and the next process resumes from it', async () => {
    const file = where();
    const stats = await killRounds({ dir: file, kills: 25, seconds: 60, seed, baseEvery: 8, kind: 'postgres' });
    console.log(
      `postgres kill: seed ${seed}: ${stats.kills} kills (${stats.killedBeforeOpen} before open), ${stats.restores} restores, ${stats.acks} acknowledged, in-flight landed ${stats.inFlightLanded}x, ${stats.committed} committed, ${stats.historyChecks} history checks`,
    );
    expect(stats.mismatches, `seed ${seed}`).toEqual([]);
    expect(stats.kills).toBeGreaterThanOrEqual(15);
    const store = (await storeAt('postgres', file)) as PostgresStore;
    expect((await listCheckpoints(store, 'agent/kill')).length).toBe(stats.committed);
    await store.close();
  }, 120_000);
});

describePg('postgres fencing: processes on one table', () => {
  it('never forks: the last opener commits, earlier openers are fenced, every seq restores (all open before any commit)', async () => {
    const file = where();
    for (let round = 0; round < 3; round++) {
      const r = await raceRound({ dir: file, writers: 3, steps: 25, barrier: true, seed, round, kind: 'postgres' });
      expect(r.mismatches, `seed ${seed} round ${round}`).toEqual([]);
      expect(r.fenced, `seed ${seed} round ${round}`).toBe(2);
    }
  }, 90_000);

  it('never forks when processes open and commit at staggered random moments', async () => {
    const file = where();
    let fenced = 0;
    for (let round = 0; round < 4; round++) {
      const r = await raceRound({
        dir: file,
        writers: 2 + (round % 2),
        steps: 60,
        barrier: false,
        seed,
        round,
        kind: 'postgres',
      });
      expect(r.mismatches, `seed ${seed} round ${round}`).toEqual([]);
      fenced += r.fenced;
    }
    console.log(`postgres race: seed ${seed}: ${fenced} writers fenced over 4 staggered rounds`);
  }, 90_000);
});
