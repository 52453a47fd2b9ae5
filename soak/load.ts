// The mixed load: one customer loop per workspace (creates with and without an Idempotency-Key, with
// images, replays, cancels, deletes, gets, lists, speech, voice clones and deletions, statement reads,
// admin top-ups; and two abuses: thumbnail floods during opus, aac or flac speech, and voice consent
// upload-and-delete loops) and one loop sending the fuzz corpus. Each loop is paced (well under the per-key rate
// limits), keeps its workspace under the pending-jobs limit, and records what the soak needs at the
// end: the jobs it was told about, the cost of each job it deleted, and what it credited.
import { randomUUID } from 'node:crypto';
import { encodeWav } from '../src/media/wav.js';
import { pngImage, jpegImage, imageField } from '../test/helpers/images.js';
import { isOk, microOf, retryAfterMs, sleep, type Answer, type Client } from './client.js';
import { SOAK_ADMIN_TOKEN } from './cluster.js';
import type { FuzzCase } from './fuzz-corpus.js';
import { RequestLog } from './report.js';
import type { Rng } from './rng.js';

export interface Workspace {
  name: string;
  id: string;
  key: string;
  /** Top-ups the admin API confirmed, by their Idempotency-Key (the first one: the workspace's initial credits). */
  topups: Map<string, number>;
  /** Every job id a create (or a list) named, with what the soak last saw of it. */
  jobs: Map<string, { pending: boolean }>;
  /** The final cost of each job the soak asked to delete, read just before (the job is gone afterwards). */
  costAtDelete: Map<string, number>;
  /** Keyed creates: the body each key was sent with and the job it named. */
  keyed: Map<string, { body: unknown; jobId: string | null }>;
  voices: string[];
  /** Speech costs the API reported (X-Cost-In-Euro), by request (its Idempotency-Key or a fresh id). */
  speechCosts: Map<string, number>;
}

export interface LoadFindings {
  /** Things the API answered that break its contract (not counting 5xx, which the request log has). */
  problems: string[];
  /** Fuzz cases answered 2xx although malformed. */
  fuzzAccepted: string[];
  /** Fuzz cases answered 5xx other than 503, by kind of malformation. */
  fuzzServerErrors: Map<string, number>;
  /** The fuzz cases' answers by kind of malformation (its own log: counted once in the main one). */
  fuzzByKind: RequestLog;
  fuzzSent: number;
  /** Thumbnail floods sent during a compressed speech, and how that speech was answered (by status). */
  mediaFloods: { floods: number; thumbnails: number; speechByStatus: Map<string, number> };
  /** Voice consents uploaded and deleted by the loops (each deletion must remove its recording). */
  consentChurn: { uploaded: number; deleted: number };
}

export const newFindings = (): LoadFindings => ({
  problems: [],
  fuzzAccepted: [],
  fuzzServerErrors: new Map(),
  fuzzByKind: new RequestLog(),
  fuzzSent: 0,
  mediaFloods: { floods: 0, thumbnails: 0, speechByStatus: new Map() },
  consentChurn: { uploaded: 0, deleted: 0 },
});

const CREATE_ROUTE = 'POST /v2/videos/generations';
const JOB_ROUTE = 'GET /v2/videos/generations/{id}';

/** A real WAV (a short tone): what a voice clone is made from. */
function toneWav(seconds: number, hz: number): Buffer {
  const samples = new Int16Array(Math.round(seconds * 22_050));
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / 22_050));
  return encodeWav(samples, 22_050);
}

export async function setUpWorkspace(client: Client, name: string, credits_in_euro: number): Promise<Workspace> {
  const ws = await client.sendUntilOk({
    method: 'POST',
    route: 'POST /admin/v1/workspaces',
    path: '/admin/v1/workspaces',
    token: SOAK_ADMIN_TOKEN,
    json: { name },
  });
  if (!isOk(ws)) throw new Error(`could not create workspace ${name}: ${ws.status} ${JSON.stringify(ws.body)}`);
  const key = await client.sendUntilOk({
    method: 'POST',
    route: 'POST /admin/v1/workspaces/{id}/api-keys',
    path: `/admin/v1/workspaces/${ws.body.id}/api-keys`,
    token: SOAK_ADMIN_TOKEN,
    json: {},
  });
  if (!isOk(key)) throw new Error(`could not create a key for ${name}: ${key.status}`);
  const w: Workspace = {
    name,
    id: ws.body.id,
    key: key.body.key,
    topups: new Map(),
    jobs: new Map(),
    costAtDelete: new Map(),
    keyed: new Map(),
    voices: [],
    speechCosts: new Map(),
  };
  // The credits as a top-up with a key, like every later one: re-sent at the end to confirm it counted once.
  if (!(await topUp(client, w, credits_in_euro))) throw new Error(`could not credit ${name}`);
  return w;
}

