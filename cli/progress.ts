/** The CLI's progress bars, for the commands that walk a whole stream or store. */
import cliProgress from 'cli-progress';

/** A progress bar on stderr when it is a terminal (never in pipes, files or CI logs). */
export function progressBar(label: string, unit = ''): { update(done: number, total: number): void; stop(): void } {
  if (!process.stderr.isTTY) return { update: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: `${label} [{bar}] {value}/{total}${unit && ` ${unit}`}`,
      hideCursor: true,
      clearOnComplete: true,
    },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    update(done, total) {
      if (!started) bar.start(total, 0);
      started = true;
      bar.setTotal(total);
      bar.update(done);
    },
    stop: () => started && bar.stop(),
  };
}
