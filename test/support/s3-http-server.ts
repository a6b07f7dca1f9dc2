import { setTimeout as sleep } from 'node:timers/promises';
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A minimal S3-compatible HTTP server on 127.0.0.1, for behaviours a real server shows but cannot be
 * made to show on demand: ignoring `If-None-Match: *` (as s3rver and fauxqs do), throttling,
 * connection resets, hanging, a lost answer after the write landed. Path-style requests only; it
 * does not check signatures. The SDK talks to it over real HTTP; nothing of the SDK is replaced.
 */
export interface FakeS3Options {
  /** Whether PutObject honours `If-None-Match: *` (default true). */
  conditionalPut?: boolean;
  /** Whether CompleteMultipartUpload honours `If-None-Match: *` (default true). */
  conditionalComplete?: boolean;
  /** Keys per ListObjectsV2 page (default 1,000). */
  pageSize?: number;
  /** Truncated list pages carry no NextContinuationToken (a quirk some servers have). */
  listWithoutToken?: boolean;
  /** DeleteObject of a missing key answers 404 NoSuchKey instead of 204. */
  deleteMissing404?: boolean;
}

/** What the server does with one request matched by a fault rule. */
export type Fault =
  | { kind: 'status'; status: number; code: string }
  /** Closes the connection without an answer. */
  | { kind: 'reset' }
  /** Applies the request, then closes the connection without an answer (the write landed, the answer was lost). */
  | { kind: 'reset-after' }
  /** Never answers. */
  | { kind: 'hang' }
  /** Answers as usual, `ms` milliseconds late. */
  | { kind: 'delay'; ms: number };

/** One request as the server saw it. */
export interface SeenRequest {
  method: string;
  key: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
}

interface Upload {
  key: string;
  parts: Map<number, Buffer>;
}

/** A running fake S3 server; `close()` when done. */
export class FakeS3 {
  readonly objects = new Map<string, Buffer>();
  readonly uploads = new Map<string, Upload>();
  readonly requests: SeenRequest[] = [];
  readonly #faults: { match: (r: SeenRequest) => boolean; fault: Fault; times: number }[] = [];
  readonly #hanging = new Set<ServerResponse>();
  #server!: Server;
  endpoint = '';

  private constructor(readonly options: FakeS3Options) {}