/** An admin top-up with an Idempotency-Key, retried until confirmed; false if never confirmed (re-sent at the end). */
export async function topUp(
  client: Client,
  w: Workspace,
  amount_in_euro: number,
  idempotencyKey = `soak-topup-${randomUUID()}`,
  tries = 30,
): Promise<boolean> {
  const a = await client.sendUntilOk(
    {
      method: 'POST',
      route: 'POST /admin/v1/workspaces/{id}/credits',
      path: `/admin/v1/workspaces/${w.id}/credits`,
      token: SOAK_ADMIN_TOKEN,
      json: { amount_in_euro },
      headers: { 'idempotency-key': idempotencyKey },
    },
    tries,
  );
  if (isOk(a)) w.topups.set(idempotencyKey, microOf(amount_in_euro));
  else w.topups.set(idempotencyKey, -microOf(amount_in_euro)); // unconfirmed: negative until the end confirms it
  return isOk(a);
}

type Action =
  | 'create'
  | 'create_keyed'
  | 'create_image'
  | 'replay_keyed'
  | 'create_then_cancel'
  | 'cancel'
  | 'delete'
  | 'get'
  | 'list'
  | 'speech'
  | 'clone'
  | 'voice_delete'
  | 'read'
  | 'topup'
  | 'thumbnail_flood'
  | 'consent_churn';

const WEIGHTS: Record<Action, number> = {
  create: 16,
  create_keyed: 12,
  create_image: 6,
  replay_keyed: 4,
  create_then_cancel: 5,
  cancel: 4,
  delete: 6,
  get: 14,
  list: 8,
  speech: 10,
  clone: 3,
  voice_delete: 2,
  read: 7,
  topup: 1,
  thumbnail_flood: 2,
  consent_churn: 2,
};

/** Thumbnail requests sent at once by a flood (the read limit is per key and minute: well under it). */
const FLOOD_THUMBNAILS = 12;
/** Consents uploaded and deleted in turn by one churn step. */
const CONSENT_CHURN_ROUNDS = 3;

/** At most this many of a workspace's jobs pending at once (the service refuses beyond 50 a workspace). */
const PENDING_PER_WORKSPACE_MAX = 25;

export class CustomerLoop {
  private readonly findings: LoadFindings;

  constructor(
    private readonly client: Client,
    private readonly w: Workspace,
    private readonly rng: Rng,
    findings: LoadFindings,
  ) {
    this.findings = findings;
  }

  private pendingCount(): number {
    let n = 0;
    for (const j of this.w.jobs.values()) if (j.pending) n++;
    return n;
  }

  private simulate() {
    const r = this.rng.int(0, 99);
    const n = this.rng.int(1, 3);
    const simulate: Record<string, unknown> = { delay_ms: this.rng.int(300, 8_000) };
    if (r < 12) Object.assign(simulate, { outcome: 'fail', message: 'soak: simulated failure' });
    else if (r < 24 && n > 1) simulate['videos'] = this.rng.int(0, n - 1);
    return {
      prompt: `soak ${this.w.name} ${randomUUID().slice(0, 8)}`,
      model: 'sim-video-1',
      durationSeconds: this.rng.pick([4, 6, 8]),
      resolution: '720p',
      n,
      parameters: { simulate },
    };
  }

