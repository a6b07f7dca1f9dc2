// A child process that commits as fast as it can, with up to 3 checkpoints in flight, until it is
// fenced: the writer a takeover must beat. Prints `open <seq>`, then `ack <seq> <n>` for each
// acknowledged checkpoint of state { by: 'old', n }, then `fenced` (exit 0), or `error <code> <message>`.
//   node busy-writer.mjs file <dir> <stream>
//   node busy-writer.mjs sqlite <database file> <stream>
//   node busy-writer.mjs s3 <prefix> <stream>      (STATEFOLD_S3_* variables name the server)
import { FileStore, SnapshotEngine } from 'statefold';

const [kind, where, stream] = process.argv.slice(2);
const say = (line) => process.stdout.write(`${line}\n`);
const MAX_CHECKPOINTS = 50_000;

async function storeFor() {
  if (kind === 'file') return new FileStore({ dir: where });
  if (kind === 'sqlite') {
    const { SqliteStore } = await import('statefold/sqlite');
    return new SqliteStore({ path: where });
  }
  const { S3Store } = await import('statefold/s3');
  const env = process.env;
  return new S3Store({
    bucket: env.STATEFOLD_S3_BUCKET,
    prefix: where,
    endpoint: env.STATEFOLD_S3_ENDPOINT,
    region: env.STATEFOLD_S3_REGION || 'us-east-1',
    ...(env.STATEFOLD_S3_ACCESS_KEY_ID && {
      credentials: { accessKeyId: env.STATEFOLD_S3_ACCESS_KEY_ID, secretAccessKey: env.STATEFOLD_S3_SECRET_ACCESS_KEY },
    }),
  });
}

try {
  const engine = await SnapshotEngine.open({ store: await storeFor(), stream, policy: { baseEvery: 16 } });
  say(`open ${engine.seq}`);
  const inFlight = new Set();
  let fenced = false;
  for (let n = 1; n <= MAX_CHECKPOINTS && !fenced; n++) {
    const state = { by: 'old', n };
    const p = engine.checkpoint(state).then(
      (info) => say(`ack ${info.seq} ${n}`),
      (err) => {
        if (err?.code !== 'FENCED') throw err;
        fenced = true;
      },
    );
    inFlight.add(p);
    p.finally(() => inFlight.delete(p)).catch(() => undefined);
    if (inFlight.size >= 3) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  say(fenced ? 'fenced' : 'done');
  process.exit(0);
} catch (err) {
  say(`error ${err?.code ?? 'unknown'} ${String(err?.message ?? err).replace(/\n/g, ' ')}`);
  process.exit(1);
}
