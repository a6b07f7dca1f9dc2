/** Statistics of killRounds. */
export interface KillStats {
  seed: number;
  kills: number;
  rounds: number;
  restores: number;
  acks: number;
  inFlightLanded: number;
  killedBeforeOpen: number;
  historyChecks: number;
  committed: number;
  tempFiles: number;
  mismatches: string[];
}

/** Kills agent processes at random moments and checks each restore (see kill-harness.mjs). */
export function killRounds(options: {
  dir: string;
  stream?: string;
  kills?: number;
  seconds?: number;
  seed?: number;
  baseEvery?: number;
  log?: (line: string) => void;
  /** The store at `dir`: a FileStore directory (default), a SqliteStore database file, or `<postgres URL>#<table>`. */
  kind?: 'file' | 'sqlite' | 'postgres';
}): Promise<KillStats>;

/** One round of processes racing on a stream (see kill-harness.mjs). */
export function raceRound(options: {
  dir: string;
  stream?: string;
  writers?: number;
  steps?: number;
  barrier?: boolean;
  seed?: number;
  round?: number;
  /** The store at `dir`: a FileStore directory (default), a SqliteStore database file, or `<postgres URL>#<table>`. */
  kind?: 'file' | 'sqlite' | 'postgres';
}): Promise<{
  mismatches: string[];
  fenced: number;
  latest: number;
  results: {
    name: string;
    openSeq: number;
    epoch: number;
    acks: { seq: number; n: number }[];
    end: string | undefined;
  }[];
}>;

export function checkHistory(
  store: unknown,
  stream: string,
  latest: number,
  random: () => number,
  sample: number,
): Promise<string[]>;
