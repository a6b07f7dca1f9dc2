// A fake payment service for the demo, run as its own process on 127.0.0.1. It honours
// idempotency keys as payment APIs do: a second POST /charge with the same Idempotency-Key
// returns the first charge and charges nothing. It prints its port, then serves until killed.
//   POST /charge  {order, amount}  (header Idempotency-Key)  -> {id, order, amount, replayed}
//   GET  /stats                                               -> {requests, charges: [...]}
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';

const charges = new Map();
let requests = 0;

const server = createServer((req, res) => {
  const send = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (req.method === 'GET' && req.url === '/stats') return send(200, { requests, charges: [...charges.values()] });
  if (req.method !== 'POST' || req.url !== '/charge') return send(404, { error: 'not found' });
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => (body += chunk));
  req.on('end', () => {
    requests++;
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || key === '') return send(400, { error: 'Idempotency-Key header required' });
    const existing = charges.get(key);
    if (existing) return send(200, { ...existing, replayed: true });
    const { order, amount } = JSON.parse(body);
    // Ids derive from the key, so an uninterrupted run gets the same ids.
    const charge = { id: `ch_${createHash('sha256').update(key).digest('hex').slice(0, 12)}`, key, order, amount };
    charges.set(key, charge);
    send(201, { ...charge, replayed: false });
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
