import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a real server (PostgreSQL in the tests) that drops one
 * connection at a chosen point of one request, on the wire: the driver and the server are real.
 * Armed with a marker (bytes of the request, e.g. the SQL text in its Parse message), it acts on
 * the first client chunk that holds it:
 * - 'before-send': the connection is closed and the chunk never reaches the server (not landed);
 * - 'drop-answer': the chunk (and what follows it) is forwarded and served, then the connection is
 *   closed at the server's first answer, which never reaches the client (landed, answer lost);
 * - 'half-open': as 'drop-answer', but only the client's side is closed: the server's side stays
 *   open, as after a network failure nobody noticed, and its backend lives on, idle;
 * - 'late': the client's side is closed at once, and the chunk reaches the server's side (kept
 *   open) 300 ms later, as a request delayed in the network arrives after the client gave up;
 * - 'silent': the chunk is forwarded and served, and from then on nothing the server sends reaches
 *   the client, both sides kept open: a peer gone without a reset, which only a timeout finds out.
 */
export type DropPoint = 'before-send' | 'drop-answer' | 'half-open' | 'late' | 'silent';

export class TcpFaultProxy {
  /** Connections dropped so far. */
  dropped = 0;
  #armed: { marker: Buffer; point: DropPoint } | undefined;
  readonly #pairs = new Set<[Socket, Socket]>();

  private constructor(
    readonly server: Server,
    readonly port: number,
  ) {}

  static async start(upstreamPort: number, upstreamHost = '127.0.0.1'): Promise<TcpFaultProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new TcpFaultProxy(server, (server.address() as AddressInfo).port);
    server.on('connection', (client) => proxy.#pipe(client, upstreamPort, upstreamHost));
    return proxy;
  }

  /** Drops the connection that next sends `marker`, at `point`. */
  arm(marker: string, point: DropPoint): void {
    this.#armed = { marker: Buffer.from(marker), point };
  }

  get armed(): boolean {
    return this.#armed !== undefined;
  }

  #pipe(client: Socket, port: number, host: string): void {
    const upstream = createConnection({ port, host });
    const pair: [Socket, Socket] = [client, upstream];
    this.#pairs.add(pair);
    let dropAt: DropPoint | undefined;
    /** Set when the client's side was closed on purpose and the server's side is to stay open. */
    let detached = false;
    /** Set by 'silent': the server's answers are swallowed. */
    let silent = false;
    const drop = (keepUpstream: boolean): void => {
      this.dropped++;
      detached = keepUpstream;
      client.destroy();
      if (!keepUpstream) upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      const armed = this.#armed;
      if (armed !== undefined && chunk.includes(armed.marker)) {
        this.#armed = undefined;
        if (armed.point === 'before-send') return drop(false);
        if (armed.point === 'late') {
          drop(true);
          setTimeout(() => upstream.write(chunk), 300);
          return;
        }
        if (armed.point === 'silent') {
          this.dropped++;
          silent = true;
        } else dropAt = armed.point;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (detached || silent) return;
      if (dropAt !== undefined) return drop(dropAt === 'half-open');
      client.write(chunk);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      this.#pairs.delete(pair);
    };
    client.on('close', () => {
      if (!detached) end();
    });
    upstream.on('close', end);
    client.on('error', () => {
      if (!detached) end();
    });
    upstream.on('error', end);
  }

  async close(): Promise<void> {
    for (const [a, b] of this.#pairs) {
      a.destroy();
      b.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
