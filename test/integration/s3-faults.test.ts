import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { SnapshotEngine, StatefoldError, listCheckpoints, restore } from 'statefold';
import type { S3Store } from 'statefold/s3';
import { FaultProxy } from '../support/fault-proxy.js';
import { mulberry32 } from '../support/prng.mjs';
import { removePrefix } from '../support/s3-cleanup.js';
import { s3Client, s3Store, s3TestEnv, type S3TestEnv } from '../support/s3-env.js';

// The engine on a real S3-compatible server behind a proxy that injects 503 SlowDown, 500, resets,
// slow answers and "request forwarded, answer dropped" at a fixed rate. Every checkpoint the
// engine acknowledged must restore exactly; failed ones may be lost, nothing else.
// STATEFOLD_FAULT_CHECKPOINTS sets the run's length (default 300; a soak: thousands).
const env = s3TestEnv();
const RUN = `statefold-it/${Date.now().toString(36)}-${randomBytes(3).toString('hex')}-faults`;
const CHECKPOINTS = Number(process.env.STATEFOLD_FAULT_CHECKPOINTS ?? 300);
const SEED = Number(process.env.STATEFOLD_FAULT_SEED ?? 20261203);
const RATE = Number(process.env.STATEFOLD_FAULT_RATE ?? 0.2);

if (env === undefined) {
  describe.skip('engine on s3 through a fault proxy (needs STATEFOLD_S3_ENDPOINT)', () => {
    it('acknowledged checkpoints survive injected faults', () => undefined);
  });
} else {
  defineSuite(env);
}

interface AgentState {
  step: number;
  messages: { id: number; text: string }[];
  counters: Record<string, number>;
}

function defineSuite(env: S3TestEnv): void {
  const admin = s3Client(env);
  afterAll(async () => {
    await removePrefix(admin, env.bucket, `${RUN}/`);
    admin.destroy();
  });

  describe('engine on s3 through a fault proxy', () => {
    it(`restores every acknowledged checkpoint exactly after ${CHECKPOINTS} checkpoints at a ${RATE} fault rate (seed ${SEED})`, async () => {
      const proxy = await FaultProxy.start({ upstream: env.endpoint, rate: RATE, seed: SEED });
      const random = mulberry32(SEED);
      const prefix = `${RUN}/a/`;
      const stream = 'agent/faults';
      // Few tries per request, so that some checkpoints fail outright and the engine's own recovery is exercised too.
      const storeOptions = {
        endpoint: proxy.endpoint,
        maxAttempts: 2,
        retryBaseDelayMs: 5,
        retryMaxDelayMs: 50,
        requestTimeoutMs: 5_000,
      };
      const stores: S3Store[] = [];
      const faulty = (): S3Store => {
        const s = s3Store({ ...env, endpoint: proxy.endpoint }, prefix, storeOptions);
        stores.push(s);
        return s;
      };
      const acked = new Map<number, string>();
      const stats = { acked: 0, failed: 0, opens: 0, openFailures: 0, fenced: 0 };
      let engine: SnapshotEngine<AgentState> | undefined;
      let state: AgentState = { step: 0, messages: [], counters: {} };
      const open = async (): Promise<SnapshotEngine<AgentState>> => {
        for (let attempt = 1; ; attempt++) {
          stats.opens++;
          try {
            const e = await SnapshotEngine.open<AgentState>({ store: faulty(), stream, policy: { baseEvery: 8 } });
            // Resume from what the stream holds: an acknowledged state, or one whose outcome was unknown.
            state = e.state ?? state;
            return e;
          } catch (err) {
            stats.openFailures++;
            expect(err, 'open fails only with a StatefoldError').toBeInstanceOf(StatefoldError);
            if (attempt >= 20) throw err;
          }
        }
      };
      try {
        engine = await open();
        for (let i = 0; i < CHECKPOINTS; i++) {
          state = structuredClone(state);
          state.step++;
          state.messages.push({
            id: state.step,
            text: `message ${state.step}: ${Math.floor(random() * 1e9).toString(36)}`,
          });
          if (state.messages.length > 20) state.messages.shift();
          state.counters[`c${Math.floor(random() * 5)}`] = state.step;
          try {
            const info = await engine.checkpoint(state);
            acked.set(info.seq, JSON.stringify(state));
            stats.acked++;
          } catch (err) {
            expect(err, 'checkpoint fails only with a StatefoldError').toBeInstanceOf(StatefoldError);
            stats.failed++;
            if ((err as StatefoldError).code === 'FENCED') stats.fenced++;
          }
          // Now and then the process "restarts": a new engine takes the stream over.
          if (random() < 0.02) {
            await engine.close().catch(() => undefined);
            engine = await open();
          }
        }
        await engine.close().catch(() => undefined);
        proxy.enabled = false;
        // Read back straight from the server, not through the proxy.
        const clean = s3Store(env, prefix);
        stores.push(clean);
        const listed = new Set((await listCheckpoints(clean, stream)).map((c) => c.seq));
        let lost = 0;
        let wrong = 0;
        for (const [seq, json] of acked) {
          if (!listed.has(seq)) {
            lost++;
            continue;
          }
          const r = await restore<AgentState>(clean, stream, { seq });
          if (JSON.stringify(r.state) !== json) wrong++;
        }
        console.log(
          `s3 faults: seed ${SEED}, rate ${RATE}: ${proxy.counts.requests} requests, ${proxy.injected} faults injected ` +
            `(${Object.entries(proxy.counts)
              .filter(([k]) => k !== 'requests')
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')}); ` +
            `${CHECKPOINTS} checkpoints: ${stats.acked} acknowledged, ${stats.failed} failed (${stats.fenced} fenced), ` +
            `${stats.opens} opens (${stats.openFailures} failed); lost ${lost}, wrong ${wrong}`,
        );
        expect(proxy.injected, 'faults were injected').toBeGreaterThan(CHECKPOINTS * RATE);
        expect(stats.acked, 'most checkpoints went through').toBeGreaterThan(CHECKPOINTS / 2);
        expect(lost, 'acknowledged checkpoints lost').toBe(0);
        expect(wrong, 'acknowledged checkpoints restored wrong').toBe(0);
      } finally {
        for (const s of stores) s.destroy();
        await proxy.close();
      }
    }, 600_000);
  });
}
