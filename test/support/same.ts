/**
 * Strict structural equality for restored states: same prototypes, same own keys (a key such as
 * `constructor` or `__proto__` is plain data), Object.is for numbers (so -0 and NaN count),
 * Dates by time, typed arrays by class and bytes. Returns the path of the first difference, or
 * undefined when the two are the same.
 */
export function firstDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return Object.is(a, b) ? undefined : `${path}: ${show(a)} vs ${show(b)}`;
  }
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return `${path}: different types`;
  if (a instanceof Date) return Object.is(a.getTime(), (b as Date).getTime()) ? undefined : `${path}: dates differ`;
  if (ArrayBuffer.isView(a)) {
    const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    const y = Buffer.from((b as Uint8Array).buffer, (b as Uint8Array).byteOffset, (b as Uint8Array).byteLength);
    return x.equals(y) ? undefined : `${path}: bytes differ`;
  }
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return `${path}: keys [${ka}] vs [${kb}]`;
  for (const k of ka) {
    const d = firstDifference(
      (a as Record<string, unknown>)[k],
      (b as Record<string, unknown>)[k],
      `${path}[${JSON.stringify(k)}]`,
    );
    if (d) return d;
  }
  return undefined;
}

function show(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : Object.is(v, -0) ? '-0' : String(v);
}