  private async create(body: unknown, idempotencyKey?: string): Promise<Answer> {
    const a = await this.client.send({
      method: 'POST',
      route: CREATE_ROUTE,
      path: '/v2/videos/generations',
      token: this.w.key,
      json: body,
      ...(idempotencyKey ? { headers: { 'idempotency-key': idempotencyKey } } : {}),
    });
    if (a.status === 202 || a.status === 200) {
      const id = a.body.id as string;
      this.w.jobs.set(id, { pending: a.body.status === 'pending' });
    }
    return a;
  }

  private async keyedCreate(body: unknown): Promise<void> {
    const key = `soak-${randomUUID()}`;
    this.w.keyed.set(key, { body, jobId: null });
    // A 503 or no answer is retried with the same key (a new attempt, charged at most once), twice at most.
    for (let attempt = 0; attempt < 3; attempt++) {
      const a = await this.create(body, key);
      if (isOk(a)) {
        this.w.keyed.set(key, { body, jobId: a.body.id });
        return;
      }
      if (a.status !== 503 && a.status !== 'no_answer') return;
      await sleep(retryAfterMs(a, 1_000));
    }
  }

  private knownJob(pending: boolean): string | null {
    const ids = [...this.w.jobs.entries()].filter(([id, j]) => j.pending === pending && !this.w.costAtDelete.has(id)).map(([id]) => id);
    return ids.length ? this.rng.pick(ids) : null;
  }

  private async getJob(id: string): Promise<Answer> {
    const a = await this.client.send({ method: 'GET', route: JOB_ROUTE, path: `/v2/videos/generations/${id}`, token: this.w.key });
    if (a.status === 200) this.w.jobs.set(id, { pending: a.body.status === 'pending' });
    return a;
  }

