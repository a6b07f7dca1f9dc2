// statefold's crash-and-resume demo: `npm run demo` (add `-- --short` for a quick run).
//
// An order-processing agent pays through a local payment service (its own process, on
// 127.0.0.1, honouring idempotency keys). The demo SIGKILLs the agent at random moments, resumes
// it each time from its last checkpoint, then compares the result with an uninterrupted run of
// the same seed and prints a report. Exit status 1 if any check fails.
// Store: a SqliteStore (one database file) in a temp dir, the embedded default; `--store file` for a
// FileStore there instead; S3 when STATEFOLD_S3_ENDPOINT (and the other STATEFOLD_S3_* variables) are set.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import lz4 from 'lz4';
import { Packr } from 'msgpackr';
import { FileStore, listCheckpoints, restore } from 'statefold';

const here = path.dirname(fileURLToPath(import.meta.url));
// The AWS SDK (loaded only for S3) warns at every start that its 2027 releases need Node 22;
// in a demo that starts a dozen processes that is only noise. Children inherit this.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const args = process.argv.slice(2);
const short = args.includes('--short');
const argValue = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const ORDERS = argValue('--orders', short ? 12 : 60);
const KILLS = argValue('--kills', short ? 3 : 6);
const SEED = argValue('--seed', 42);
const STREAM = `orders-agent-${SEED}`;
const useS3 = Boolean(process.env.STATEFOLD_S3_ENDPOINT);
const storeArg = args.includes('--store') ? args[args.indexOf('--store') + 1] : 'sqlite';
if (storeArg !== 'sqlite' && storeArg !== 'file') {
  process.stderr.write(`statefold demo: --store must be sqlite or file (got ${storeArg})\n`);
  process.exit(2);
}
const storeName = useS3 ? 'S3' : storeArg === 'file' ? 'file' : 'SQLite';
if (useS3 && args.includes('--store'))
  process.stderr.write('statefold demo: STATEFOLD_S3_ENDPOINT is set: running on S3, --store is ignored\n');

let rngState = SEED >>> 0;
const random = () => (rngState = (Math.imul(rngState, 1103515245) + 12345) >>> 0) / 4294967296;
const log = (line) => process.stderr.write(`${line}\n`);

/** Starts the payment service and resolves its port and process. */
function startPaymentService() {
  const child = spawn(process.execPath, [path.join(here, 'payment-service.mjs')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('payment service did not start within 10 s')), 10_000);
    child.stdout.once('data', (d) => {
      clearTimeout(timer);
      resolve({ port: Number(String(d).trim()), child });
    });
    child.once('exit', (code) => reject(new Error(`payment service exited with ${code}`)));
  });
}

async function stats(port) {
  const res = await fetch(`http://127.0.0.1:${port}/stats`, { signal: AbortSignal.timeout(5000) });
  return res.json();
}

/**
 * Runs the agent once. With `kill`, SIGKILLs it `kill.delayMs` after its `kill.afterAcks`-th
 * acknowledged checkpoint: a random moment inside the run, wherever it falls (mid-step,
 * mid-write, mid-payment). Resolves how it ended.
 */
function runAgent(storeSpec, port, kill) {
  const child = spawn(
    process.execPath,
    [path.join(here, 'agent.mjs'), storeSpec, STREAM, String(SEED), String(ORDERS), String(port)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  let seen = 0;
  let killed = false;
  let timer;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    out += d;
    if (kill && timer === undefined) {
      seen += (d.match(/^ack /gm) ?? []).length;
      if (seen >= kill.afterAcks) timer = setTimeout(() => (killed = child.kill('SIGKILL')), kill.delayMs);
    }
  });
  const deadline = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(deadline);
      const lines = out.split('\n');
      const open = lines.find((l) => l.startsWith('open '))?.split(' ');
      const done = lines.find((l) => l.startsWith('done '));
      const acks = lines.filter((l) => l.startsWith('ack ')).length;
      resolve({
        code,
        signal,
        killed: killed && signal === 'SIGKILL',
        done: Boolean(done),
        acks,
        openSeq: open ? Number(open[1]) : undefined,
        openMs: open ? Number(open[2]) : undefined,
      });
    });
  });
}

async function storeFor(label) {
  if (useS3) {
    const { S3Store } = await import('statefold/s3');
    const prefix = `demo-${Date.now().toString(36)}-${label}`;
    const store = new S3Store({
      bucket: process.env.STATEFOLD_S3_BUCKET,
      prefix,
      endpoint: process.env.STATEFOLD_S3_ENDPOINT,
      region: process.env.STATEFOLD_S3_REGION ?? 'us-east-1',
      forcePathStyle: true,
      credentials: {
        accessKeyId: process.env.STATEFOLD_S3_ACCESS_KEY_ID,
        secretAccessKey: process.env.STATEFOLD_S3_SECRET_ACCESS_KEY,
      },
    });
    return { spec: `s3:${prefix}`, store, where: `S3 bucket ${process.env.STATEFOLD_S3_BUCKET}/${prefix}` };
  }
  const dir = await mkdtemp(path.join(tmpdir(), `statefold-demo-${label}-`));
  if (storeArg === 'file') return { spec: dir, store: new FileStore({ dir }), where: dir, dir };
  // The agent's processes and this one open the same database file (each its own SqliteStore).
  // Loaded here: --store file and S3 run where better-sqlite3 is not installed.
  const { SqliteStore } = await import('statefold/sqlite');
  const file = path.join(dir, 'agents.db');
  const store = new SqliteStore({ path: file });
  closing.push(() => store.close());
  return { spec: file, store, where: file, dir };
}

const checks = [];
const check = (name, ok, detail = '') => checks.push({ name, ok, detail });

