// A local fake of Replicate's HTTP API, written from Replicate's public documentation:
//   - HTTP API reference, https://replicate.com/docs/reference/http (models.predictions.create
//     `POST /v1/models/{owner}/{name}/predictions`, predictions.create `POST /v1/predictions` with
//     "version", predictions.get `GET /v1/predictions/{id}`, predictions.cancel
//     `POST /v1/predictions/{id}/cancel`, webhooks.default.secret.get `GET /v1/webhooks/default/secret`
//     -> {"key": "whsec_..."}; `Authorization: Bearer <token>`; the prediction object {"id", "model",
//     "version", "input", "logs", "output", "data_removed", "error", "status", "created_at",
//     "started_at", "completed_at", "urls"}; statuses starting, processing, succeeded, failed, canceled,
//     aborted; errors as problem details {"title", "detail", "status"}, 422 with "invalid_fields")
//   - Prediction deadlines, https://replicate.com/changelog/2025-10-16-prediction-deadlines (the
//     Cancel-After header, "1m"-style durations; at the deadline: aborted if it never started,
//     canceled if it was running)
//   - Webhooks, https://replicate.com/docs/topics/webhooks and
//     https://replicate.com/docs/topics/webhooks/receive-webhook (the body is the prediction object, as
//     the get-a-prediction API answers it; webhook_events_filter start | output | logs | completed; a
//     delivery not answered 2xx within a few seconds may be retried) and
//     https://replicate.com/docs/topics/webhooks/verify-webhook (webhook-id, webhook-timestamp,
//     webhook-signature: Standard Webhooks, https://www.standardwebhooks.com/, signed with the account's
//     whsec_ secret)
//   - Output files, https://replicate.com/docs/topics/predictions/data-retention (outputs deleted an
//     hour after the prediction ends: data_removed)
//   - Model inputs: the API pages of the models in REPLICATE_MODELS (replicate.com/<owner>/<name>/api).
//   - Create a prediction, https://replicate.com/docs/reference/http#predictions.create: the answer is
//     the prediction, its "input" as given (file inputs included); "Files should be passed as HTTP URLs
//     or data URLs": a data URL for a file of at most 256 KB, an HTTP URL for a larger one.
//   - Files, https://replicate.com/docs/reference/http#files.create: `POST /v1/files` as
//     multipart/form-data with "content" (the file), "filename", "type" and "metadata" (JSON) -> 201
//     {"id", "name", "content_type", "size", "etag", "checksums": {"sha256"}, "metadata", "created_at",
//     "expires_at", "urls": {"get"}}; files.get `GET /v1/files/{id}`; files.delete `DELETE /v1/files/{id}` -> 204.
//
// It refuses what Replicate refuses: a missing or wrong token (401), a model it does not serve (404), an
// input its schema refuses (422 with invalid_fields; undocumented fields ignored, as Cog does), an
// unreadable Cancel-After (400). For tests: predictions follow a plan (polls starting, polls processing
// with progress-bar logs, or completion after a delay; succeeded or failed), `finish` ends one now,
// `dropCallbacks` stops deliveries, `redeliver` replays the last one, `fault` scripts failures per route,
// `expire` removes outputs (data_removed). An end-to-end test starts it on loopback and gives the service
// `env()`; `defaultPlan = { complete_after_ms }` completes by callback alone, `dropCallbacks` leaves it
// to polling, `fault({ route: 'create', status: 503 })` refuses for a passing reason. The plans, endings
// and deliveries are the machinery of `fake-plans.ts`.
import { createHash, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { checkInput, type FakeRequest, type FieldSpec } from './fake-http.js';
import { PlannedFake, type CallbackDelivery, type Plan, type PlannedRequest } from './fake-plans.js';

export type ReplicateRoute = 'create' | 'get' | 'cancel' | 'secret' | 'file' | 'upload' | 'uploaded' | 'delete_file';

const VEO: Record<string, FieldSpec> = {
  prompt: { type: 'string', required: true },
  duration: { type: 'integer', values: [4, 6, 8] },
  resolution: { type: 'string', values: ['720p', '1080p'] },
  aspect_ratio: { type: 'string', values: ['16:9', '9:16'] },
  image: { type: 'uri' },
  last_frame: { type: 'uri' },
  generate_audio: { type: 'boolean' },
  negative_prompt: { type: 'string' },
  seed: { type: 'integer' },
};

/** The models the fake serves, with their documented inputs. */
export const REPLICATE_MODELS: Readonly<Record<string, Readonly<Record<string, FieldSpec>>>> = {
  'google/veo-3.1': VEO,
  'google/veo-3.1-fast': VEO,
  'kwaivgi/kling-v2.5-turbo-pro': {
    prompt: { type: 'string', required: true },
    duration: { type: 'integer', values: [5, 10] },
    aspect_ratio: { type: 'string', values: ['16:9', '9:16', '1:1'] },
    start_image: { type: 'uri' },
    negative_prompt: { type: 'string' },
  },
  'bytedance/seedance-1-pro': {
    prompt: { type: 'string', required: true },
    duration: { type: 'integer', values: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] },
    resolution: { type: 'string', values: ['480p', '720p', '1080p'] },
    aspect_ratio: { type: 'string', values: ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9', '9:21'] },
    seed: { type: 'integer' },
    image: { type: 'uri' },
    last_frame_image: { type: 'uri' },
    camera_fixed: { type: 'boolean' },
  },
  'minimax/hailuo-02': {
    prompt: { type: 'string', required: true },
    duration: { type: 'integer', values: [6, 10] },
    resolution: { type: 'string', values: ['512p', '768p', '1080p'] },
    first_frame_image: { type: 'uri' },
    prompt_optimizer: { type: 'boolean' },
  },
};

/** A pinned version of each model (POST /v1/predictions {"version"}). */
export const REPLICATE_VERSIONS: Readonly<Record<string, string>> = Object.fromEntries(
  Object.keys(REPLICATE_MODELS).map((m) => [createHash('sha256').update(m).digest('hex'), m]),
);

/** The statuses a prediction ends in: its plan's outcomes, and cancelled by a request or at its deadline. */
type Ending = 'succeeded' | 'failed' | 'canceled' | 'aborted';

/** How a prediction goes (or `complete_after_ms`: it ends by itself, by callback). */
export interface ReplicatePlan extends Plan {
  /** Polls answered "starting" before it runs. Default 1. */
  starting_polls?: number;
  /** Then polls answered "processing" (with progress-bar logs) before it ends. Default 2. */
  processing_polls?: number;
  /** `failed`: the model fails it with `error`. */
  outcome?: 'succeeded' | 'failed';
  error?: string;
}

interface Prediction extends PlannedRequest<ReplicatePlan> {
  model: string;
  version: string;
  input: Record<string, unknown>;
  events: string[];
  status: 'starting' | 'processing' | Ending;
  logs: string;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  /** The Cancel-After it was created with, seconds. */
  cancel_after_s: number | undefined;
}

interface UploadedFile {
  id: string;
  name: string;
  content_type: string;
  bytes: Buffer;
  metadata: unknown;
  created_at: string;
}

export type ReplicateCallbackDelivery = CallbackDelivery<'prediction_id'>;

const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'aborted']);