  async step(): Promise<void> {
    let action = this.rng.weighted(WEIGHTS);
    const creating = action === 'create' || action === 'create_keyed' || action === 'create_image' || action === 'create_then_cancel';
    if (creating && this.pendingCount() >= PENDING_PER_WORKSPACE_MAX) action = 'get';
    const w = this.w;
    switch (action) {
      case 'create':
        await this.create(this.simulate());
        return;
      case 'create_keyed':
        await this.keyedCreate(this.simulate());
        return;
      case 'create_image': {
        const body: Record<string, unknown> = {
          ...this.simulate(),
          image: imageField(pngImage(64, 36, this.rng.int(0, 255)), 'image/png'),
        };
        if (this.rng.chance(0.5)) body['lastFrame'] = imageField(jpegImage(this.rng.int(0, 255)), 'image/jpeg');
        if (this.rng.chance(0.5)) await this.keyedCreate(body);
        else await this.create(body);
        return;
      }
      case 'replay_keyed': {
        const done = [...w.keyed.entries()].filter(([, k]) => k.jobId !== null);
        if (!done.length) return;
        const [key, k] = this.rng.pick(done);
        const a = await this.create(k.body, key);
        // A deleted job's key is a 409; any other answer naming a job must name the same one.
        if (isOk(a) && a.body.id !== k.jobId)
          this.findings.problems.push(`${w.name}: replay of key ${key} named job ${a.body.id}, not ${k.jobId}`);
        return;
      }
      case 'create_then_cancel': {
        const body = this.simulate();
        (body.parameters.simulate as Record<string, unknown>)['delay_ms'] = this.rng.int(10_000, 30_000);
        const a = await this.create(body);
        if (!isOk(a)) return;
        await sleep(this.rng.int(0, 1_500));
        await this.cancel(a.body.id);
        return;
      }
      case 'cancel': {
        const id = this.knownJob(true);
        if (id) await this.cancel(id);
        return;
      }
      case 'delete': {
        const id = this.knownJob(false);
        if (!id) return;
        const job = await this.getJob(id);
        if (job.status !== 200 || job.body.status === 'pending') return;
        w.costAtDelete.set(id, microOf(job.body.cost_in_euro));
        await this.client.send({
          method: 'DELETE',
          route: 'DELETE /v2/videos/generations/{id}',
          path: `/v2/videos/generations/${id}`,
          token: w.key,
        });
        return;
      }
      case 'get': {
        const id = this.knownJob(true) ?? this.knownJob(false);
        if (id) await this.getJob(id);
        return;
      }
      case 'list': {
        const q = new URLSearchParams({ limit: String(this.rng.int(1, 100)) });
        if (this.rng.chance(0.4)) q.set('status', this.rng.pick(['pending', 'succeeded', 'failed']));
        const a = await this.client.send({
          method: 'GET',
          route: 'GET /v2/videos/generations',
          path: `/v2/videos/generations?${q}`,
          token: w.key,
        });
        if (a.status === 200)
          for (const j of a.body.data) if (!w.costAtDelete.has(j.id)) w.jobs.set(j.id, { pending: j.status === 'pending' });
        return;
      }
      case 'speech': {
        const voice =
          w.voices.length && this.rng.chance(0.5) ? this.rng.pick(w.voices) : this.rng.pick(['sim-narrator', 'sim-bright', 'sim-deep']);
        const input = `Soak speech ${randomUUID()} `.repeat(this.rng.int(1, 8));
        const key = this.rng.chance(0.3) ? `soak-speech-${randomUUID()}` : null;
        for (let attempt = 0; attempt < (key ? 2 : 1); attempt++) {
          const a = await this.client.send({
            method: 'POST',
            route: 'POST /v2/audio/speech',
            path: '/v2/audio/speech',
            token: w.key,
            json: { input, voice },
            ...(key ? { headers: { 'idempotency-key': key } } : {}),
          });
          if (a.status === 200) w.speechCosts.set(key ?? randomUUID(), microOf(Number(a.headers!.get('x-cost-in-euro'))));
        }
        return;
      }
      case 'clone': {
        if (w.voices.length >= 5) return;
        const form = new FormData();
        form.append('name', `soak voice ${this.rng.int(0, 9999)}`);
        form.append('file', new Blob([new Uint8Array(toneWav(0.3, this.rng.int(200, 900)))], { type: 'audio/wav' }), 'sample.wav');
        const a = await this.client.send({
          method: 'POST',
          route: 'POST /v2/audio/voices',
          path: '/v2/audio/voices',
          token: w.key,
          raw: form,
        });
        if (a.status === 200) w.voices.push(a.body.voice_id);
        return;
      }
      case 'voice_delete': {
        if (!w.voices.length) return;
        const list = await this.client.send({ method: 'GET', route: 'GET /v2/audio/voices', path: '/v2/audio/voices', token: w.key });
        if (list.status !== 200 || !list.body.data.length) return;
        const v = this.rng.pick(list.body.data as { id: string; voice_id: string }[]);
        const a = await this.client.send({
          method: 'DELETE',
          route: 'DELETE /v2/audio/voices/{id}',
          path: `/v2/audio/voices/${v.id}`,
          token: w.key,
        });
        if (a.status === 200 || a.status === 404) w.voices = w.voices.filter((x) => x !== v.voice_id);
        return;
      }
      case 'read': {
        const path = this.rng.pick(['/v2/balance', '/v2/ledger?limit=20', '/v2/webhooks', '/v2/models']);
        await this.client.send({ method: 'GET', route: `GET ${path.split('?')[0]}`, path, token: w.key });
        return;
      }
      case 'topup':
        await topUp(this.client, w, this.rng.pick([1, 2.5, 0.000001]), undefined, 3);
        return;
      case 'thumbnail_flood':
        await this.thumbnailFlood();
        return;
      case 'consent_churn':
        await this.consentChurn();
        return;
    }
  }

  /**
   * A flood of thumbnail requests for a finished video while one speech in opus, aac or flac is made:
   * the speech must never be refused for want of an encoder (thumbnails have their own lane), and it is
   * charged what the API reports (the money check).
   */
  private async thumbnailFlood(): Promise<void> {
    const w = this.w;
    const id = this.knownJob(false);
    if (!id) return;
    const job = await this.getJob(id);
    if (job.status !== 200 || job.body.status !== 'succeeded') return;
    const flood = Array.from({ length: FLOOD_THUMBNAILS }, () =>
      this.client.send({
        method: 'GET',
        route: 'GET /v1/videos/{id}/content?variant=thumbnail',
        path: `/v1/videos/${id}/content?variant=thumbnail`,
        token: w.key,
      }),
    );
    const format = this.rng.pick(['opus', 'aac', 'flac']);
    const speech = await this.client.send({
      method: 'POST',
      route: 'POST /v2/audio/speech (during a thumbnail flood)',
      path: '/v2/audio/speech',
      token: w.key,
      json: { input: `Soak speech during a flood ${randomUUID()}`, voice: 'sim-narrator', response_format: format },
    });
    await Promise.all(flood);
    const f = this.findings.mediaFloods;
    f.floods++;
    f.thumbnails += FLOOD_THUMBNAILS;
    f.speechByStatus.set(String(speech.status), (f.speechByStatus.get(String(speech.status)) ?? 0) + 1);
    if (speech.status === 200) w.speechCosts.set(randomUUID(), microOf(Number(speech.headers!.get('x-cost-in-euro'))));
    if (speech.status === 503 && speech.body?.error?.code === 'media_worker_unavailable') {
      this.findings.problems.push(`${w.name}: a ${format} speech was refused for want of an encoder during a thumbnail flood`);
    }
  }

