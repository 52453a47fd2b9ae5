// The plumbing of a local provider fake: an HTTP server on loopback that records every request and can
// be scripted to fail on demand (a status and body, a delay, an unreadable answer) per route, before the
// fake's own handling. The fakes of fal, Replicate and Vertex AI build on it (the ElevenLabs fake, an
// Express app, shares its listening and closing); what they answer is theirs.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { projectPath } from '../../src/paths.js';

/** The video a fake's finished job delivers: a real MP4 of the simulator's assets. */
export const FAKE_OUTPUT_VIDEO = fs.readFileSync(projectPath('assets', 'sim-video', '16x9-4s.mp4'));

export interface RecordedRequest<R extends string> {
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  /** The parsed JSON body, or undefined when it was empty or not JSON. */
  json: unknown;
  route: R | 'unknown';
}

export interface Fault<R extends string> {
  route: R;
  /** Answer with this status (default 200) and body (object -> JSON, string -> as is, e.g. not JSON at all). */
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Wait this long before answering (longer than the client's timeout = a timeout). */
  delay_ms?: number;
  /** How many requests it applies to (default 1). */
  times?: number;
}

export interface FakeRequest<R extends string> {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  url: URL;
  recorded: RecordedRequest<R>;
}

/** Listens on a free loopback port; answers the server's base URL. */
export async function listenOnLoopback(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes a server now, the connections clients keep alive included. */
export async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

export abstract class FakeHttpServer<R extends string> {
  readonly requests: RecordedRequest<R>[] = [];
  url = '';
  private faults: Fault<R>[] = [];
  private server: http.Server | undefined;

  /** Which route a request is (`unknown`: answered 404 by `notFound`). */
  protected abstract routeOf(method: string, url: URL): R | 'unknown';
  protected abstract serve(r: FakeRequest<R>): Promise<void> | void;
  protected abstract notFound(r: FakeRequest<R>): void;
  /** The Content-Type of JSON answers, scripted failures included, as the provider sends it. */
  protected jsonContentType = 'application/json';

  /** The answer when the fake itself throws, in the provider's error shape. */
  protected fakeFailed(res: http.ServerResponse, err: Error): void {
    this.json(res, 500, { detail: `fake failed: ${err.message}` });
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err) => {
        if (!res.headersSent) this.fakeFailed(res, err as Error);
      });
    });
    this.url = await listenOnLoopback(this.server);
    return this;
  }

  async stop(): Promise<void> {
    if (this.server) await closeServer(this.server);
  }

  /** Scripts failures, consumed in order per route. */
  fault(...faults: Fault<R>[]): void {
    this.faults.push(...faults.map((f) => ({ ...f, times: f.times ?? 1 })));
  }

  /** Forgets the recorded requests and the scripted failures. */
  protected resetHttp(): void {
    this.requests.length = 0;
    this.faults = [];
  }

  requestsTo(route: R): RecordedRequest<R>[] {
    return this.requests.filter((r) => r.route === route);
  }

  json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': this.jsonContentType, ...headers });
    res.end(JSON.stringify(body));
  }

  /** Answers the output video's bytes, as a provider's file URL serves them. */
  protected sendVideo(res: http.ServerResponse): void {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(FAKE_OUTPUT_VIDEO.length) });
    res.end(FAKE_OUTPUT_VIDEO);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    let json: unknown;
    try {
      json = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      json = undefined;
    }
    const url = new URL(req.url ?? '/', 'http://fake');
    const route = this.routeOf(req.method ?? '', url);
    const recorded: RecordedRequest<R> = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw, json, route };
    this.requests.push(recorded);
    if (route === 'unknown') return this.notFound({ req, res, url, recorded });
    const fault = this.faults.find((f) => f.route === route && (f.times ?? 0) > 0);
    if (fault) {
      fault.times = (fault.times ?? 1) - 1;
      if (fault.delay_ms) {
        const closed = await new Promise<boolean>((resolve) => {
          const t = setTimeout(() => resolve(false), fault.delay_ms);
          res.on('close', () => {
            clearTimeout(t);
            resolve(true);
          });
        });
        if (closed) return;
      }
      if (fault.status !== undefined || fault.body !== undefined) {
        res.writeHead(fault.status ?? 200, { 'content-type': this.jsonContentType, ...fault.headers });
        res.end(typeof fault.body === 'string' ? fault.body : JSON.stringify(fault.body ?? {}));
        return;
      }
    }
    await this.serve({ req, res, url, recorded });
  }
}

/** One input field a provider documents: its type, and the values it takes when they are few. */
export interface FieldSpec {
  type: 'string' | 'integer' | 'number' | 'boolean' | 'uri';
  required?: boolean;
  values?: readonly (string | number)[];
}

/**
 * Checks a model's input against its documented fields, the way both aggregators' models do (pydantic /
 * Cog): a missing required field or a wrong type or value is refused; fields the model does not
 * document are ignored. Images (`uri`) must be data: URIs of an image or http(s) URLs. Returns the
 * problems as [field, message].
 */
export function checkInput(input: unknown, fields: Readonly<Record<string, FieldSpec>>): [string, string][] {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return [['input', 'must be an object']];
  const given = input as Record<string, unknown>;
  const problems: [string, string][] = [];
  for (const [name, spec] of Object.entries(fields)) {
    const v = given[name];
    if (v === undefined || v === null) {
      if (spec.required) problems.push([name, 'field required']);
      continue;
    }
    const typeOk =
      spec.type === 'string'
        ? typeof v === 'string'
        : spec.type === 'integer'
          ? Number.isInteger(v)
          : spec.type === 'number'
            ? typeof v === 'number'
            : spec.type === 'boolean'
              ? typeof v === 'boolean'
              : typeof v === 'string' && (/^data:image\/(png|jpeg|webp);base64,[A-Za-z0-9+/]+=*$/.test(v) || /^https?:\/\//.test(v));
    if (!typeOk) problems.push([name, spec.type === 'uri' ? 'must be an image URL or data: URI' : `must be of type ${spec.type}`]);
    else if (spec.values && !spec.values.includes(v as string | number))
      problems.push([name, `must be one of ${spec.values.map((x) => JSON.stringify(x)).join(', ')}`]);
  }
  if (typeof given['prompt'] === 'string' && given['prompt'].trim() === '' && fields['prompt']?.required)
    problems.push(['prompt', 'must not be empty']);
  return problems;
}

/** Posts a callback as a provider does; answers the receiver's status (0 when it could not be reached). */
export async function deliverCallback(url: string, headers: Record<string, string>, body: Buffer): Promise<number> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: new Uint8Array(body),
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer().catch(() => {});
    return res.status;
  } catch {
    return 0;
  }
}