  /** Starts a server on a free loopback port. */
  static async start(options: FakeS3Options = {}): Promise<FakeS3> {
    const fake = new FakeS3(options);
    fake.#server = createServer((req, res) => {
      fake.#handle(req, res).catch((err: unknown) => {
        res.destroy(err instanceof Error ? err : new Error(String(err)));
      });
    });
    await new Promise<void>((resolve) => fake.#server.listen(0, '127.0.0.1', resolve));
    fake.endpoint = `http://127.0.0.1:${(fake.#server.address() as AddressInfo).port}`;
    return fake;
  }

  /** Makes the next `times` requests that `match` fail with `fault`. */
  failNext(match: (r: SeenRequest) => boolean, fault: Fault, times = 1): void {
    this.#faults.push({ match, fault, times });
  }

  /** Requests seen with this method whose key starts with `keyPrefix`. */
  count(method: string, keyPrefix = ''): number {
    return this.requests.filter((r) => r.method === method && r.key.startsWith(keyPrefix)).length;
  }

  async close(): Promise<void> {
    for (const res of this.#hanging) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const [, , ...rest] = url.pathname.split('/');
    const key = decodeURIComponent(rest.join('/'));
    const seen: SeenRequest = { method: req.method ?? '', key, query: url.searchParams, headers: req.headers };
    this.requests.push(seen);
    const body = await readBody(req);
    const rule = this.#faults.find((f) => f.times > 0 && f.match(seen));
    if (rule !== undefined) rule.times--;
    const fault = rule?.fault;
    if (fault?.kind === 'reset') return void res.socket?.destroy();
    if (fault?.kind === 'hang') return void this.#hanging.add(res);
    if (fault?.kind === 'status') return error(res, fault.status, fault.code);
    if (fault?.kind === 'delay') await sleep(fault.ms);
    const answered = this.#apply(seen, body, res);
    if (fault?.kind === 'reset-after') return void res.socket?.destroy();
    answered();
  }

  /** Applies the request to the stored state and returns how to answer it. */
  #apply(r: SeenRequest, body: Buffer, res: ServerResponse): () => void {
    const q = r.query;
    const ifNoneMatch = r.headers['if-none-match'] === '*';
    if (r.method === 'PUT' && q.has('uploadId')) {
      const upload = this.uploads.get(q.get('uploadId')!);
      if (upload === undefined) return () => error(res, 404, 'NoSuchUpload');
      upload.parts.set(Number(q.get('partNumber')), body);
      return () => send(res, 200, '', { ETag: etag(body) });
    }
    if (r.method === 'PUT') {
      if (ifNoneMatch && this.options.conditionalPut !== false && this.objects.has(r.key))
        return () => error(res, 412, 'PreconditionFailed');
      this.objects.set(r.key, body);
      return () => send(res, 200, '', { ETag: etag(body) });
    }
    if (r.method === 'POST' && q.has('uploads')) {
      const id = randomBytes(8).toString('hex');
      this.uploads.set(id, { key: r.key, parts: new Map() });
      return () =>
        xml(
          res,
          `<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>${esc(r.key)}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`,
        );
    }
    if (r.method === 'POST' && q.has('uploadId')) {
      const id = q.get('uploadId')!;
      const upload = this.uploads.get(id);
      if (upload === undefined) return () => error(res, 404, 'NoSuchUpload');
      if (ifNoneMatch && this.options.conditionalComplete !== false && this.objects.has(r.key))
        return () => error(res, 412, 'PreconditionFailed');
      const numbers = [...body.toString().matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((m) => Number(m[1]));
      const joined = Buffer.concat(numbers.map((n) => upload.parts.get(n) ?? Buffer.alloc(0)));
      this.objects.set(r.key, joined);
      this.uploads.delete(id);
      return () =>
        xml(
          res,
          `<CompleteMultipartUploadResult><Bucket>b</Bucket><Key>${esc(r.key)}</Key><ETag>"x-${numbers.length}"</ETag></CompleteMultipartUploadResult>`,
        );
    }
    if (r.method === 'DELETE' && q.has('uploadId')) {
      const existed = this.uploads.delete(q.get('uploadId')!);
      return existed ? () => send(res, 204, '') : () => error(res, 404, 'NoSuchUpload');
    }
    if (r.method === 'DELETE') {
      const existed = this.objects.delete(r.key);
      return !existed && this.options.deleteMissing404 ? () => error(res, 404, 'NoSuchKey') : () => send(res, 204, '');
    }
    if (r.method === 'GET' && q.get('list-type') === '2') return () => this.#list(q, res);
    if (r.method === 'GET' || r.method === 'HEAD') {
      const object = this.objects.get(r.key);
      if (object === undefined) return () => (r.method === 'HEAD' ? send(res, 404, '') : error(res, 404, 'NoSuchKey'));
      return () =>
        send(res, 200, r.method === 'HEAD' ? '' : object, {
          ETag: etag(object),
          'Content-Length': String(object.length),
        });
    }
    return () => error(res, 501, 'NotImplemented');
  }

  #list(q: URLSearchParams, res: ServerResponse): void {
    const prefix = q.get('prefix') ?? '';
    const token = q.get('continuation-token');
    const after = token !== null ? Buffer.from(token, 'base64url').toString() : (q.get('start-after') ?? '');
    const keys = [...this.objects.keys()].filter((k) => k.startsWith(prefix) && k > after).sort();
    const pageSize = Math.min(this.options.pageSize ?? 1000, Number(q.get('max-keys') ?? 1000));
    const page = keys.slice(0, pageSize);
    const truncated = keys.length > page.length;
    const next =
      truncated && !this.options.listWithoutToken
        ? `<NextContinuationToken>${Buffer.from(page.at(-1)!).toString('base64url')}</NextContinuationToken>`
        : '';
    const contents = page
      .map((k) => `<Contents><Key>${esc(k)}</Key><Size>${this.objects.get(k)!.length}</Size></Contents>`)
      .join('');
    xml(
      res,
      `<ListBucketResult><Name>b</Name><Prefix>${esc(prefix)}</Prefix><KeyCount>${page.length}</KeyCount><MaxKeys>${pageSize}</MaxKeys><IsTruncated>${truncated}</IsTruncated>${next}${contents}</ListBucketResult>`,
    );
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function etag(body: Buffer): string {
  return `"${createHash('md5').update(body).digest('hex')}"`;
}

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function send(res: ServerResponse, status: number, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, headers);
  res.end(body);
}

function xml(res: ServerResponse, body: string): void {
  send(res, 200, `<?xml version="1.0" encoding="UTF-8"?>\n${body}`, { 'Content-Type': 'application/xml' });
}

function error(res: ServerResponse, status: number, code: string): void {
  send(
    res,
    status,
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${code} from the test server</Message></Error>`,
    {
      'Content-Type': 'application/xml',
    },
  );
}
