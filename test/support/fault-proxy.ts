import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { mulberry32 } from './prng.mjs';

/**
 * A fault-injecting HTTP proxy on 127.0.0.1 in front of a real S3-compatible server (Ceph RGW in
 * CI), in the manner of litestream's chaos client but on the wire: the SDK and the server are real,
 * and a seeded fraction of requests meets one of the faults below instead of a clean answer.
 * Requests are forwarded with their Host header untouched, so SigV4 signatures stay valid.
 */
export type ProxyFault =
  /** 503 SlowDown, as S3 answers when throttling. */
  | 'slowdown'
  /** 500 InternalError. */
  | 'internal'
  /** The connection is reset before the request is forwarded. */
  | 'reset'
  /** The request is forwarded after a delay of 50-300 ms. */
  | 'slow'
  /** The request is forwarded and served, then the connection is reset before the answer: it landed, its answer was lost. */
  | 'drop-answer';

/** Every fault, in the order the seeded choice draws from. */
export const PROXY_FAULTS: readonly ProxyFault[] = ['slowdown', 'internal', 'reset', 'slow', 'drop-answer'];

/** Options of FaultProxy.start. */
export interface FaultProxyOptions {
  /** The server to forward to, e.g. http://127.0.0.1:7480. */
  upstream: string;
  /** Fraction of requests that meet a fault (0-1). */
  rate: number;
  /** Seed of the choices (which request, which fault, how slow). */
  seed: number;
  /** The faults drawn from (default all). */
  faults?: readonly ProxyFault[];
}

/** A running proxy: its endpoint for the SDK, and what it did. */
export class FaultProxy {
  /** Requests seen, and faults injected by kind. */
  readonly counts: Record<ProxyFault | 'requests', number> = {
    requests: 0,
    slowdown: 0,
    internal: 0,
    reset: 0,
    slow: 0,
    'drop-answer': 0,
  };
  /** Whether faults are injected (turn off to read back cleanly through the same proxy). */
  enabled = true;
  private constructor(
    readonly server: Server,
    readonly endpoint: string,
    readonly sockets: Set<Socket>,
  ) {}

  /** Starts a proxy on a free loopback port. */
  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const upstream = new URL(options.upstream);
    const random = mulberry32(options.seed);
    const faults = options.faults ?? PROXY_FAULTS;
    let proxy: FaultProxy | undefined;
    const server = createServer((req, res) => {
      const p = proxy!;
      p.counts.requests++;
      const fault = p.enabled && random() < options.rate ? faults[Math.floor(random() * faults.length)]! : undefined;
      const delay = 50 + Math.floor(random() * 250);
      if (fault !== undefined) p.counts[fault]++;
      handle(req, res, upstream, fault, delay);
    });
    const sockets = new Set<Socket>();
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    proxy = new FaultProxy(server, `http://127.0.0.1:${port}`, sockets);
    return proxy;
  }

  /** Faults injected so far, all kinds together. */
  get injected(): number {
    return PROXY_FAULTS.reduce((n, f) => n + this.counts[f], 0);
  }

  /** Stops the proxy and closes every connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function handle(
  req: IncomingMessage,
  res: ServerResponse,
  upstream: URL,
  fault: ProxyFault | undefined,
  delay: number,
): void {
  if (fault === 'reset') {
    req.socket.destroy();
    return;
  }
  if (fault === 'slowdown' || fault === 'internal') {
    // Read the body first, as a server does, then answer with S3's error document.
    req.resume();
    req.on('end', () => {
      const [status, code] = fault === 'slowdown' ? [503, 'SlowDown'] : [500, 'InternalError'];
      const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>injected by the fault proxy</Message><RequestId>fault</RequestId></Error>`;
      res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    return;
  }
  const forward = (): void => {
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        if (fault === 'drop-answer') {
          // Let the server finish (the write has landed), then lose the answer.
          answer.resume();
          answer.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => req.socket.destroy());
    req.pipe(out);
  };
  if (fault === 'slow') setTimeout(forward, delay);
  else forward();
}
