import type { ListOptions, Store, StoreOptions } from 'statefold';

/** The operations of a Store. */
export type StoreOp = 'get' | 'putIfAbsent' | 'list' | 'delete' | 'removeLeftovers';

/**
 * A store that runs a hook before each operation reaches the inner store (so a test can act
 * between two operations of another caller, hold, delay, count or fail them), can answer in the
 * inner store's place (a misbehaving store), and sees each result. Subclasses override `before`
 * and `after`; plain uses pass a hook.
 */
export class HookStore implements Store {
  constructor(
    readonly inner: Store,
    readonly hook?: (op: StoreOp, key: string) => Promise<void> | void,
    /** Answers to give instead of the inner store's. */
    readonly answers: { get?: () => unknown; putIfAbsent?: () => unknown; list?: () => unknown } = {},
  ) {}

  /** Runs before an operation reaches the inner store; a throw fails the operation. */
  protected before(op: StoreOp, key: string): Promise<void> | void {
    return this.hook?.(op, key);
  }

  /** Sees what an operation answered. */
  protected after(_op: StoreOp, _key: string, _result: unknown): void {}

  async get(key: string, options?: StoreOptions): Promise<Uint8Array | undefined> {
    await this.before('get', key);
    const result = this.answers.get ? (this.answers.get() as Uint8Array) : await this.inner.get(key, options);
    this.after('get', key, result);
    return result;
  }

  async putIfAbsent(key: string, body: Uint8Array, options?: StoreOptions): Promise<boolean> {
    await this.before('putIfAbsent', key);
    const result = this.answers.putIfAbsent
      ? (this.answers.putIfAbsent() as boolean)
      : await this.inner.putIfAbsent(key, body, options);
    this.after('putIfAbsent', key, result);
    return result;
  }

  async list(prefix: string, options?: ListOptions): Promise<string[]> {
    await this.before('list', prefix);
    const result = this.answers.list ? (this.answers.list() as string[]) : await this.inner.list(prefix, options);
    this.after('list', prefix, result);
    return result;
  }

  async delete(key: string, options?: StoreOptions): Promise<void> {
    await this.before('delete', key);
    await this.inner.delete(key, options);
    this.after('delete', key, undefined);
  }

  async removeLeftovers(prefix: string, options?: StoreOptions): Promise<void> {
    await this.before('removeLeftovers', prefix);
    await this.inner.removeLeftovers(prefix, options);
    this.after('removeLeftovers', prefix, undefined);
  }
}

/** A promise and the function that resolves it: a gate a test opens when it chooses. */
export function latch(): { p: Promise<void>; open: () => void } {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

/** A store that holds the first call matching `when` until `release`; `reached` resolves when it is held. */
export function holdOnce(
  inner: Store,
  when: (op: StoreOp, key: string) => boolean,
): { store: HookStore; reached: Promise<void>; release: () => void } {
  const reached = latch();
  const gate = latch();
  let held = false;
  const store = new HookStore(inner, async (op, key) => {
    if (!held && when(op, key)) {
      held = true;
      reached.open();
      await gate.p;
    }
  });
  return { store, reached: reached.p, release: gate.open };
}
