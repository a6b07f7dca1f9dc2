// Real process kills and races on a FileStore dir (or, with kind 'sqlite', a SqliteStore file; 'postgres', a table),
// shared by test/crash/kill.test.ts, test/crash/sqlite-kill.test.ts and test/support/soak.mjs.
// Every loop is bounded by a count and a deadline, every child by a timeout.
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listCheckpoints, restore } from 'statefold';
import { difference, raceStep, stateAt } from './agent-steps.mjs';
import { mulberry32 } from './prng.mjs';
import { afterChildExit, storeAt } from './store-kind.mjs';

const KILL_CHILD = fileURLToPath(new URL('./kill-child.mjs', import.meta.url));
const RACE_CHILD = fileURLToPath(new URL('./race-child.mjs', import.meta.url));
/** A child that outlives this is killed and reported (a hang is a failure, never a stuck test). */
const CHILD_TIMEOUT_MS = 20_000;

/** Runs `node script ...args`; returns handles to its lines, its exit, and a way to kill it. */
function child(script, args, { stdin = 'ignore', onLine, kind = 'file' } = {}) {
  const proc = spawn(process.execPath, [script, ...args], {
    stdio: [stdin, 'pipe', 'pipe'],
    env: { ...process.env, STATEFOLD_TEST_STORE: kind },
  });
  const lines = [];
  let stderr = '';
  let partial = '';
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (chunk) => {
    partial += chunk;
    let nl;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      lines.push(line);
      onLine?.(line, lines);
    }
  });
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk) => {
    if (stderr.length < 4000) stderr += chunk;
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill('SIGKILL');
  }, CHILD_TIMEOUT_MS);
  // 'close' comes after the pipes are drained: every line the child wrote before dying is in `lines`.
  const exited = new Promise((resolve) => {
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, timedOut });
    });
  });
  return { proc, lines, exited, stderr: () => stderr, kill: () => proc.kill('SIGKILL') };
}

/**
 * Kills agent processes at random moments and checks after each kill that the stream restores
 * to the last acknowledged step or the one in flight, nothing else. Runs `kills` rounds or until
 * `seconds` have passed, whichever comes first. Resolves statistics and the list of mismatches.
 */
export async function killRounds({
  dir,
  stream = 'agent/kill',
  kills = 60,
  seconds = 60,
  seed = 1,
  baseEvery = 8,
  log = () => undefined,
  kind = 'file',
}) {
  const random = mulberry32(seed);
  const store = await storeAt(kind, dir);
  const deadline = Date.now() + seconds * 1000;
  const stats = {
    seed,
    kills: 0,
    rounds: 0,
    restores: 0,
    acks: 0,
    inFlightLanded: 0,
    killedBeforeOpen: 0,
    historyChecks: 0,
    mismatches: [],
  };
  const mismatch = (round, what) => {
    stats.mismatches.push(`seed ${seed} round ${round}: ${what}`);
    log(`MISMATCH seed ${seed} round ${round}: ${what}`);
  };
  let committed = await latestStep(store, stream);
  for (let round = 0; round < kills && Date.now() < deadline; round++) {
    stats.rounds++;
    // Three ways to pick the moment: any time from spawn (often during start-up or open), a while
    // after open, or right as the k-th checkpoint is acknowledged (the next one is then in flight).
    const how = random();
    const delay = Math.floor(random() * 250);
    const onAck = 1 + Math.floor(random() * 40);
    let killed = false;
    const c = child(KILL_CHILD, [dir, stream, '100000000', String(baseEvery)], {
      kind,
      onLine: (line, lines) => {
        if (killed) return;
        if (how >= 0.3 && how < 0.65 && line.startsWith('open')) {
          killed = true;
          setTimeout(() => c.kill(), Math.floor(delay / 2));
        } else if (how >= 0.65 && line.startsWith('ack') && lines.length - 1 >= onAck) {
          killed = true;
          c.kill();
        }
      },
    });
    if (how < 0.3) {
      sleep(Math.floor(delay * 1.6)).then(() => {
        killed = true;
        c.kill();
      });
    }
    const exit = await c.exited;
    await afterChildExit(kind, dir);
    if (exit.timedOut) {
      mismatch(
        round,
        `the child ran for ${CHILD_TIMEOUT_MS} ms without being killed (lines: ${c.lines.slice(-3).join(' | ')}; stderr: ${c.stderr()})`,
      );
      break;
    }
    if (exit.signal !== 'SIGKILL') {
      mismatch(
        round,
        `the child exited by itself with code ${exit.code} (lines: ${c.lines.slice(-3).join(' | ')}; stderr: ${c.stderr()})`,
      );
      break;
    }
    stats.kills++;
    let opened = false;
    let acked = committed;
    for (const line of c.lines) {
      const [kind, a, b, ...rest] = line.split(' ');
      if (kind === 'open') {
        opened = true;
        if (Number(a) !== committed || Number(b) !== committed || rest[0] !== 'ok')
          mismatch(round, `the child opened with "${line}", expected seq and step ${committed}`);
      } else if (kind === 'ack') {
        stats.acks++;
        const [seq, step] = [Number(a), Number(b)];
        if (step !== acked + 1 || seq !== step) mismatch(round, `ack "${line}" after step ${acked}`);
        acked = step;
      }
    }
    if (!opened) stats.killedBeforeOpen++;
    // What may survive: the last acknowledged step, or (once the child has opened) the one after it.
    const allowed = opened ? [acked, acked + 1] : [acked];
    let got;
    try {
      const r = await restore(store, stream);
      stats.restores++;
      got = r.state.step;
      if (!allowed.includes(got)) mismatch(round, `restored step ${got}, expected ${allowed.join(' or ')}`);
      else {
        if (r.seq !== got) mismatch(round, `step ${got} restored from seq ${r.seq}`);
        const d = difference(r.state, stateAt(got));
        if (d !== undefined) mismatch(round, `restored state of step ${got} differs: ${d}`);
        if (r.meta?.step !== got) mismatch(round, `restored meta ${JSON.stringify(r.meta)} for step ${got}`);
      }
    } catch (err) {
      if (err?.code === 'NOT_FOUND' && allowed.includes(0)) {
        stats.restores++;
        got = 0;
      } else {
        mismatch(round, `restore failed: ${err?.code} ${err?.message}`);
        break;
      }
    }
    if (got === acked + 1) stats.inFlightLanded++;
    committed = got;
    if (round % 15 === 14) {
      stats.historyChecks++;
      for (const m of await checkHistory(store, stream, committed, random, 30)) mismatch(round, m);
    }
  }
  stats.historyChecks++;
  for (const m of await checkHistory(store, stream, committed, random, 150)) mismatch(stats.rounds, m);
  stats.committed = committed;
  stats.tempFiles = await countTempFiles(dir);
  return stats;
}