/** Cancel-After: a Go-style duration ("90s", "5m", "1h30m"); undefined when unreadable. */
export function parseCancelAfter(value: string): number | undefined {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$/.exec(value.trim());
  if (!m || value.trim() === '') return undefined;
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

export class ReplicateFake extends PlannedFake<ReplicateRoute, Ending, ReplicatePlan, Prediction, 'prediction_id'> {
  token = 'r8_test_token';
  /** The account's signing secret (GET /v1/webhooks/default/secret). */
  secret = `whsec_${Buffer.from('replicate-fake-signing-secret-0001').toString('base64')}`;
  /** The predictions created, by id. */
  readonly predictions = this.planned;
  /** Files uploaded with the files API, by id. */
  readonly files = new Map<string, UploadedFile>();

  constructor() {
    super('prediction_id');
  }

  /** The service's environment that points it at this fake (the signing secret is fetched from it). */
  env(): Record<string, string> {
    return { REPLICATE_API_TOKEN: this.token, REPLICATE_API_URL: this.url };
  }

  override reset(): void {
    super.reset();
    this.files.clear();
  }

  /** Standard Webhooks headers for a body, signed with `secret` (default the account's) at `at`. */
  signCallback(body: Buffer, opts: { secret?: string; at?: Date; id?: string } = {}): Record<string, string> {
    const id = opts.id ?? `msg_${randomUUID().replace(/-/g, '')}`;
    const at = opts.at ?? new Date();
    return {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(opts.secret ?? this.secret).sign(id, at, body),
    };
  }

  predictionBody(id: string): Buffer {
    const p = this.predictions.get(id);
    if (!p) throw new Error(`no prediction ${id}`);
    return Buffer.from(JSON.stringify(this.present(p)));
  }

  protected routeOf(method: string, url: URL): ReplicateRoute | 'unknown' {
    const p = url.pathname;
    if (method === 'GET' && p.startsWith('/files/')) return 'file';
    if (method === 'GET' && p === '/v1/webhooks/default/secret') return 'secret';
    if (method === 'POST' && p === '/v1/files') return 'upload';
    if (method === 'GET' && /^\/v1\/files\/[^/]+$/.test(p)) return 'uploaded';
    if (method === 'DELETE' && /^\/v1\/files\/[^/]+$/.test(p)) return 'delete_file';
    if (method === 'POST' && (p === '/v1/predictions' || /^\/v1\/models\/[^/]+\/[^/]+\/predictions$/.test(p))) return 'create';
    if (method === 'POST' && /^\/v1\/predictions\/[^/]+\/cancel$/.test(p)) return 'cancel';
    if (method === 'GET' && /^\/v1\/predictions\/[^/]+$/.test(p)) return 'get';
    return 'unknown';
  }

  protected notFound({ res }: FakeRequest<ReplicateRoute>): void {
    this.json(res, 404, { title: 'Not found', detail: 'The requested resource could not be found.', status: 404 });
  }

  protected async serve(r: FakeRequest<ReplicateRoute>): Promise<void> {
    const { req, res, url, recorded } = r;
    const route = recorded.route as ReplicateRoute;
    if (route === 'file') {
      if (this.expired) return this.json(res, 404, { detail: 'Not found' });
      return this.sendVideo(res);
    }
    if (req.headers['authorization'] !== `Bearer ${this.token}`) {
      return this.json(res, 401, { title: 'Unauthenticated', detail: 'You did not pass a valid authentication token', status: 401 });
    }
    if (route === 'secret') return this.json(res, 200, { key: this.secret });
    if (route === 'create') return this.create(r);
    if (route === 'upload') return this.upload(r);
    if (route === 'uploaded' || route === 'delete_file') {
      const file = this.files.get(url.pathname.split('/')[3] ?? '');
      if (!file) return this.notFound(r);
      if (route === 'uploaded') return this.json(res, 200, this.presentFile(file));
      this.files.delete(file.id);
      res.writeHead(204).end();
      return;
    }
    const id = url.pathname.split('/')[3] ?? '';
    const p = this.predictions.get(id);
    if (!p) return this.notFound(r);
    if (route === 'get') return this.get(res, p);
    await this.end(p, 'canceled');
    this.json(res, 200, this.present(p));
  }

  private async create({ req, res, url, recorded }: FakeRequest<ReplicateRoute>): Promise<void> {
    const body = (recorded.json ?? {}) as { input?: unknown; version?: unknown; webhook?: unknown; webhook_events_filter?: unknown };
    const model =
      url.pathname === '/v1/predictions' ? REPLICATE_VERSIONS[String(body.version)] : url.pathname.split('/').slice(3, 5).join('/');
    const fields = model ? REPLICATE_MODELS[model] : undefined;
    if (!model || !fields)
      return this.json(res, 404, { title: 'Not found', detail: 'The requested resource could not be found.', status: 404 });
    const header = req.headers['cancel-after'];
    const cancel_after_s = typeof header === 'string' ? parseCancelAfter(header) : undefined;
    if (typeof header === 'string' && (cancel_after_s === undefined || cancel_after_s < 5)) {
      return this.json(res, 400, {
        title: 'Invalid Cancel-After header',
        detail: `Cancel-After must be a duration of at least 5s, like "30s" or "1h30m", not ${JSON.stringify(header)}`,
        status: 400,
      });
    }
    const problems = checkInput(body.input, fields);
    // A URL of this account's files must name a file that exists.
    for (const [field, v] of Object.entries((body.input ?? {}) as Record<string, unknown>)) {
      if (typeof v === 'string' && v.startsWith(`${this.url}/v1/files/`) && !this.files.has(v.slice(`${this.url}/v1/files/`.length)))
        problems.push([field, 'names a file that does not exist']);
    }
    if (problems.length > 0) {
      return this.json(res, 422, {
        title: 'Input validation failed',
        detail: problems.map(([f, m]) => `- ${f}: ${m}`).join('\n'),
        status: 422,
        invalid_fields: problems.map(([field, description]) => ({ type: 'invalid', field, description: `${field} ${description}` })),
      });
    }
    if (body.webhook !== undefined && (typeof body.webhook !== 'string' || !/^https?:\/\//.test(body.webhook))) {
      return this.json(res, 422, { title: 'Invalid webhook', detail: 'webhook must be an HTTP(S) URL', status: 422 });
    }
    const events = Array.isArray(body.webhook_events_filter)
      ? body.webhook_events_filter.map(String)
      : ['start', 'output', 'logs', 'completed'];
    const plan = this.nextPlan();
    const p: Prediction = {
      id: randomUUID().replace(/-/g, '').slice(0, 26),
      model,
      version: Object.entries(REPLICATE_VERSIONS).find(([, m]) => m === model)![0],
      input: body.input as Record<string, unknown>,
      webhook: body.webhook as string | undefined,
      events,
      plan,
      status: 'starting',
      polls: 0,
      logs: '',
      created_at: new Date().toISOString(),
      started_at: null,
      completed_at: null,
      timers: [],
      cancel_after_s,
    };
    this.admit(p);
    if (cancel_after_s !== undefined) this.endAfter(p, cancel_after_s * 1000, () => (p.status === 'starting' ? 'aborted' : 'canceled'));
    this.json(res, 201, this.present(p));
  }

  /** files.create: a multipart upload; the file's URL is what a prediction's input names. */
  private async upload({ req, res, recorded }: FakeRequest<ReplicateRoute>): Promise<void> {
    let form: FormData;
    try {
      form = await new Request('http://fake/v1/files', {
        method: 'POST',
        headers: { 'content-type': String(req.headers['content-type'] ?? '') },
        body: new Uint8Array(recorded.raw),
      }).formData();
    } catch {
      return this.json(res, 400, { title: 'Bad request', detail: 'The request must be multipart/form-data', status: 400 });
    }
    const content = form.get('content');
    if (!(content instanceof Blob)) return this.json(res, 400, { title: 'Bad request', detail: 'content is required', status: 400 });
    const bytes = Buffer.from(await content.arrayBuffer());
    let metadata: unknown = {};
    try {
      metadata = JSON.parse(String(form.get('metadata') ?? '{}'));
    } catch {
      return this.json(res, 400, { title: 'Bad request', detail: 'metadata must be JSON', status: 400 });
    }
    const id = randomUUID().replace(/-/g, '').slice(0, 24);
    const filename =
      typeof form.get('filename') === 'string' ? String(form.get('filename')) : content instanceof File ? content.name : 'file';
    const file: UploadedFile = {
      id,
      name: filename,
      content_type: String(form.get('type') ?? content.type ?? 'application/octet-stream'),
      bytes,
      metadata,
      created_at: new Date().toISOString(),
    };
    this.files.set(id, file);
    this.json(res, 201, this.presentFile(file));
  }

  private presentFile(f: UploadedFile) {
    const sha256 = createHash('sha256').update(f.bytes).digest('hex');
    return {
      id: f.id,
      name: f.name,
      content_type: f.content_type,
      size: f.bytes.length,
      etag: sha256.slice(0, 32),
      checksums: { sha256 },
      metadata: f.metadata,
      created_at: f.created_at,
      expires_at: new Date(Date.parse(f.created_at) + 24 * 3_600_000).toISOString(),
      urls: { get: `${this.url}/v1/files/${f.id}` },
    };
  }

  private async get(res: FakeRequest<ReplicateRoute>['res'], p: Prediction): Promise<void> {
    await this.poll(p);
    this.json(res, 200, this.present(p));
  }

  private present(p: Prediction) {
    const base = `${this.url}/v1/predictions/${p.id}`;
    const removed = this.expired && TERMINAL.has(p.status);
    return {
      id: p.id,
      model: p.model,
      version: p.version,
      input: removed ? {} : p.input,
      logs: p.logs,
      output: p.status === 'succeeded' && !removed ? `${this.url}/files/${p.id}/output.mp4` : null,
      data_removed: removed,
      error: p.status === 'failed' ? (p.plan.error ?? 'The model failed to generate the video') : null,
      status: p.status,
      created_at: p.created_at,
      started_at: p.started_at,
      completed_at: p.completed_at,
      urls: { get: base, cancel: `${base}/cancel`, web: `https://replicate.com/p/${p.id}` },
      metrics: p.status === 'succeeded' ? { predict_time: 1.5 } : {},
    };
  }

  protected ended(p: Prediction): boolean {
    return TERMINAL.has(p.status);
  }

  protected plannedOutcome(plan: ReplicatePlan): Ending {
    return plan.outcome ?? 'succeeded';
  }

  protected pollStages(plan: ReplicatePlan): [number, number] {
    return [plan.starting_polls ?? 1, plan.processing_polls ?? 2];
  }

  /** "processing", its logs a progress bar one step further. */
  protected running(p: Prediction, step: number, steps: number): void {
    p.status = 'processing';
    p.started_at ??= new Date().toISOString();
    const total = steps + 1;
    p.logs += `${Math.floor((step / total) * 100)}%|${'█'.repeat(step)}${' '.repeat(total - step)}| ${step}/${total} [00:0${step}<00:0${total - step}, 1.00it/s]\n`;
  }

  protected settle(p: Prediction, status: Ending): void {
    p.status = status;
    p.completed_at = new Date().toISOString();
  }

  /** The prediction as the API answers it, when its webhook asked for the `completed` event. */
  protected signedCallback(p: Prediction) {
    if (!p.events.includes('completed')) return undefined;
    const body = this.predictionBody(p.id);
    return { headers: this.signCallback(body), body };
  }
}
