// The callback abuse actor: what anyone without a key can send to the provider callback routes, mixed
// into the soak's load. Each step is one of: a gzip bomb (about 22 KiB inflating to 22 MiB, with
// well-formed signature headers), a small flood of unsigned bodies sent at once, or a captured valid
// delivery (signed by the fakes' keys, as fal and Replicate sign them) replayed several times against
// one of the soak's jobs. Every answer must be one the route documents for it (a refusal before the
// body is read for the first two, an acknowledgement that changes nothing for the replay; 429 and 503
// from its limits, and no answer while a process is down, are always allowed); the money check of the
// soak then shows that none of it changed a balance.
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { FalFake } from '../test/fakes/fal-fake.js';
import type { ReplicateFake } from '../test/fakes/replicate-fake.js';
import type { Client, Answer } from './client.js';
import { RequestLog, type Outcome } from './report.js';
import type { Rng } from './rng.js';

export type CallbackAbuseKind = 'gzip bomb' | 'unsigned flood' | 'replay';
const KINDS: readonly CallbackAbuseKind[] = ['gzip bomb', 'unsigned flood', 'replay'];
const BOMB = gzipSync(Buffer.alloc(22 * 1024 * 1024), { level: 9 });
const UNSIGNED_BODY = Buffer.alloc(256 * 1024, 0x20);
/** Requests of one unsigned flood, sent at once, and how often a captured delivery is replayed in a step. */
const FLOOD_REQUESTS = 8;
const REPLAYS = 4;
/** A captured delivery is signed again after this (the providers' tolerance is 5 minutes). */
const CAPTURE_AGE_MS_MAX = 120_000;

/** What each kind may be answered (besides 429, 503 and no answer). */
const EXPECTED: Record<CallbackAbuseKind, readonly number[]> = { 'gzip bomb': [415], 'unsigned flood': [401], replay: [200] };

export interface CallbackAbuseFindings {
  /** The answers by kind of abuse (its own log: each request is also in the main one). */
  byKind: RequestLog;
  sent: number;
  /** Answers the route does not document for what was sent. */
  unexpected: string[];
}

export class CallbackAbuse {
  private captured: { backend: 'fal' | 'replicate'; headers: Record<string, string>; body: Buffer; at_ms: number }[] = [];

  constructor(
    private readonly client: Client,
    private readonly rng: Rng,
    private readonly fakes: { fal: FalFake; replicate: ReplicateFake },
    /** Job ids of the soak's workspaces (a replay names one of them). */
    private readonly jobIds: () => string[],
    private readonly findings: CallbackAbuseFindings,
  ) {}

  async step(): Promise<void> {
    const kind = this.rng.pick(KINDS);
    const backend = this.rng.pick(['fal', 'replicate'] as const);
    const jobs = this.jobIds();
    const job = jobs.length > 0 ? this.rng.pick(jobs) : randomUUID();
    const path = `/v2/provider-callbacks/${backend}/${job}`;
    if (kind === 'gzip bomb') {
      await this.send(
        kind,
        path,
        { ...this.signedHeaders(backend, Buffer.from('{}')), 'content-type': 'application/json', 'content-encoding': 'gzip' },
        BOMB,
      );
    } else if (kind === 'unsigned flood') {
      await Promise.all(
        Array.from({ length: FLOOD_REQUESTS }, () => this.send(kind, path, { 'content-type': 'application/json' }, UNSIGNED_BODY)),
      );
    } else {
      const c = this.capture(backend);
      for (let i = 0; i < REPLAYS; i++) await this.send(kind, `/v2/provider-callbacks/${backend}/${job}`, c.headers, c.body);
    }
  }

  /** A valid delivery of `backend`, signed once and then replayed as it is (re-signed when it grows old). */
  private capture(backend: 'fal' | 'replicate') {
    this.captured = this.captured.filter((c) => Date.now() - c.at_ms < CAPTURE_AGE_MS_MAX);
    let c = this.captured.find((x) => x.backend === backend);
    if (!c) {
      const request_id = randomUUID();
      const body = Buffer.from(
        backend === 'fal'
          ? JSON.stringify({
              request_id,
              gateway_request_id: request_id,
              status: 'OK',
              payload: { video: { url: 'https://example.invalid/v.mp4' } },
            })
          : JSON.stringify({
              id: `soak${randomUUID().replace(/-/g, '').slice(0, 20)}`,
              status: 'succeeded',
              output: ['https://example.invalid/v.mp4'],
            }),
      );
      c = {
        backend,
        headers: { ...this.signedHeaders(backend, body, request_id), 'content-type': 'application/json' },
        body,
        at_ms: Date.now(),
      };
      this.captured.push(c);
    }
    return c;
  }

  private signedHeaders(backend: 'fal' | 'replicate', body: Buffer, request_id = randomUUID()): Record<string, string> {
    return backend === 'fal' ? this.fakes.fal.signCallback(request_id, body) : this.fakes.replicate.signCallback(body);
  }

  private async send(kind: CallbackAbuseKind, path: string, headers: Record<string, string>, raw: Buffer): Promise<Answer> {
    this.findings.sent++;
    const started = performance.now();
    const a = await this.client.send({
      method: 'POST',
      route: `POST /v2/provider-callbacks/{backend}/{job_id} (${kind})`,
      path,
      raw,
      headers,
      timeout_ms: 20_000,
    });
    const outcome: Outcome = a.status;
    this.findings.byKind.record(kind, outcome, performance.now() - started);
    if (typeof a.status === 'number' && a.status !== 429 && a.status !== 503 && !EXPECTED[kind].includes(a.status)) {
      this.findings.unexpected.push(`${kind} ${path}: ${a.status} ${JSON.stringify(a.body).slice(0, 160)}`);
    }
    return a;
  }
}
