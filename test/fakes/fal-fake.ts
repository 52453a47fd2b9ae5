// A local fake of fal's queue API, written from fal's public documentation:
//   - Inference API, https://fal.ai/docs/api-reference/inference-api ("Model IDs and paths": submit to the
//     full endpoint id; status, result and cancel URLs use only owner/app and must be taken from the submit
//     answer; status answers 202 while queued or running and 200 once COMPLETED; `Authorization: Key ...`)
//   - Queue operations, https://fal.ai/docs/inference-api/queue/status, .../queue/result ("If the model
//     returned an error, this operation returns the same error"), .../queue/cancel (202
//     CANCELLATION_REQUESTED, 400 ALREADY_COMPLETED, 404 NOT_FOUND)
//   - Asynchronous inference, https://docs.fal.ai/documentation/model-apis/inference/queue (IN_QUEUE with
//     queue_position, IN_PROGRESS, COMPLETED)
//   - Webhooks, https://docs.fal.ai/documentation/model-apis/inference/webhooks and
//     https://docs.fal.ai/model-endpoints/webhooks (?fal_webhook=; the POST
//     body {"request_id", "gateway_request_id", "status": "OK" | "ERROR", "payload", "error"?}; headers
//     X-Fal-Webhook-Request-Id, -User-Id, -Timestamp, -Signature = hex ED25519 signature of
//     "request_id\nuser_id\ntimestamp\nsha256hex(body)"; the keys at /.well-known/jwks.json as OKP Ed25519 JWKs)
//   - Model errors, https://fal.ai/docs/documentation/model-apis/errors (422 {"detail": [{"loc", "msg",
//     "type"}]}); request errors, https://fal.ai/docs/documentation/model-apis/request-errors
//     ({"detail": "...", "error_type"})
//   - Model input schemas: the API pages of the endpoints in FAL_ENDPOINTS (fal.ai/models/<endpoint>/api).
//
// It refuses what fal refuses: a missing or wrong key (401), an endpoint it does not serve (404), an input
// its schema refuses (422, fields it does not document are ignored, as pydantic models do). It signs
// callbacks with its own ED25519 key, served as its JWKS. For tests: requests follow a plan (polls in
// queue, polls in progress, or completion after a delay; success or the model's error), `finish` ends a
// request now, `dropCallbacks` stops deliveries, `redeliver` sends the last callback again, `fault`
// scripts failures per route, `expire` makes results and files disappear (fal keeps results an hour,
// files a while). An end-to-end test starts it on loopback, gives the service `env()`, and then:
// `defaultPlan = { complete_after_ms }` completes by callback alone; `dropCallbacks = true` leaves
// completion to polling; `fault({ route: 'submit', status: 503, times })` makes fal refuse for a passing
// reason (a fallback to the next backend). The plans, endings and deliveries are the machinery of
// `fake-plans.ts`.
import { createHash, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';
import { checkInput, FAKE_OUTPUT_VIDEO, type FakeRequest, type FieldSpec } from './fake-http.js';
import { PlannedFake, type CallbackDelivery, type Plan, type PlannedRequest } from './fake-plans.js';

export type FalRoute = 'submit' | 'status' | 'result' | 'cancel' | 'jwks' | 'file';

const DURATIONS_S = ['4s', '6s', '8s'];
const VEO_RESOLUTIONS = ['720p', '1080p'];
const VEO_COMMON: Record<string, FieldSpec> = {
  prompt: { type: 'string', required: true },
  duration: { type: 'string', values: DURATIONS_S },
  resolution: { type: 'string', values: VEO_RESOLUTIONS },
  generate_audio: { type: 'boolean' },
  negative_prompt: { type: 'string' },
  seed: { type: 'integer' },
};
const veo: Record<string, Record<string, FieldSpec>> = {
  '': { ...VEO_COMMON, aspect_ratio: { type: 'string', values: ['16:9', '9:16'] } },
  '/image-to-video': {
    ...VEO_COMMON,
    aspect_ratio: { type: 'string', values: ['auto', '16:9', '9:16'] },
    image_url: { type: 'uri', required: true },
  },
  '/first-last-frame-to-video': {
    ...VEO_COMMON,
    aspect_ratio: { type: 'string', values: ['auto', '16:9', '9:16'] },
    first_frame_url: { type: 'uri', required: true },
    last_frame_url: { type: 'uri', required: true },
  },
};
const KLING_T2V: Record<string, FieldSpec> = {
  prompt: { type: 'string', required: true },
  duration: { type: 'string', values: ['5', '10'] },
  aspect_ratio: { type: 'string', values: ['16:9', '9:16', '1:1'] },
  negative_prompt: { type: 'string' },
  cfg_scale: { type: 'number' },
};
const SEEDANCE_T2V: Record<string, FieldSpec> = {
  prompt: { type: 'string', required: true },
  duration: { type: 'string', values: ['2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12'] },
  resolution: { type: 'string', values: ['480p', '720p', '1080p'] },
  aspect_ratio: { type: 'string', values: ['21:9', '16:9', '4:3', '1:1', '3:4', '9:16'] },
  seed: { type: 'integer' },
  camera_fixed: { type: 'boolean' },
};
const WAN_T2V: Record<string, FieldSpec> = {
  prompt: { type: 'string', required: true },
  duration: { type: 'string', values: ['5', '10'] },
  resolution: { type: 'string', values: ['480p', '720p', '1080p'] },
  aspect_ratio: { type: 'string', values: ['16:9', '9:16', '1:1'] },
  negative_prompt: { type: 'string' },
  seed: { type: 'integer' },
};
const { aspect_ratio: _wanAspect, ...WAN_I2V_BASE } = WAN_T2V;
const HAILUO: Record<string, FieldSpec> = { prompt: { type: 'string', required: true }, prompt_optimizer: { type: 'boolean' } };

/** The endpoints the fake serves, with their documented inputs. */
export const FAL_ENDPOINTS: Readonly<Record<string, Readonly<Record<string, FieldSpec>>>> = {
  ...Object.fromEntries(
    Object.entries(veo).flatMap(([suffix, spec]) => [
      [`fal-ai/veo3.1${suffix}`, spec],
      [`fal-ai/veo3.1/fast${suffix}`, spec],
    ]),
  ),
  'fal-ai/kling-video/v2.5-turbo/pro/text-to-video': KLING_T2V,
  'fal-ai/kling-video/v2.5-turbo/pro/image-to-video': {
    prompt: { type: 'string', required: true },
    duration: { type: 'string', values: ['5', '10'] },
    negative_prompt: { type: 'string' },
    cfg_scale: { type: 'number' },
    image_url: { type: 'uri', required: true },
    tail_image_url: { type: 'uri' },
  },
  'fal-ai/bytedance/seedance/v1/pro/text-to-video': SEEDANCE_T2V,
  'fal-ai/bytedance/seedance/v1/pro/image-to-video': {
    ...SEEDANCE_T2V,
    image_url: { type: 'uri', required: true },
    end_image_url: { type: 'uri' },
  },
  'fal-ai/wan-25-preview/text-to-video': WAN_T2V,
  'fal-ai/wan-25-preview/image-to-video': { ...WAN_I2V_BASE, image_url: { type: 'uri', required: true } },
  'fal-ai/minimax/hailuo-02/pro/text-to-video': HAILUO,
  'fal-ai/minimax/hailuo-02/pro/image-to-video': { ...HAILUO, image_url: { type: 'uri', required: true } },
};

type FalOutcome = 'ok' | 'error';

/** How a submitted request goes (or `complete_after_ms`: it completes by itself, by callback). */
export interface FalPlan extends Plan {
  /** Status polls answered IN_QUEUE (queue_position counting down to 0) before it runs. Default 1. */
  queue_polls?: number;
  /** Then status polls answered IN_PROGRESS before it completes. Default 1. */
  progress_polls?: number;
  /** `error`: the model fails it (its result answers 422 with the model's error; the callback says ERROR). */
  outcome?: FalOutcome;
  error_message?: string;
}

interface FalRequestState extends PlannedRequest<FalPlan> {
  endpoint: string;
  /** owner/app: the prefix of its status, result and cancel URLs. */
  app: string;
  input: Record<string, unknown>;
  state: 'IN_QUEUE' | 'IN_PROGRESS' | 'COMPLETED';
  cancelled: boolean;
}

export type FalCallbackDelivery = CallbackDelivery<'request_id'>;

export const FAL_USER_ID = 'fake-user-1';

export class FalFake extends PlannedFake<FalRoute, FalOutcome, FalPlan, FalRequestState, 'request_id'> {
  /** The key every queue request must carry (`Authorization: Key <key>`). */
  key = 'fal-test-key';
  /** The submitted requests, by request id. */
  readonly submitted = this.planned;
  private signingKey: KeyObject;
  private publicKeys: KeyObject[];

  constructor() {
    super('request_id');
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    this.signingKey = privateKey;
    this.publicKeys = [publicKey];
  }

  get jwksUrl(): string {
    return `${this.url}/.well-known/jwks.json`;
  }

  /** The service's environment that points it at this fake (for startStack({ env })). */
  env(): Record<string, string> {
    return { FAL_KEY: this.key, FAL_QUEUE_URL: this.url, FAL_JWKS_URL: this.jwksUrl };
  }

  /** A new signing key; the JWKS then serves both (keep_old) or only the new one. */
  rotateKey(keep_old = true): void {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    this.signingKey = privateKey;
    this.publicKeys = keep_old ? [...this.publicKeys, publicKey] : [publicKey];
  }

  /**
   * The headers fal signs a callback body with; `key` and `timestamp_s` forge or age it; `user_id` signs
   * it as another fal account (fal signs every account's callbacks with the same keys).
   */
  signCallback(
    request_id: string,
    body: Buffer,
    opts: { key?: KeyObject; timestamp_s?: number; user_id?: string } = {},
  ): Record<string, string> {
    const timestamp = String(opts.timestamp_s ?? Math.floor(Date.now() / 1000));
    const user_id = opts.user_id ?? FAL_USER_ID;
    const message = `${request_id}\n${user_id}\n${timestamp}\n${createHash('sha256').update(body).digest('hex')}`;
    return {
      'x-fal-webhook-request-id': request_id,
      'x-fal-webhook-user-id': user_id,
      'x-fal-webhook-timestamp': timestamp,
      'x-fal-webhook-signature': sign(null, Buffer.from(message, 'utf8'), opts.key ?? this.signingKey).toString('hex'),
    };
  }

  /** The callback body fal sends when a request ends. */
  callbackBody(request_id: string): Buffer {
    const r = this.submitted.get(request_id);
    if (!r) throw new Error(`no request ${request_id}`);
    const ok = this.plannedOutcome(r.plan) === 'ok' && !r.cancelled;
    return Buffer.from(
      JSON.stringify(
        ok
          ? { request_id: r.id, gateway_request_id: r.id, status: 'OK', payload: this.output(r) }
          : { request_id: r.id, gateway_request_id: r.id, status: 'ERROR', error: 'Invalid status code: 422', payload: this.modelError(r) },
      ),
    );
  }

  protected routeOf(method: string, url: URL): FalRoute | 'unknown' {
    const p = url.pathname;
    if (method === 'GET' && p === '/.well-known/jwks.json') return 'jwks';
    if (method === 'GET' && p.startsWith('/files/')) return 'file';
    if (/^\/[^/]+\/[^/]+\/requests\/[^/]+\/status$/.test(p)) return method === 'GET' ? 'status' : 'unknown';
    if (/^\/[^/]+\/[^/]+\/requests\/[^/]+\/cancel$/.test(p)) return method === 'PUT' ? 'cancel' : 'unknown';
    if (/^\/[^/]+\/[^/]+\/requests\/[^/]+$/.test(p)) return method === 'GET' ? 'result' : 'unknown';
    return method === 'POST' ? 'submit' : 'unknown';
  }

  protected notFound({ res, url }: FakeRequest<FalRoute>): void {
    this.json(res, 404, { detail: `Not Found: ${url.pathname}` });
  }

  protected async serve({ req, res, url, recorded }: FakeRequest<FalRoute>): Promise<void> {
    const route = recorded.route as FalRoute;
    if (route === 'jwks') {
      return this.json(res, 200, {
        keys: this.publicKeys.map((k) => ({
          ...k.export({ format: 'jwk' }),
          kid: createHash('sha256')
            .update(k.export({ format: 'der', type: 'spki' }))
            .digest('hex')
            .slice(0, 16),
        })),
      });
    }
    if (route === 'file') {
      if (this.expired) return this.json(res, 404, { detail: 'Not Found' });
      return this.sendVideo(res);
    }
    if (req.headers['authorization'] !== `Key ${this.key}`) {
      return this.json(res, 401, {
        detail: 'Authentication is required to perform this action: the Authorization header must be "Key <your key>"',
      });
    }
    if (route === 'submit') return this.submit(res, url, recorded.json);
    const [, owner, app, , id] = url.pathname.split('/');
    const r = this.submitted.get(id ?? '');
    if (!r || r.app !== `${owner}/${app}`) {
      return route === 'cancel' ? this.json(res, 404, { status: 'NOT_FOUND' }) : this.json(res, 404, { detail: `Request ${id} not found` });
    }
    if (route === 'status') return this.status(res, r);
    if (route === 'result') return this.result(res, r);
    return this.cancelRequest(res, r);
  }

  private submit(res: FakeRequest<FalRoute>['res'], url: URL, body: unknown): void {
    const endpoint = url.pathname.slice(1);
    const fields = FAL_ENDPOINTS[endpoint];
    if (!fields) return this.json(res, 404, { detail: `Application '${endpoint}' not found` });
    const problems = checkInput(body, fields);
    if (problems.length > 0) {
      return this.json(res, 422, { detail: problems.map(([field, msg]) => ({ loc: ['body', field], msg, type: 'value_error' })) });
    }
    const webhook = url.searchParams.get('fal_webhook') ?? undefined;
    if (webhook !== undefined && !/^https?:\/\//.test(webhook))
      return this.json(res, 422, { detail: [{ loc: ['query', 'fal_webhook'], msg: 'invalid URL', type: 'value_error.url' }] });
    const id = randomUUID();
    const app = endpoint.split('/').slice(0, 2).join('/');
    const plan = this.nextPlan();
    this.admit({
      id,
      endpoint,
      app,
      input: body as Record<string, unknown>,
      webhook,
      plan,
      state: 'IN_QUEUE',
      polls: 0,
      cancelled: false,
      timers: [],
    });
    const base = `${this.url}/${app}/requests/${id}`;
    this.json(res, 200, {
      status: 'IN_QUEUE',
      request_id: id,
      gateway_request_id: id,
      response_url: base,
      status_url: `${base}/status`,
      cancel_url: `${base}/cancel`,
      queue_position: plan.queue_polls ?? 1,
    });
  }

  private async status(res: FakeRequest<FalRoute>['res'], r: FalRequestState): Promise<void> {
    await this.poll(r);
    const base = `${this.url}/${r.app}/requests/${r.id}`;
    const urls = { response_url: base, status_url: `${base}/status`, cancel_url: `${base}/cancel` };
    if (r.state === 'IN_QUEUE')
      return this.json(res, 202, { status: 'IN_QUEUE', queue_position: Math.max(0, (r.plan.queue_polls ?? 1) - r.polls), ...urls });
    if (r.state === 'IN_PROGRESS') return this.json(res, 202, { status: 'IN_PROGRESS', logs: null, ...urls });
    this.json(res, 200, { status: 'COMPLETED', logs: null, metrics: { inference_time: 1.5 }, ...urls });
  }

  private result(res: FakeRequest<FalRoute>['res'], r: FalRequestState): void {
    if (r.state !== 'COMPLETED') return this.json(res, 400, { detail: 'Request is still in progress' });
    if (this.expired) return this.json(res, 404, { detail: `Request ${r.id} not found` });
    if (r.cancelled) return this.json(res, 400, { detail: 'Request was cancelled', error_type: 'request_cancelled' });
    if (this.plannedOutcome(r.plan) === 'error') return this.json(res, 422, this.modelError(r), { 'x-fal-retryable': 'false' });
    this.json(res, 200, this.output(r));
  }

  private async cancelRequest(res: FakeRequest<FalRoute>['res'], r: FalRequestState): Promise<void> {
    if (r.state === 'COMPLETED') return this.json(res, 400, { status: 'ALREADY_COMPLETED' });
    r.cancelled = true;
    await this.end(r, this.plannedOutcome(r.plan));
    this.json(res, 202, { status: 'CANCELLATION_REQUESTED' });
  }

  private output(r: FalRequestState) {
    return {
      video: {
        url: `${this.url}/files/${r.id}/output.mp4`,
        content_type: 'video/mp4',
        file_name: 'output.mp4',
        file_size: FAKE_OUTPUT_VIDEO.length,
      },
      seed: typeof r.input['seed'] === 'number' ? r.input['seed'] : 42,
    };
  }

  private modelError(r: FalRequestState) {
    return {
      detail: [
        {
          loc: ['body', 'prompt'],
          msg: r.plan.error_message ?? 'The content could not be processed because it contained material flagged by a content checker.',
          type: 'content_policy_violation',
        },
      ],
    };
  }

  protected ended(r: FalRequestState): boolean {
    return r.state === 'COMPLETED';
  }

  protected plannedOutcome(plan: FalPlan): FalOutcome {
    return plan.outcome ?? 'ok';
  }

  protected pollStages(plan: FalPlan): [number, number] {
    return [plan.queue_polls ?? 1, plan.progress_polls ?? 1];
  }

  protected running(r: FalRequestState): void {
    r.state = 'IN_PROGRESS';
  }

  protected settle(r: FalRequestState, outcome: FalOutcome): void {
    if (outcome !== this.plannedOutcome(r.plan)) r.plan = { ...r.plan, outcome };
    r.state = 'COMPLETED';
  }

  protected signedCallback(r: FalRequestState) {
    const body = this.callbackBody(r.id);
    return { headers: this.signCallback(r.id, body), body };
  }
}
