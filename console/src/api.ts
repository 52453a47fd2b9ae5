// The console's only way to the server: the public /v2/ API on this origin, with the API key of the
// tab's session as a bearer header (no cookies are sent: `credentials: 'omit'`).

const KEY_STORAGE = 'vva.apiKey';

export const session = {
  key(): string | null {
    return sessionStorage.getItem(KEY_STORAGE);
  },
  signIn(key: string): void {
    sessionStorage.setItem(KEY_STORAGE, key);
  },
  signOut(): void {
    sessionStorage.removeItem(KEY_STORAGE);
  },
};

/** An answer other than 2xx, with the API's error object, or a request that never got an answer. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfter_s: number | null = null,
  ) {
    super(message);
  }
}

/** Listeners told when the key stops being accepted (401), so the app can ask for a key again. */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export interface RequestOptions {
  method?: string;
  json?: unknown;
  form?: FormData;
  idempotencyKey?: string;
  /** The key to use instead of the session's (signing in). */
  key?: string;
}

async function send(path: string, opts: RequestOptions = {}): Promise<Response> {
  const key = opts.key ?? session.key();
  const headers: Record<string, string> = {};
  if (key) headers['Authorization'] = `Bearer ${key}`;
  if (opts.idempotencyKey) headers['Idempotency-Key'] = opts.idempotencyKey;
  let body: BodyInit | undefined;
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.form) {
    body = opts.form;
  }
  let res: Response;
  try {
    res = await fetch(path, { method: opts.method ?? 'GET', headers, body, credentials: 'omit', cache: 'no-store' });
  } catch (err) {
    throw new ApiFailure(0, 'network_error', `the API could not be reached (${(err as Error).message})`);
  }
  if (res.ok) return res;
  const retryAfter = Number(res.headers.get('Retry-After'));
  let code = 'http_error';
  let message = res.statusText || `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string } };
    if (body.error?.code) code = body.error.code;
    if (body.error?.message) message = body.error.message;
  } catch {
    // not the API's JSON error shape (a proxy's page, say): keep the status text
  }
  const failure = new ApiFailure(res.status, code, message, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : null);
  if (res.status === 401 && opts.key === undefined) for (const l of unauthorizedListeners) l();
  throw failure;
}

export async function api<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  return (await (await send(path, opts)).json()) as T;
}

/** A request whose answer is not JSON (speech audio): the response itself. */
export function apiRaw(path: string, opts: RequestOptions = {}): Promise<Response> {
  return send(path, opts);
}

const TITLES: Record<number, string> = {
  0: 'No connection',
  400: 'The request was refused',
  401: 'That API key was not accepted',
  402: 'Not enough credits',
  403: 'This API key may not do that',
  404: 'Not found',
  409: 'Not possible now',
  413: 'Too large',
  415: 'Unsupported file',
  429: 'Too many requests',
  502: 'The provider gave an unusable answer',
  503: 'Service unavailable',
};

/** An error in words for people: what happened, the API's own explanation, and when to retry. */
export function describeError(err: unknown): string {
  if (!(err instanceof ApiFailure)) return `Something went wrong: ${err instanceof Error ? err.message : String(err)}`;
  const title = TITLES[err.status] ?? (err.status >= 500 ? 'The server had a problem' : 'The request failed');
  const status = err.status ? ` (${err.status} ${err.code})` : '';
  const retry = err.retryAfter_s ? ` Try again in ${err.retryAfter_s} s.` : '';
  return `${title}${status}: ${err.message}.${retry}`.replace(/\.\./g, '.');
}

export interface ListPage<T> {
  object: 'list';
  data: T[];
  has_more?: boolean;
}

export interface VideoModel {
  id: string;
  kind: 'video';
  family: string;
  variant: string;
  backend: string | null;
  simulated: boolean;
  durations_seconds: number[];
  resolutions: string[];
  aspect_ratios: string[];
  max_n: number;
  supports_image: boolean;
  supports_last_frame: boolean;
  image_mime_types: string[];
  max_image_bytes: number;
  supports_negative_prompt: boolean;
  supports_audio: boolean;
  generate_audio_default: boolean;
  pricing: {
    per_second_with_audio_in_euro: Record<string, number> | null;
    per_second_without_audio_in_euro: Record<string, number>;
  };
}

export interface SpeechModel {
  id: string;
  kind: 'speech';
  available: boolean;
  max_input_chars: number;
  preset_voices?: string[];
  pricing: { per_1000_characters_in_euro: number };
}

export type Model = VideoModel | SpeechModel;

export interface VideoJob {
  id: string;
  status: 'pending' | 'succeeded' | 'failed';
  model: string;
  created: number;
  completed: number | null;
  params: { durationSeconds: number; resolution: string; aspectRatio: string; n: number };
  estimated_cost_in_euro: number;
  cost_in_euro: number | null;
  refunded_in_euro: number;
  videos: { url: string; expires_at: number; content_type: string }[];
  error: { code: string; message: string } | null;
  /** The provider's progress, where the API reports it (0 to 1, or a percentage). */
  progress?: number | null;
}

export interface Voice {
  id: string;
  voice_id: string;
  name: string;
  requires_verification: boolean;
  created: number;
}

export interface LedgerEntry {
  id: string;
  type: 'credit' | 'charge' | 'refund';
  amount_in_euro: number;
  balance_after_in_euro: number;
  job_id: string | null;
  speech_request_id: string | null;
  created: number;
}

export interface WebhookEndpoint {
  id: string;
  url: string;
  events: string[];
  created: number;
  secret?: string;
}

export interface DeliveryAttempt {
  id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  created: number;
  status: 'succeeded' | 'failed';
  http_status: number | null;
  error: string | null;
  delivery_status: string;
}
