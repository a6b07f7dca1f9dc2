/**
 * A fault-injecting Store wrapper, in the manner of litestream's chaos client: it counts every
 * operation that passes through it and, by rule, fails one before it reaches the inner store,
 * fails one after it landed (an unknown outcome), delays it, holds it to complete out of order,
 * damages what a read returns, or "crashes": from operation N on nothing reaches the inner store.
 *
 *   const faults = new FaultStore(new MemoryStore());
 *   faults.inject({ op: 'putIfAbsent', nth: 2 }, { type: 'fail', landed: true });
 *   faults.crashAt(17);
 *
 * Operations are numbered from 0 in call order (`faults.count` is the next number); `faults.log`
 * records each one. The wrapper never validates keys itself: the inner store does.
 */
import { StatefoldError } from '../errors.js';
import type { ListOptions, Store, StoreOptions } from '../store.js';
import type { Fault, FaultMatch, FaultStoreOptions, Held, OpRecord, Rule, StoreOp } from './faults.js';
import { mulberry32 } from './prng.js';

export type { Fault, FaultMatch, FaultStoreOptions, OpRecord, StoreOp } from './faults.js';

/** A Store that wraps another and injects faults by rule. */
export class FaultStore implements Store {
  readonly inner: Store;
  /** Every operation so far, in call order (empty when the `log` option is false). */
  readonly log: OpRecord[] = [];
  #count = 0;
  #rules: Rule[] = [];
  #held: Held[] = [];
  #crashAt = Infinity;
  #crashLanded = false;
  #crashed = false;
  #random: () => number;
  readonly #keepLog: boolean;

  constructor(inner: Store, options: FaultStoreOptions = {}) {
    this.inner = inner;
    this.#random = mulberry32(options.seed ?? 1);
    this.#keepLog = options.log ?? true;
  }

  /** Number of operations so far: the number the next one gets. */
  get count(): number {
    return this.#count;
  }

  /** Whether the store has crashed (every operation now rejects). */
  get crashed(): boolean {
    return this.#crashed;
  }

  /** Number of held operations not yet released (see the `hold` and `timeout` faults). */
  get held(): number {
    return this.#held.length;
  }

  /**
   * Adds a fault rule. Each rule counts the operations it matches from now on (for `nth`); when
   * several rules apply to one operation, the one added first wins.
   */
  inject(match: FaultMatch, fault: Fault): this {
    this.#rules.push({ match, fault, seen: 0, left: match.times ?? 1 });
    return this;
  }

  /** Fails operation number `index` with STORAGE (after performing it when `landed`). */
  failAt(index: number, options: { landed?: boolean } = {}): this {
    return this.inject({ at: index }, { type: 'fail', landed: options.landed ?? false });
  }

  /**
   * Crashes at operation number `index`: it and every later operation reject with STORAGE without
   * reaching the inner store, as if the process had died there. `landed`: operation `index` itself
   * reaches the inner store first (the process died after the write landed, before it heard back).
   * Held operations are dropped when the crash happens.
   */
  crashAt(index: number, options: { landed?: boolean } = {}): this {
    this.#crashAt = index;
    this.#crashLanded = options.landed ?? false;
    if (index <= this.#count) this.crash();
    return this;
  }

  /** Crashes now (see crashAt). */
  crash(): void {
    if (this.#crashed) return;
    this.#crashed = true;
    this.#crashAt = Math.min(this.#crashAt, this.#count);
    const held = this.#held;
    this.#held = [];
    for (const h of held) h.drop();
  }

  /**
   * Ends a crash: operations reach the inner store again, as when a network partition heals and
   * the process turns out not to have died (a zombie writer). Held operations dropped by the crash stay dropped.
   */
  heal(): this {
    this.#crashed = false;
    this.#crashAt = Infinity;
    return this;
  }

  /** Removes every fault rule (held operations stay held; a crash stays). */
  clearFaults(): this {
    this.#rules = [];
    return this;
  }

  /**
   * Releases held operations: all of them (default), the oldest or the newest, or the one with
   * operation number `which`. Resolves when the released operations have completed on the inner store.
   */
  async release(which: 'all' | 'oldest' | 'newest' | number = 'all'): Promise<void> {
    let chosen: Held[];
    if (which === 'all') chosen = this.#held.splice(0);
    else if (which === 'oldest') chosen = this.#held.splice(0, 1);
    else if (which === 'newest') chosen = this.#held.splice(-1, 1);
    else {
      const at = this.#held.findIndex((h) => h.index === which);
      chosen = at < 0 ? [] : this.#held.splice(at, 1);
    }
    await Promise.all(chosen.map((h) => h.release()));
  }

  /** Operation numbers of the held operations, oldest first. */
  heldOps(): { index: number; op: StoreOp; key: string }[] {
    return this.#held.map(({ index, op, key }) => ({ index, op, key }));
  }

  get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    return this.#run('get', key, () => this.inner.get(key, options));
  }

  putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    // The caller may reuse its buffer once the call returns; a held write must not see that.
    const copy = Uint8Array.prototype.slice.call(body);
    return this.#run('putIfAbsent', key, () => this.inner.putIfAbsent(key, copy, options));
  }

  list(prefix: string, options?: ListOptions): Promise<string[]> {
    return this.#run('list', prefix, () => this.inner.list(prefix, options));
  }

  delete(key: string, options?: StoreOptions): Promise<void> {
    return this.#run('delete', key, () => this.inner.delete(key, options));
  }

  removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    return this.#run('removeLeftovers', prefix, () => this.inner.removeLeftovers(prefix, options));
  }

  async #run<T>(op: StoreOp, key: string, perform: () => Promise<T>): Promise<T> {
    const index = this.#count++;
    const record: OpRecord = { index, op, key, reached: false, outcome: 'pending' };
    if (this.#keepLog) this.log.push(record);
    const reach = (): Promise<T> => {
      record.reached = true;
      return perform();
    };
    try {
      const result = await this.#apply(op, key, index, record, reach);
      record.outcome = 'ok';
      return result;
    } catch (err) {
      record.outcome = 'error';
      throw err;
    }
  }

  async #apply<T>(op: StoreOp, key: string, index: number, record: OpRecord, reach: () => Promise<T>): Promise<T> {
    if (this.#crashed || index >= this.#crashAt) {
      record.fault = 'crash';
      const landed = !this.#crashed && index === this.#crashAt && this.#crashLanded;
      this.crash();
      if (landed) await reach().catch(() => undefined);
      throw this.#error(op, key, index, landed ? 'crashed after the operation landed' : 'crashed');
    }
    const fault = this.#take(op, key, index);
    if (fault === undefined) return reach();
    record.fault = fault.type;
    switch (fault.type) {
      case 'fail':
        if (fault.landed) await reach().catch(() => undefined);
        throw this.#error(
          op,
          key,
          index,
          fault.landed ? 'failed after the operation landed' : 'failed before reaching the store',
        );
      case 'timeout':
        this.#hold(
          op,
          key,
          index,
          async () => {
            await reach().catch(() => undefined);
          },
          () => undefined,
        );
        throw this.#error(op, key, index, 'timed out (the operation is still in flight)');
      case 'hold': {
        if (fault.landed) {
          const settled = await reach().then(
            (value) => ({ ok: true as const, value }),
            (err: unknown) => ({ ok: false as const, err }),
          );
          await this.#wait(op, key, index, 'held after landing');
          if (!settled.ok) throw settled.err;
          return settled.value;
        }
        await this.#wait(op, key, index, 'held');
        if (this.#crashed) throw this.#error(op, key, index, 'crashed while held');
        return reach();
      }
      case 'delay':
        await new Promise((r) => setTimeout(r, typeof fault.ms === 'function' ? fault.ms(index) : fault.ms));
        if (this.#crashed) throw this.#error(op, key, index, 'crashed while delayed');
        return reach();
      case 'corrupt':
      case 'truncate': {
        const result = await reach();
        if (op !== 'get' || !(result instanceof Uint8Array) || result.byteLength === 0) return result;
        return this.#damage(result, fault) as T;
      }
    }
  }

  /** Waits until the operation is released; rejects when a crash drops it. */
  #wait(op: StoreOp, key: string, index: number, why: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#hold(
        op,
        key,
        index,
        async () => resolve(),
        () => reject(this.#error(op, key, index, `${why}, then dropped by a crash`)),
      );
    });
  }

  #hold(op: StoreOp, key: string, index: number, go: () => Promise<void>, drop: () => void): void {
    this.#held.push({
      index,
      op,
      key,
      release: async () => {
        await go();
        // Let the caller's continuation run before release() resolves.
        await new Promise((r) => setImmediate(r));
      },
      drop,
    });
  }

  #take(op: StoreOp, key: string, index: number): Fault | undefined {
    let chosen: Rule | undefined;
    // Every rule counts the operations it matches (for `nth`), whether or not it applies.
    for (const rule of this.#rules) {
      const m = rule.match;
      if (m.at !== undefined && m.at !== index) continue;
      if (m.op !== undefined && (typeof m.op === 'string' ? m.op !== op : !m.op.includes(op))) continue;
      if (m.key !== undefined && !keyMatches(m.key, key)) continue;
      const nth = rule.seen++;
      if (chosen !== undefined || rule.left <= 0 || (m.nth !== undefined && nth !== m.nth)) continue;
      chosen = rule;
    }
    if (chosen === undefined) return undefined;
    chosen.left--;
    return chosen.fault;
  }

  #damage(bytes: Uint8Array, fault: Extract<Fault, { type: 'corrupt' | 'truncate' }>): Uint8Array {
    const n = bytes.byteLength;
    if (fault.type === 'corrupt') {
      const out = Uint8Array.prototype.slice.call(bytes);
      let at = fault.offset ?? Math.floor(this.#random() * n);
      if (at < 0) at += n;
      at = Math.min(Math.max(at, 0), n - 1);
      out[at]! ^= fault.mask ?? 0x01;
      return out;
    }
    let keep = fault.keep ?? Math.floor(this.#random() * n);
    if (keep < 0) keep += n;
    return Uint8Array.prototype.slice.call(bytes, 0, Math.min(Math.max(keep, 0), n));
  }

  #error(op: StoreOp, key: string, index: number, what: string): StatefoldError {
    return new StatefoldError('STORAGE', `${op} ${key}: injected fault at operation ${index}: ${what}`, {
      key,
      cause: new Error(`injected: ${what}`),
    });
  }
}

function keyMatches(pattern: NonNullable<FaultMatch['key']>, key: string): boolean {
  if (typeof pattern === 'string') return pattern === key;
  if (pattern instanceof RegExp) return pattern.test(key);
  return pattern(key);
}