/** The step of the newest checkpoint (0 for a new stream). */
async function latestStep(store, stream) {
  try {
    return (await restore(store, stream)).state.step;
  } catch (err) {
    if (err?.code === 'NOT_FOUND') return 0;
    throw err;
  }
}

/**
 * Checks the whole history: seqs 1..latest, each one's frame verified by listCheckpoints with
 * meta step = seq; restores the newest 10 and `sample` random others and compares each with stateAt.
 */
export async function checkHistory(store, stream, latest, random, sample) {
  const out = [];
  let list;
  try {
    list = await listCheckpoints(store, stream);
  } catch (err) {
    return [`listCheckpoints failed: ${err?.code} ${err?.message}`];
  }
  if (list.length !== latest || list.some((c, i) => c.seq !== i + 1 || c.meta?.step !== c.seq)) {
    out.push(`history: ${list.length} checkpoints, expected seqs 1..${latest} with meta.step = seq`);
  }
  const seqs = new Set();
  for (let s = Math.max(1, latest - 9); s <= latest; s++) seqs.add(s);
  for (let i = 0; i < sample && latest > 0; i++) seqs.add(1 + Math.floor(random() * latest));
  for (const seq of seqs) {
    try {
      const r = await restore(store, stream, { seq });
      const d = difference(r.state, stateAt(seq));
      if (r.seq !== seq || d !== undefined) out.push(`history: seq ${seq} restored as seq ${r.seq}: ${d}`);
    } catch (err) {
      out.push(`history: restore of seq ${seq} failed: ${err?.code} ${err?.message}`);
    }
  }
  return out;
}

async function countTempFiles(dir) {
  let n = 0;
  const visit = async (d) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isDirectory()) await visit(path.join(d, e.name));
      else if (e.name.endsWith('.tmp')) n++;
    }
  };
  await visit(dir);
  return n;
}

/**
 * One round of processes racing on a stream: `writers` children open it and commit up to `steps`
 * checkpoints each. With `barrier`, all of them open before any commits, so that exactly the last
 * opener commits and every other is fenced at its first checkpoint. Checks that no seq was
 * committed twice (no fork), that every new seq was acknowledged by exactly one child and
 * restores to raceStep(its previous seq, that child), and that only fenced children stopped early.
 * Resolves { mismatches, fenced, latest }.
 */
