// The console's only way to the server: the public /v2/ API on this origin, with the API key of the
// tab's session as a bearer header (no cookies are sent: `credentials: 'omit'`).
import type { SpeechModel, VideoModel } from './api-types';

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

// What the API answers: generated from its response schemas (../../scripts/console-api-types.ts).
export type {
  Account,
  CheckoutSession,
  Batch,
  DeliveryAttempt,
  LedgerEntry,
  SpeechModel,
  SpeechToken,
  Usage,
  VideoJob,
  VideoModel,
  Voice,
  WebhookEndpoint,
  WebhookEndpointCreated,
} from './api-types';

export type Model = VideoModel | SpeechModel;
