// Deterministic agent states for the process tests (test/crash/kill.test.ts, test/support/soak.mjs):
// a child process checkpoints them, the parent recomputes them to check what was restored.

const WORDS = ['search', 'read', 'summarise', 'call tool', 'reply', 'plan', 'verify', 'ünïcødé ✓'];

/** The agent state after `step` steps (step >= 1); the same for the same step, in any process. */
export function stateAt(step) {
  // Messages grow for 20 steps, then the oldest 20 are dropped (as a summarising agent does).
  const from = Math.max(1, step - 20 - (step % 20));
  const messages = [];
  for (let j = from; j <= step; j++) {
    messages.push({
      role: j % 3 === 0 ? 'tool' : j % 2 ? 'user' : 'assistant',
      content: `step ${j}: ${WORDS[j % WORDS.length]} `.repeat(1 + (j % 5)),
      n: j,
    });
  }
  const memory = {};
  for (let j = Math.max(1, step - 8); j <= step; j++) memory[`k${(j * 7) % 13}`] = j;
  return {
    step,
    messages,
    plan: { cursor: step % 7, steps: ['search', 'read', 'write', 'check'].slice(0, 1 + (step % 4)) },
    memory,
    counters: { tokens: (step * 37) % 10007, calls: step * 2, ratio: step % 11 === 0 ? -0 : step / 7 },
    updatedAt: new Date(1_700_000_000_000 + step * 1000),
    digest: Uint8Array.from({ length: 8 }, (_, i) => (step * 31 + i * 17) & 0xff),
  };
}

/** The state a racing writer `name` commits on top of `prev` (undefined for a new stream). */
export function raceStep(prev, name) {
  const per = { ...(prev?.per ?? {}) };
  per[name] = (per[name] ?? 0) + 1;
  return { n: (prev?.n ?? 0) + 1, by: name, trail: [...(prev?.trail ?? []), name].slice(-16), per };
}

/**
 * Strict structural comparison: Object.is for primitives (so -0 and NaN count), Dates by time,
 * typed arrays by class and bytes, objects by their own keys in any order. Returns the path of
 * the first difference, or undefined when the two are the same.
 */
export function difference(a, b, path = '$') {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return Object.is(a, b) ? undefined : `${path}: ${show(a)} vs ${show(b)}`;
  }
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return `${path}: different types`;
  if (a instanceof Date) return Object.is(a.getTime(), b.getTime()) ? undefined : `${path}: dates differ`;
  if (ArrayBuffer.isView(a)) {
    const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    const y = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
    return x.equals(y) ? undefined : `${path}: bytes differ`;
  }
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return `${path}: keys [${ka}] vs [${kb}]`;
  for (const k of ka) {
    const d = difference(a[k], b[k], `${path}[${JSON.stringify(k)}]`);
    if (d) return d;
  }
  return undefined;
}

function show(v) {
  return typeof v === 'string'
    ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v)
    : Object.is(v, -0)
      ? '-0'
      : String(v);
}