  /** Voice consents uploaded and deleted in turn: each deletion removes its recording (checked on disk at the end). */
  private async consentChurn(): Promise<void> {
    const w = this.w;
    for (let i = 0; i < CONSENT_CHURN_ROUNDS; i++) {
      const form = new FormData();
      form.append('name', 'soak consent');
      form.append('language', 'en');
      form.append(
        'recording',
        new Blob([new Uint8Array(toneWav(this.rng.int(5, 30) / 10, this.rng.int(200, 900)))], { type: 'audio/wav' }),
        'consent.wav',
      );
      const up = await this.client.send({
        method: 'POST',
        route: 'POST /v1/audio/voice_consents',
        path: '/v1/audio/voice_consents',
        token: w.key,
        raw: form,
      });
      if (up.status !== 200) return;
      this.findings.consentChurn.uploaded++;
      const del = await this.client.send({
        method: 'DELETE',
        route: 'DELETE /v1/audio/voice_consents/{id}',
        path: `/v1/audio/voice_consents/${up.body.id}`,
        token: w.key,
      });
      if (del.status === 200) this.findings.consentChurn.deleted++;
    }
  }

  private async cancel(id: string): Promise<void> {
    const a = await this.client.send({
      method: 'POST',
      route: 'POST /v2/videos/generations/{id}/cancel',
      path: `/v2/videos/generations/${id}/cancel`,
      token: this.w.key,
    });
    if (a.status === 200) this.w.jobs.set(id, { pending: a.body.status === 'pending' });
  }
}

/** Sends fuzz cases in turn (the corpus over and over), each with the workspace's key unless it brings its own. */
export async function sendFuzzCase(client: Client, w: Workspace, c: FuzzCase, findings: LoadFindings): Promise<void> {
  const headers = { ...c.headers };
  const started = performance.now();
  const a = await client.send({
    method: c.method,
    route: c.route,
    path: c.path,
    ...(c.noAuth ? {} : { token: w.key }),
    headers,
    ...(c.body !== undefined ? { raw: c.body } : {}),
  });
  findings.fuzzByKind.record(c.kind, a.status, performance.now() - started);
  findings.fuzzSent++;
  if (typeof a.status === 'number' && a.status >= 500 && a.status !== 503)
    findings.fuzzServerErrors.set(c.kind, (findings.fuzzServerErrors.get(c.kind) ?? 0) + 1);
  if (isOk(a)) {
    if (c.method === 'POST' && c.path === '/v2/videos/generations') w.jobs.set(a.body.id, { pending: a.body.status === 'pending' });
    if (c.expect === 'reject') findings.fuzzAccepted.push(`${c.kind} ${c.method} ${c.path.slice(0, 60)} -> ${a.status}`);
  }
}

/** Runs `step` every `interval_ms` (jittered) until `until_ms`, at most `max_steps` times. */
export async function paced(rng: Rng, until_ms: number, interval_ms: number, max_steps: number, step: () => Promise<void>): Promise<void> {
  for (let i = 0; i < max_steps && Date.now() < until_ms; i++) {
    const started = Date.now();
    await step();
    const wait = rng.int(Math.round(interval_ms / 2), Math.round(interval_ms * 1.5)) - (Date.now() - started);
    if (wait > 0) await sleep(Math.min(wait, until_ms - Date.now()));
  }
}
