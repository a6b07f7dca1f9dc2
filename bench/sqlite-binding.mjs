// The binding of statefold/sqlite, measured: better-sqlite3 against node:sqlite on one Node (22.13+
// or 24, where node:sqlite exists), the same table, pragmas (WAL, synchronous=FULL) and 20 KB rows,
// on this thread; three rounds in alternating order. `modules` is a node_modules directory holding
// a better-sqlite3 built for that Node (the repository's is built for the Node that installed it).
//   node bench/sqlite-binding.mjs <modules>
import { createRequire } from 'node:module';
import { rmSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
const require = createRequire(path.join(path.resolve(process.argv[2] ?? 'node_modules'), '..', 'x.js'));
const BS3 = require('better-sqlite3');
const { DatabaseSync } = await import('node:sqlite');
const dir = mkdtempSync(path.join(tmpdir(), 'statefold-bench-binding-'));
const SCHEMA = 'CREATE TABLE IF NOT EXISTS o (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, body BLOB NOT NULL)';
function open(kind, file) {
  if (kind === 'bs3') {
    const db = new BS3(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec(SCHEMA);
    return {
      db,
      ins: db.prepare('INSERT INTO o (key, body) VALUES (?, ?) ON CONFLICT (key) DO NOTHING'),
      get: db.prepare('SELECT body FROM o WHERE key = ?').pluck(),
      list: db.prepare('SELECT key FROM o WHERE key >= ? AND key < ? ORDER BY key LIMIT ?').pluck(),
      v: db.prepare('select sqlite_version() v').get().v,
    };
  }
  const db = new DatabaseSync(file);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = FULL');
  db.exec(SCHEMA);
  const g = db.prepare('SELECT body FROM o WHERE key = ?');
  const l = db.prepare('SELECT key FROM o WHERE key >= ? AND key < ? ORDER BY key LIMIT ?');
  return {
    db,
    ins: db.prepare('INSERT INTO o (key, body) VALUES (?, ?) ON CONFLICT (key) DO NOTHING'),
    get: { get: (k) => g.get(k)?.body },
    list: { all: (a, b, n) => l.all(a, b, n).map((r) => r.key) },
    v: db.prepare('select sqlite_version() v').get().v,
  };
}
const body = Buffer.alloc(20 * 1024, 7);
const med = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s[s.length >> 1];
};
function run(kind, round) {
  const file = path.join(dir, `${kind}-${round}.db`);
  const c = open(kind, file);
  const out = {};
  for (const per of [1, 16]) {
    const wall = [];
    const cpu0 = process.cpuUsage();
    const n = per === 1 ? 300 : 60;
    for (let t = 0; t < n; t++) {
      const t0 = process.hrtime.bigint();
      c.db.exec('BEGIN IMMEDIATE');
      for (let j = 0; j < per; j++) c.ins.run(`s/${per}/${t}/${j}`, body);
      c.db.exec('COMMIT');
      wall.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
    const cpu = process.cpuUsage(cpu0);
    out[`tx${per} p50 us`] = med(wall).toFixed(0);
    out[`tx${per} cpu us/tx`] = ((cpu.user + cpu.system) / n).toFixed(0);
  }
  const keys = Array.from({ length: 300 }, (_, t) => `s/1/${t}/0`);
  let w = [];
  let cpu0 = process.cpuUsage();
  for (let r = 0; r < 5; r++)
    for (const k of keys) {
      const t0 = process.hrtime.bigint();
      c.get.get(k);
      w.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
  out['get 20KB p50 us'] = med(w).toFixed(1);
  w = [];
  for (let r = 0; r < 300; r++) {
    const t0 = process.hrtime.bigint();
    c.list.all('s/1/', 's/10', 100);
    w.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  out['list 100 p50 us'] = med(w).toFixed(1);
  c.db.close();
  rmSync(file, { force: true });
  return [c.v, out];
}
const results = { bs3: [], node: [] };
for (let round = 0; round < 3; round++)
  for (const kind of round % 2 ? ['node', 'bs3'] : ['bs3', 'node']) results[kind].push(run(kind, round));
for (const [kind, rs] of Object.entries(results)) {
  console.log(kind, 'sqlite', rs[0][0]);
  for (const key of Object.keys(rs[0][1])) console.log('  ', key.padEnd(18), rs.map((r) => r[1][key]).join(' / '));
}
rmSync(dir, { recursive: true, force: true });