const services = [];
const dirs = [];
/** Stores to close before their files are removed. */
const closing = [];
try {
  log(
    `statefold demo: ${ORDERS} orders, ${ORDERS * 5} steps, up to ${KILLS} SIGKILLs, seed ${SEED}, store: ${storeName}`,
  );
  const main = await startPaymentService();
  services.push(main.child);
  const live = await storeFor('killed');
  if (live.dir) dirs.push(live.dir);

  // The interrupted run: kill at random moments, resume until the agent finishes.
  const runs = [];
  let kills = 0;
  // The agent acknowledges a step checkpoint every 3 steps: spread the kills over the run.
  const expectedAcks = Math.ceil((ORDERS * 5) / 3);
  for (let attempt = 0; attempt < KILLS + 20; attempt++) {
    const kill =
      kills < KILLS
        ? { afterAcks: 1 + Math.floor(random() * (expectedAcks / (KILLS + 1))), delayMs: Math.floor(random() * 25) }
        : undefined;
    const run = await runAgent(live.spec, main.port, kill);
    runs.push(run);
    if (run.killed) {
      kills++;
      log(
        `  SIGKILL ${kills}: ${kill.delayMs} ms after checkpoint ${kill.afterAcks} of that life (it had resumed from seq ${run.openSeq})`,
      );
      continue;
    }
    if (run.done) break;
    throw new Error(`agent exited with code ${run.code} signal ${run.signal}`);
  }
  check('the agent finished after every kill', runs[runs.length - 1].done, `${runs.length} lives`);

  // An uninterrupted run with the same seed, against its own payment service.
  log('  running the same agent uninterrupted, for reference');
  const ref = await startPaymentService();
  services.push(ref.child);
  const clean = await storeFor('reference');
  if (clean.dir) dirs.push(clean.dir);
  const refRun = await runAgent(clean.spec, ref.port, undefined);
  check('the reference run finished', refRun.done);

  const finalKilled = await restore(live.store, STREAM);
  const finalRef = await restore(clean.store, STREAM);
  check('final state equals the uninterrupted run', isDeepStrictEqual(finalKilled.state, finalRef.state));
  check(
    'no effect left pending',
    finalKilled.effects.every((e) => e.status === 'done'),
    `${finalKilled.effects.length} effects recorded`,
  );

  const payments = await stats(main.port);
  const perOrder = new Map();
  for (const c of payments.charges) perOrder.set(c.order, (perOrder.get(c.order) ?? 0) + 1);
  const exactlyOnce = perOrder.size === ORDERS && [...perOrder.values()].every((n) => n === 1);
  check('exactly one charge per order', exactlyOnce, `${payments.charges.length} charges for ${ORDERS} orders`);

  // Storage: what statefold wrote, against a full msgpackr + lz4 snapshot at every checkpoint.
  const list = await listCheckpoints(live.store, STREAM);
  const bases = list.filter((c) => c.kind === 'base');
  const deltas = list.filter((c) => c.kind === 'delta');
  const stored = list.reduce((n, c) => n + c.bytes, 0);
  const packr = new Packr({ useRecords: false });
  let full = 0;
  const restoreMs = [];
  for (const c of list) {
    const t0 = performance.now();
    const r = await restore(live.store, STREAM, { seq: c.seq });
    restoreMs.push(performance.now() - t0);
    const raw = packr.pack(r.state);
    const out = Buffer.alloc(lz4.encodeBound(raw.length));
    full += lz4.encodeBlock(raw, out) || raw.length;
  }
  check('every checkpoint restores', restoreMs.length === list.length);
  restoreMs.sort((a, b) => a - b);
  const opens = runs
    .filter((r) => r.openMs !== undefined && r.openSeq > 0)
    .map((r) => r.openMs)
    .sort((a, b) => a - b);
  const pct = (arr, p) => (arr.length ? arr[Math.min(arr.length - 1, Math.floor(p * arr.length))] : NaN);
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`;

  const report = [
    '',
    'statefold crash-and-resume demo',
    `  store                      ${live.where}`,
    `  kills survived             ${kills}`,
    `  checkpoints                ${list.length} (${bases.length} bases, ${deltas.length} deltas)`,
    `  bytes stored               ${kb(stored)} (bases ${kb(bases.reduce((n, c) => n + c.bytes, 0))}, deltas ${kb(deltas.reduce((n, c) => n + c.bytes, 0))})`,
    `  as full snapshots          ${kb(full)} (msgpackr + lz4 at every checkpoint): statefold wrote ${((1 - stored / full) * 100).toFixed(1)}% less`,
    `  resume (open + restore)    median ${pct(opens, 0.5).toFixed(1)} ms, max ${(opens[opens.length - 1] ?? NaN).toFixed(1)} ms over ${opens.length} resumes, in a fresh process`,
    `  restore of any seq         median ${pct(restoreMs, 0.5).toFixed(1)} ms, p99 ${pct(restoreMs, 0.99).toFixed(1)} ms over ${restoreMs.length} seqs`,
    `  charges requested          ${payments.requests}`,
    `  charges made               ${payments.charges.length} for ${ORDERS} orders`,
    '',
    ...checks.map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}${c.detail ? ` (${c.detail})` : ''}`),
    '',
  ];
  process.stdout.write(report.join('\n'));
} catch (err) {
  check('demo ran', false, err instanceof Error ? err.message : String(err));
  process.stdout.write(`\nFAIL ${checks[checks.length - 1].detail}\n`);
} finally {
  for (const s of services) s.kill('SIGKILL');
  await Promise.allSettled(closing.map((close) => close()));
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
}
const failed = checks.filter((c) => !c.ok);
process.stdout.write(failed.length === 0 ? 'all checks passed\n' : `${failed.length} check(s) failed\n`);
process.exit(failed.length === 0 ? 0 : 1);
