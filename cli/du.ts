/**
 * `statefold du`: where a stream's bytes go (sizeReport): the largest paths of a checkpoint's state
 * with their share of it and of what is stored, values held more than once, the stored bytes by
 * kind, and the growth over the last checkpoints.
 */
import { sizeReport, type SizeReport } from '../engine/index.js';
import { enc, existingStream, numberFlag, print, type Command } from './commands.js';

export const DU: Command = {
  usage: 'du <store> <stream> [--seq SEQ] [--limit N] [--last N]',
  params: ['store', 'stream'],
  options: ['seq', 'limit', 'last'],
  help: "Where a stream's bytes go: the N largest paths (default 20) of checkpoint SEQ's state (default the newest), each with its size before compression, its share of the state and its estimated share of the stored bytes; the large values held at more than one path; the retained objects' bytes by kind; and how the state grew over the last N checkpoints (default 20).",
  async run(c) {
    const seq = numberFlag(c, 'seq');
    const top = numberFlag(c, 'limit', 0);
    const last = numberFlag(c, 'last', 0);
    const stream = await existingStream(c);
    const report = await sizeReport(c.store, stream, {
      ...(seq !== undefined && { seq }),
      ...(top !== undefined && { top }),
      ...(last !== undefined && { last }),
      ...enc(c),
    });
    print(c, () => human(report), report);
    return 0;
  },
};

/** Bytes as people read them: 512 B, 1.5 KB, 2.25 MB (1 KB = 1,024 B). */
export function bytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = Math.abs(n);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const shown = u === 0 ? String(v) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return `${n < 0 ? '-' : ''}${shown} ${units[u]}`;
}

const pct = (share: number): string => `${(share * 100).toFixed(1)}%`;

function human(r: SizeReport): string {
  const s = r.stored;
  const lines = [
    `stream ${JSON.stringify(r.stream)} seq ${r.seq}: state ${bytes(r.stateBytes)} (msgpack, before compression)`,
    `stored: ${bytes(s.totalBytes)} in ${s.checkpoints} checkpoints: ${s.bases} bases ${bytes(s.baseBytes)}, ${s.deltas} deltas ${bytes(s.deltaBytes)}; headers (meta, effects, framing) ${bytes(s.headerBytes)} of it`,
    '',
    `${'bytes'.padStart(10)} ${'state'.padStart(6)} ${'stored'.padStart(10)} ${'share'.padStart(6)}  path`,
    ...r.paths.map(
      (p) =>
        `${bytes(p.bytes).padStart(10)} ${pct(p.ofState).padStart(6)} ${bytes(p.stored).padStart(10)} ${pct(p.ofStored).padStart(6)}  ${p.path}`,
    ),
  ];
  if (r.repeated.length > 0) {
    lines.push('', 'held more than once:');
    for (const v of r.repeated)
      lines.push(`  ${bytes(v.bytes)} x ${v.copies} (${bytes(v.extra)} extra): ${v.paths.join(', ')}`);
  }
  if (r.growth.length > 0) {
    lines.push(
      '',
      `${'seq'.padStart(8)}  kind  ${'object'.padStart(10)} ${'state'.padStart(10)} ${'growth'.padStart(10)}  grew most`,
    );
    for (const g of r.growth)
      lines.push(
        `${String(g.seq).padStart(8)}  ${g.kind.padEnd(5)} ${bytes(g.bytes).padStart(10)} ${bytes(g.stateBytes).padStart(10)} ${bytes(g.growth).padStart(10)}  ${g.grew.map((x) => `${x.path} ${bytes(x.bytes)}`).join(', ')}`,
      );
  }
  return lines.join('\n');
}
