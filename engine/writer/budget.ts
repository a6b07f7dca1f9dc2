/**
 * Budgets (policy.budget): a ceiling on the state's size and on one checkpoint's stored bytes,
 * checked as each checkpoint is encoded, before anything is written. Over it, `reject` fails that
 * checkpoint (BUDGET_EXCEEDED: nothing is written, the next commit is a base) and `warn` tells
 * `onWarning` (default: process.emitWarning) once, until the size is back under.
 *
 * The state is not sized at every checkpoint: an upper bound (the last size measured plus every
 * byte the operations since added) is kept, and the state is walked (format/sizes.ts) only when
 * the bound passes the ceiling, so a state well under it costs the operations' sizes alone.
 */
import { StatefoldError } from '../errors.js';
import { OP_APPEND, OP_REMOVE, type Op } from '../format/ops.js';
import { largestOps, sizeOf, walkSizes, type PathSize } from '../format/sizes.js';
import type { BudgetExceeded, ResolvedBudget } from '../policy.js';

/** Per-op slack beyond the value and its pointer (which holds the key added): a string or container header growing (a map of 15 keys taking a 16th). */
const SLACK = 8;

export class BudgetCheck {
  /** An upper bound on the state's size as of the last capture seen, or undefined when unknown. */
  #bound: number | undefined;
  /** Over a ceiling at the last check (warn: said once until back under). */
  #over = { maxStateBytes: false, maxCheckpointBytes: false };

  constructor(
    private readonly budget: ResolvedBudget,
    private readonly stream: string,
  ) {}

  /** Moves the bound past a capture (every capture, in order, whether it commits or not). */
  observe(ops: readonly Op[]): void {
    if (this.budget.maxStateBytes === Infinity) return;
    for (const op of ops) {
      if (this.#bound === undefined) return;
      if (op[0] === OP_REMOVE) continue;
      const grows = growthBound(op);
      this.#bound = grows === undefined ? undefined : this.#bound + grows;
    }
  }

  /** Checks the state of a capture about to be encoded for `seq`: BUDGET_EXCEEDED (`reject`) or a warning when over `maxStateBytes`. */
  checkState(seq: number, state: unknown, ops: readonly Op[]): void {
    const { maxStateBytes } = this.budget;
    if (maxStateBytes === Infinity || (this.#bound !== undefined && this.#bound <= maxStateBytes)) return;
    const walked = walkSizes(state, { top: 3, repeatMin: Infinity });
    this.#bound = walked.bytes;
    this.#judge('maxStateBytes', seq, walked.bytes, maxStateBytes, ops, walked.top);
  }

  /** Checks the object a capture was encoded as: BUDGET_EXCEEDED (`reject`) or a warning when over `maxCheckpointBytes`. */
  checkObject(seq: number, ops: readonly Op[], frameBytes: number): void {
    const { maxCheckpointBytes } = this.budget;
    if (maxCheckpointBytes !== Infinity)
      this.#judge('maxCheckpointBytes', seq, frameBytes, maxCheckpointBytes, ops, []);
  }

  #judge(
    limit: BudgetExceeded['limit'],
    seq: number,
    bytes: number,
    max: number,
    ops: readonly Op[],
    largest: PathSize[],
  ): void {
    const over = bytes > max;
    const was = this.#over[limit];
    this.#over[limit] = over;
    if (!over || (this.budget.onExceed === 'warn' && was)) return;
    const grew = largestOps(ops, 3);
    const list = (paths: PathSize[]) =>
      paths.map((p) => `${p.path === '' ? '(the root)' : p.path} (${p.bytes} B)`).join(', ');
    const what = limit === 'maxStateBytes' ? 'the state' : 'the checkpoint';
    const message =
      `stream ${JSON.stringify(this.stream)} seq ${seq}: ${what} is ${bytes} bytes, over policy.budget.${limit} ${max}` +
      `${grew.length > 0 ? `; grew most since the previous checkpoint: ${list(grew)}` : ''}` +
      `${largest.length > 0 ? `; largest: ${list(largest)}` : ''}`;
    const exceeded: BudgetExceeded = { stream: this.stream, seq, limit, bytes, max, grew, largest, message };
    if (this.budget.onExceed === 'reject') {
      this.#over[limit] = false; // (nothing was written: the next checkpoint is judged afresh)
      throw new StatefoldError('BUDGET_EXCEEDED', `checkpoint ${message}`, { stream: this.stream, seq });
    }
    this.budget.onWarning(exceeded);
  }
}

/**
 * At most how many bytes `op` (an add, replace or append) can add to the state's stored size, or
 * undefined when it can change how something already there is stored (then the state is walked):
 * a string made or unmade well-formed is stored as UTF-16 or UTF-8 (values.ts), and an object
 * taking a `__proto__` key or one with a lone surrogate is stored as entries, a byte more per key.
 */
function growthBound(op: Op): number | undefined {
  const pointer = op[1];
  const value = op[2];
  if (op[0] === OP_APPEND) {
    if (typeof value !== 'string' || !value.isWellFormed() || startsLow(value)) return undefined;
    // (The string may already be stored as UTF-16: 2 bytes a code unit, where UTF-8 takes 1 to 3.)
    return Math.max(Buffer.byteLength(value), 2 * value.length) + Buffer.byteLength(pointer) + SLACK;
  }
  const key = pointer.slice(pointer.lastIndexOf('/') + 1);
  if (key === '__proto__' || !key.isWellFormed()) return undefined;
  return sizeOf(value) + Buffer.byteLength(pointer) + SLACK;
}

/** Whether `s` starts with a low surrogate: appended to a string ending in a high one, it completes a pair. */
function startsLow(s: string): boolean {
  const c = s.charCodeAt(0);
  return c >= 0xdc00 && c <= 0xdfff;
}