export async function raceRound({
  dir,
  stream = 'agent/race',
  writers = 2,
  steps = 40,
  barrier = false,
  seed = 1,
  round = 0,
  kind = 'file',
}) {
  const random = mulberry32(seed * 977 + round);
  const store = await storeAt(kind, dir);
  const mismatches = [];
  const before = (await listCheckpoints(store, stream)).length;
  const names = Array.from({ length: writers }, (_, i) => `w${round}.${i}`);
  const children = [];
  let opened = 0;
  let released = false;
  const release = () => {
    released = true;
    for (const c of children) c.proc.stdin.end('go\n');
  };
  for (const name of names) {
    if (!barrier) await sleep(Math.floor(random() * 120));
    const c = child(RACE_CHILD, [dir, stream, name, String(steps), barrier ? 'barrier' : ''], {
      stdin: barrier ? 'pipe' : 'ignore',
      kind,
      onLine: (line) => {
        if (barrier && line.startsWith('open ') && ++opened === writers && !released) release();
      },
    });
    children.push(c);
  }
  const exits = await Promise.all(
    children.map(async (c) => {
      const exit = await c.exited;
      if (barrier && !released) release();
      return exit;
    }),
  );
  const results = children.map((c, i) => {
    const r = { name: names[i], openSeq: -1, epoch: -1, acks: [], end: undefined, exit: exits[i], stderr: c.stderr() };
    for (const line of c.lines) {
      const [kind, a, b] = line.split(' ');
      if (kind === 'open') [r.openSeq, r.epoch] = [Number(a), Number(b)];
      else if (kind === 'ack') r.acks.push({ seq: Number(a), n: Number(b) });
      else r.end = line;
    }
    return r;
  });
  for (const r of results) {
    if (r.exit.code !== 0 || (r.end !== 'done' && r.end !== 'fenced')) {
      mismatches.push(
        `${r.name} ended with "${r.end}" (exit ${r.exit.code}${r.exit.timedOut ? ', timed out' : ''}; ${r.stderr.slice(0, 300)})`,
      );
    }
    r.acks.forEach((a, i) => {
      if (a.seq !== r.openSeq + 1 + i)
        mismatches.push(
          `${r.name}: ack ${i} has seq ${a.seq}, expected ${r.openSeq + 1 + i} (another writer slipped in)`,
        );
    });
    // Fenced only when another process opened the stream too. (Not "by a higher epoch": a claim that
    // jumped ahead of a busy writer from an older listing may carry a lower epoch than the engine it fences.)
    if (r.end === 'fenced' && !results.some((o) => o !== r && o.openSeq >= 0))
      mismatches.push(`${r.name} was fenced though no other opener exists`);
  }
  if (barrier) {
    const top = Math.max(...results.map((r) => r.epoch));
    for (const r of results) {
      const winner = r.epoch === top;
      if (winner && (r.end !== 'done' || r.acks.length !== steps))
        mismatches.push(`${r.name}, the last opener, ended "${r.end}" after ${r.acks.length} checkpoints`);
      if (!winner && (r.end !== 'fenced' || r.acks.length !== 0))
        mismatches.push(`${r.name}, fenced by a later opener, ended "${r.end}" after ${r.acks.length} checkpoints`);
    }
  }
  // No fork: every seq committed in this round was acknowledged by exactly one writer.
  const writerOf = new Map();
  for (const r of results) {
    for (const a of r.acks) {
      if (writerOf.has(a.seq))
        mismatches.push(`seq ${a.seq} acknowledged to both ${writerOf.get(a.seq)} and ${r.name} (a fork)`);
      writerOf.set(a.seq, r.name);
    }
  }
  const list = await listCheckpoints(store, stream);
  if (list.some((c, i) => c.seq !== i + 1)) mismatches.push(`committed seqs are not 1..${list.length}`);
  // Fillers close seqs a fenced writer never committed (a claim that jumped ahead of it): no writer
  // acknowledges them, and each equals the seq before it.
  const fillers = new Set(list.filter((c) => c.filler).map((c) => c.seq));
  for (let seq = before + 1; seq <= list.length; seq++)
    if (!writerOf.has(seq) && !fillers.has(seq))
      mismatches.push(`seq ${seq} is committed but no writer acknowledged it`);
  const newFillers = [...fillers].filter((seq) => seq > before).length;
  if (writerOf.size !== list.length - before - newFillers)
    mismatches.push(
      `${writerOf.size} acknowledged checkpoints, ${list.length - before} committed (${newFillers} fillers)`,
    );
  // Every new seq is its writer's step on top of the seq before it: nothing lost, nothing forked.
  let expected = before === 0 ? undefined : (await restore(store, stream, { seq: before })).state;
  for (let seq = before + 1; seq <= list.length; seq++) {
    if (!fillers.has(seq)) expected = raceStep(expected, writerOf.get(seq));
    try {
      const r = await restore(store, stream, { seq });
      const d = difference(r.state, expected);
      if (d !== undefined) mismatches.push(`seq ${seq} by ${writerOf.get(seq)}: ${d}`);
    } catch (err) {
      mismatches.push(`restore of seq ${seq} failed: ${err?.code} ${err?.message}`);
    }
  }
  return { mismatches, fenced: results.filter((r) => r.end === 'fenced').length, latest: list.length, results };
}
