// The soak's HTTP client: every request to the service goes through here, on loopback, with a deadline,
// and is recorded in the request log under its route (the path's template, not its ids).
import type { Outcome, RequestLog } from './report.js';

export interface Answer {
  status: Outcome;
  headers: Headers | null;
  /** Parsed JSON when the answer is JSON, else its text; null without an answer. */
  body: any;
}

export interface RequestSpec {
  method: string;
  /** The route it is counted under, e.g. `GET /v2/videos/generations/{id}`. */
  route: string;
  path: string;
  token?: string;
  json?: unknown;
  /** A raw body (then `headers` says its content type). */
  raw?: string | Buffer | FormData;
  headers?: Record<string, string>;
  timeout_ms?: number;
}

const DEFAULT_TIMEOUT_MS = 45_000;

export class Client {
  private next = 0;

  constructor(
    /** The API processes' base URLs; requests go round robin, to a process that is down as well. */
    private readonly bases: readonly string[],
    private readonly log: RequestLog,
  ) {}

  base(): string {
    const b = this.bases[this.next % this.bases.length]!;
    this.next++;
    return b;
  }

  async send(spec: RequestSpec): Promise<Answer> {
    const headers: Record<string, string> = { ...spec.headers };
    if (spec.token) headers['authorization'] = `Bearer ${spec.token}`;
    let body: string | Buffer | FormData | undefined = spec.raw;
    if (spec.json !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = JSON.stringify(spec.json);
    }
    const url = this.base() + spec.path;
    if (!url.startsWith('http://127.0.0.1:')) throw new Error(`soak traffic is loopback only: ${url}`);
    const started = performance.now();
    try {
      const res = await fetch(url, {
        method: spec.method,
        headers,
        body: body as BodyInit | undefined,
        signal: AbortSignal.timeout(spec.timeout_ms ?? DEFAULT_TIMEOUT_MS),
        redirect: 'manual',
      });
      const buf = Buffer.from(await res.arrayBuffer());
      const latency_ms = performance.now() - started;
      const text = (res.headers.get('content-type') ?? '').startsWith('audio/') ? '' : buf.toString('utf8');
      let parsed: unknown = text;
      if ((res.headers.get('content-type') ?? '').includes('application/json')) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = text;
        }
      }
      this.log.record(spec.route, res.status, latency_ms, text);
      return { status: res.status, headers: res.headers, body: parsed };
    } catch {
      // Refused, reset or timed out: the process is down (chaos) or did not answer in time.
      this.log.record(spec.route, 'no_answer', performance.now() - started);
      return { status: 'no_answer', headers: null, body: null };
    }
  }

  /**
   * Sends until it is answered 2xx (through outages, 503s and 429s), at most `tries` times, waiting
   * between tries (the Retry-After it was given, capped). Returns the last answer.
   */
  async sendUntilOk(spec: RequestSpec, tries = 60, wait_ms = 1_000): Promise<Answer> {
    let a: Answer = { status: 'no_answer', headers: null, body: null };
    for (let i = 0; i < tries; i++) {
      a = await this.send(spec);
      if (typeof a.status === 'number' && a.status >= 200 && a.status < 300) return a;
      if (typeof a.status === 'number' && a.status >= 400 && a.status < 500 && a.status !== 429) return a;
      await sleep(retryAfterMs(a, wait_ms));
    }
    return a;
  }
}

/** The answer's Retry-After in ms (capped at 10 s), else `fallback_ms`. */
export function retryAfterMs(a: Answer, fallback_ms: number): number {
  const s = Number(a.headers?.get('retry-after'));
  return Number.isFinite(s) && s > 0 ? Math.min(s * 1000, 10_000) : fallback_ms;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export const isOk = (a: Answer) => typeof a.status === 'number' && a.status >= 200 && a.status < 300;

/** Euros as the API presents them (JSON numbers) to integer micro-euros. */
export const microOf = (euros: number) => Math.round(euros * 1e6);
