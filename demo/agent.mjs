// The demo's agent: processes orders step by step (receive, validate, charge, ship, notify),
// checkpointing through statefold and paying through the payment service with the effect's
// token as the idempotency key. Everything it does derives from (seed, step), so a run that is
// killed and resumed must end in exactly the state of an uninterrupted one.
//   node agent.mjs <storeSpec> <stream> <seed> <orders> <paymentPort>
// storeSpec: a SQLite database file (ending .db), s3:<prefix>, or a directory (FileStore).
// Prints "open <seq> <ms>" when resumed, "ack <seq>" per committed checkpoint, "done <seq>" at the end.
import { FileStore, SnapshotEngine } from 'statefold';

const [storeSpec, stream, seedArg, ordersArg, port] = process.argv.slice(2);
const seed = Number(seedArg);
const ORDERS = Number(ordersArg);
const PHASES = ['receive', 'validate', 'charge', 'ship', 'notify'];
const TOTAL = ORDERS * PHASES.length;

function rng(n) {
  let a = (seed * 2654435761 + n * 40503) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function openStore() {
  if (storeSpec.startsWith('s3:')) {
    const { S3Store } = await import('statefold/s3');
    return new S3Store({
      bucket: process.env.STATEFOLD_S3_BUCKET,
      prefix: storeSpec.slice(3),
      endpoint: process.env.STATEFOLD_S3_ENDPOINT,
      region: process.env.STATEFOLD_S3_REGION ?? 'us-east-1',
      forcePathStyle: true,
      credentials: {
        accessKeyId: process.env.STATEFOLD_S3_ACCESS_KEY_ID,
        secretAccessKey: process.env.STATEFOLD_S3_SECRET_ACCESS_KEY,
      },
    });
  }
  if (storeSpec.endsWith('.db')) {
    const { SqliteStore } = await import('statefold/sqlite');
    return new SqliteStore({ path: storeSpec });
  }
  return new FileStore({ dir: storeSpec });
}

async function charge(token, order, amount) {
  const res = await fetch(`http://127.0.0.1:${port}/charge`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': token },
    body: JSON.stringify({ order, amount }),
    signal: AbortSignal.timeout(10_000),
  });
  if (!res.ok) throw new Error(`payment service answered ${res.status}`);
  const { id, amount: charged } = await res.json();
  return { id, amount: charged };
}

/** Busy work standing in for the model call and tool work of one step. */
function think(ms) {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) x += Math.sqrt(x + 1);
  return x;
}

const store = await openStore();
// Resume time: claiming the stream and restoring its last checkpoint (not loading the SDK).
const started = performance.now();
const engine = await SnapshotEngine.open({
  store,
  stream,
  policy: { baseEvery: 32, everySteps: 3 },
  onPendingEffect: 'retry',
});
process.stdout.write(`open ${engine.seq} ${(performance.now() - started).toFixed(1)}\n`);

const state = engine.state ?? {
  step: 0,
  orders: {},
  messages: [{ role: 'system', text: 'You process orders: receive, validate, charge, ship, notify.' }],
  plan: { current: null, remaining: ORDERS },
  memory: { embedding: new Float32Array(64) },
  counters: { toolCalls: 0, charged: 0, revenue: 0 },
};

while (state.step < TOTAL) {
  const k = state.step;
  const r = rng(k);
  const orderNo = Math.floor(k / PHASES.length);
  const id = `order-${String(orderNo).padStart(4, '0')}`;
  const phase = PHASES[k % PHASES.length];
  think(1 + r() * 3);
  if (phase === 'receive') {
    const items = Array.from({ length: 1 + Math.floor(r() * 4) }, (_, i) => ({
      sku: `sku-${Math.floor(r() * 1000)}`,
      qty: 1 + i,
      price: Math.round(r() * 5000) / 100,
    }));
    state.orders[id] = {
      id,
      customer: `customer-${Math.floor(r() * 300)}`,
      items,
      total: Math.round(items.reduce((s, it) => s + it.qty * it.price, 0) * 100) / 100,
      status: 'received',
    };
    state.plan.current = id;
    state.messages.push({ role: 'user', text: `New order ${id} with ${items.length} item(s).` });
  } else if (phase === 'validate') {
    state.orders[id].status = 'validated';
    state.messages.push({
      role: 'assistant',
      text: `Validated ${id}.`,
      toolCall: { name: 'check_stock', args: { id } },
    });
    state.counters.toolCalls++;
  } else if (phase === 'charge') {
    const order = state.orders[id];
    // The token names the order: the same charge on every resume, so it is made once.
    const receipt = await engine.effect(`charge:${id}`, (token) => charge(token, id, order.total), { state });
    order.status = 'paid';
    order.chargeId = receipt.id;
    state.counters.charged++;
    state.counters.revenue = Math.round((state.counters.revenue + receipt.amount) * 100) / 100;
    state.messages.push({ role: 'tool', text: `Charged ${receipt.amount} for ${id} (${receipt.id}).` });
  } else if (phase === 'ship') {
    state.orders[id].status = 'shipped';
    state.orders[id].tracking = `trk-${Math.floor(r() * 1e9)}`;
    state.memory.embedding[orderNo % 64] = r();
  } else {
    state.orders[id].status = 'notified';
    state.plan.remaining = ORDERS - orderNo - 1;
    state.messages.push({ role: 'assistant', text: `Told ${state.orders[id].customer} that ${id} shipped.` });
  }
  state.step++;
  const pending = engine.step(state);
  if (pending)
    pending.then(
      (info) => process.stdout.write(`ack ${info.seq}\n`),
      () => undefined,
    );
}
await engine.close();
await store.close?.();
process.stdout.write(`done ${engine.seq}\n`);
