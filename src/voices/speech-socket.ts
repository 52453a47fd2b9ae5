// Speech over a WebSocket: GET /v2/audio/speech/stream, upgraded. Authenticated at the upgrade, before
// anything else (the bearer API key, or `?token=` from POST /v2/audio/speech/tokens: ./speech-tokens.ts).
// Then JSON text frames, each way:
//
//   client  {"context_id", "voice", "model"?, "text", "continue"?: bool, "flush"?: bool}
//           {"context_id", "cancel": true}
//   server  {"type": "context", "context_id", "speech_request_id", "model", "sample_rate_hz"}   (opened)
//           {"type": "audio", "context_id", "audio": "<base64 of PCM s16le mono at sample_rate_hz>"}
//           {"type": "word_timestamps", "context_id", "words", "start_s", "end_s"}
//           {"type": "done", "context_id", "speech_request_id", "characters", "cost_in_euro", "cancelled"?}
//           {"type": "error", "context_id", "code", "message"}
//
// A context is one utterance (one speech request, ./speech-utterance.ts): its texts sent with
// `"continue": true` are spoken as one, until a text without it ends the utterance. Several contexts may
// speak at once on one socket. Each context ends with one `done` (after an `error` too), saying what was
// charged. The socket's limits (SpeechSocketLimits) are refused with an `error` naming them, or, for the
// socket itself, a close code (SPEECH_SOCKET_CLOSE). A client that reads slowly is not buffered for: past
// buffered_bytes_max waiting to go out, the provider is no longer read until the client caught up.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { z } from 'zod';
import { ApiError } from '../errors.js';
import { AUTH_FAILURES_PER_ADDRESS_PER_MINUTE, principalOfBearer } from '../http/auth.js';
import { dependencyDown } from '../http/errors.js';
import { rateLimited, TokenBuckets } from '../http/rate-limit.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { activeKeyPrincipal, SPEECH_TOKEN_CHARS_MAX } from './speech-tokens.js';
import { errorMessage, Utterance, type UtteranceEvents } from './speech-utterance.js';
import { ContextConnections } from './speech-contexts.js';
import { ContextId, SpeechSocketMessage, type SpeechSocketDeps } from './speech-socket-protocol.js';

export const SPEECH_SOCKET_PATH = '/v2/audio/speech/stream';

/** Close codes of the socket: the standard ones, and the service's (4000-4999). */
export const SPEECH_SOCKET_CLOSE = {
  /** The API process is shutting down: every context is settled for what was spoken. */
  going_away: 1001,
  /** A binary frame (only JSON text frames are spoken). */
  unsupported_data: 1003,
  /** A frame above frame_bytes_max (sent by the ws library). */
  message_too_big: 1009,
  /** Nothing from the client for idle_ms while no context was speaking what it was sent. */
  idle: 4000,
  /** Messages faster than MESSAGES_PER_SECOND for long. */
  too_many_messages: 4029,
} as const;

/** Messages a client may send per second, on average; a burst of MESSAGES_BURST more. Beyond, messages are refused. */
export const MESSAGES_PER_SECOND = 50;
const MESSAGES_BURST = 100;
/** Messages refused for their rate beyond which the socket is closed. */
const REFUSED_FOR_RATE_MAX = 100;

/** The API's error JSON, as the answer to a refused upgrade, and the socket closed. */
function refuseUpgrade(socket: Duplex, err: ApiError): void {
  const body = JSON.stringify({ error: { type: err.type, code: err.code, message: err.message, param: err.param } });
  const headers = { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)), ...err.headers };
  const head = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(`HTTP/1.1 ${err.status} ${http.STATUS_CODES[err.status] ?? ''}\r\n${head}Connection: close\r\n\r\n${body}`);
}

/** The upgrade's query: `token` (nothing else is read). */
const UpgradeQuery = z.object({ token: z.string().max(SPEECH_TOKEN_CHARS_MAX).optional() });

/** The speech WebSocket, attached to an HTTP server's upgrades. */
export class SpeechSocketServer {
  private readonly wss: WebSocketServer;
  private readonly socketsByKey = new Map<string, number>();
  private readonly sessions = new Set<SpeechSocketSession>();
  /** Failed authentications by client address: as on the HTTP routes, a failed key lookup is paid for. */
  private readonly authFailures: TokenBuckets;

  constructor(private readonly deps: SpeechSocketDeps) {
    this.authFailures = new TokenBuckets(deps.authFailuresPerMinute ?? AUTH_FAILURES_PER_ADDRESS_PER_MINUTE);
    this.wss = new WebSocketServer({ noServer: true, maxPayload: deps.limits.frame_bytes_max, perMessageDeflate: false });
  }

  /** Serves the upgrades of `server` to SPEECH_SOCKET_PATH (any other upgrade is a 404). */
  attach(server: http.Server): void {
    server.on('upgrade', (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => socket.destroy());
      this.upgrade(request, socket, head).catch((err: unknown) => {
        if (err instanceof ApiError) return refuseUpgrade(socket, err);
        const down = dependencyDown(err);
        if (down) return refuseUpgrade(socket, down);
        this.deps.logger.error({ err_message: (err as Error).message }, 'speech socket: upgrade failed');
        refuseUpgrade(socket, new ApiError(500, 'api_error', 'internal_error', 'the upgrade failed'));
      });
    });
  }

  private async upgrade(request: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://localhost');
    if (url.pathname !== SPEECH_SOCKET_PATH) {
      throw new ApiError(404, 'not_found_error', 'route_not_found', `no WebSocket at ${url.pathname}`);
    }
    const address = request.socket.remoteAddress ?? '';
    const wait_s = this.authFailures.take(address, 0);
    if (wait_s > 0) throw rateLimited(wait_s, `too many failed authentications from this address; retry after ${wait_s}s`);
    const principal = await this.authenticate(request.headers.authorization, url.searchParams).catch((err: unknown) => {
      if (err instanceof ApiError && err.status === 401) this.authFailures.take(address);
      throw err;
    });
    this.deps.speech.assertConfigured();
    const open = this.socketsByKey.get(principal.key_id) ?? 0;
    if (open >= this.deps.limits.sockets_per_key_max) {
      throw new ApiError(
        429,
        'rate_limit_error',
        'too_many_sockets',
        `this API key already has ${open} speech sockets open on this server (at most ${this.deps.limits.sockets_per_key_max})`,
        null,
        { 'Retry-After': '1' },
      );
    }
    this.socketsByKey.set(principal.key_id, open + 1);
    this.wss.handleUpgrade(request, socket, head, (ws) => {
      const session = new SpeechSocketSession(ws, principal, this.deps);
      this.sessions.add(session);
      ws.once('close', () => {
        this.sessions.delete(session);
        const n = (this.socketsByKey.get(principal.key_id) ?? 1) - 1;
        if (n > 0) this.socketsByKey.set(principal.key_id, n);
        else this.socketsByKey.delete(principal.key_id);
      });
    });
  }

  /** The bearer key, or a token's (a header wins over a token). */
  private async authenticate(authorization: string | undefined, search: URLSearchParams): Promise<ApiKeyPrincipal> {
    if (authorization !== undefined) return principalOfBearer(this.deps.db, authorization);
    const unauthorized = (message: string) => new ApiError(401, 'authentication_error', 'invalid_token', message);
    if (!search.has('token')) {
      throw new ApiError(
        401,
        'authentication_error',
        'invalid_api_key',
        'missing API key: send Authorization: Bearer <API_KEY> or ?token=',
      );
    }
    const query = UpgradeQuery.safeParse(Object.fromEntries(search));
    if (!query.success || query.data.token === undefined) throw unauthorized('invalid token');
    const claims = this.deps.tokens.verify(query.data.token);
    if ('refused' in claims) throw unauthorized(claims.refused === 'expired' ? 'the token has expired' : 'invalid token');
    const principal = await activeKeyPrincipal(this.deps.db, claims.key_id, claims.workspace_id);
    if (!principal) throw unauthorized("the token's API key is revoked");
    return principal;
  }

  /** Closes every socket (going away), each context settled for what was spoken. */
  async close(): Promise<void> {
    await Promise.all([...this.sessions].map((s) => s.shutdown()));
    await new Promise<void>((r) => this.wss.close(() => r()));
  }
}

/** One client's socket: its contexts, its limits. */
class SpeechSocketSession {
  private readonly utterances = new Map<string, Utterance>();
  /** This socket's connections to providers that carry several contexts over one (Cartesia's), opened with it. */
  private readonly connections = new ContextConnections();
  private last_activity_ms = performance.now();
  private readonly idleTimer: NodeJS.Timeout;
  private tokens = MESSAGES_BURST;
  private tokens_at_ms = performance.now();
  private refused_for_rate = 0;

  constructor(
    private readonly ws: WebSocket,
    private readonly principal: ApiKeyPrincipal,
    private readonly deps: SpeechSocketDeps,
  ) {
    ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    ws.on('close', () => this.onClose());
    ws.on('error', () => {});
    this.connections.preconnect(deps.speech.providers);
    const every = Math.max(50, Math.min(1_000, Math.floor(deps.limits.idle_ms / 4)));
    this.idleTimer = setInterval(() => {
      // A context speaking (or settling) what was all sent is not idle; one waiting for text or for the client to read is.
      if ([...this.utterances.values()].some((u) => u.busy)) this.touch();
      if (performance.now() - this.last_activity_ms >= deps.limits.idle_ms) {
        ws.close(SPEECH_SOCKET_CLOSE.idle, `idle for ${deps.limits.idle_ms} ms`);
      }
    }, every);
  }

  send(message: object): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(message));
  }

  /** Bytes waiting to go out to the client. */
  get buffered_bytes(): number {
    return this.ws.bufferedAmount;
  }

  get open(): boolean {
    return this.ws.readyState === this.ws.OPEN;
  }

  /** Audio went out: the socket is not idle. */
  touch(): void {
    this.last_activity_ms = performance.now();
  }

  private takeToken(): boolean {
    const now = performance.now();
    this.tokens = Math.min(MESSAGES_BURST, this.tokens + ((now - this.tokens_at_ms) * MESSAGES_PER_SECOND) / 1000);
    this.tokens_at_ms = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    this.touch();
    if (isBinary) return this.ws.close(SPEECH_SOCKET_CLOSE.unsupported_data, 'only JSON text frames');
    if (!this.takeToken()) {
      if (++this.refused_for_rate > REFUSED_FOR_RATE_MAX) return this.ws.close(SPEECH_SOCKET_CLOSE.too_many_messages, 'too many messages');
      return this.send(errorMessage(null, 'rate_limited', `at most ${MESSAGES_PER_SECOND} messages per second; this one was dropped`));
    }
    let parsed: SpeechSocketMessage;
    try {
      const result = SpeechSocketMessage.safeParse(JSON.parse(data.toString('utf8')));
      if (!result.success) {
        const contextId = ContextId.safeParse((JSON.parse(data.toString('utf8')) as { context_id?: unknown })?.context_id);
        const issue = result.error.issues[0];
        const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
        return this.send(
          errorMessage(contextId.success ? contextId.data : null, 'invalid_message', `${where}${issue?.message ?? 'invalid message'}`),
        );
      }
      parsed = result.data;
    } catch {
      return this.send(errorMessage(null, 'invalid_message', 'not JSON'));
    }
    this.dispatch(parsed);
  }

  private dispatch(m: SpeechSocketMessage): void {
    const existing = this.utterances.get(m.context_id);
    if ('cancel' in m) {
      if (!existing) return this.send(errorMessage(m.context_id, 'context_not_found', 'no such context on this socket'));
      return existing.cancel();
    }
    if (existing) return existing.accept(m);
    if (this.utterances.size >= this.deps.limits.contexts_per_socket_max) {
      return this.send(
        errorMessage(
          m.context_id,
          'too_many_contexts',
          `at most ${this.deps.limits.contexts_per_socket_max} contexts speak at once on a socket`,
        ),
      );
    }
    const events: UtteranceEvents = {
      send: (message) => this.send(message),
      buffered_bytes: () => this.buffered_bytes,
      open: () => this.open,
      touch: () => this.touch(),
      ended: () => this.utterances.delete(m.context_id),
      openContext: (provider, req) => this.connections.open(provider, req),
    };
    const utterance = new Utterance(m.context_id, this.principal, this.deps, events);
    this.utterances.set(m.context_id, utterance);
    utterance.accept(m);
  }

  private onClose(): void {
    clearInterval(this.idleTimer);
    // Dropped: every context stops, settled for what was spoken; then the provider connections close.
    const settled = [...this.utterances.values()].map((u) => u.settled);
    for (const u of this.utterances.values()) u.cancel();
    void Promise.all(settled).then(() => this.connections.close());
  }

  /** Closes the socket (going away) and waits for its contexts to settle. */
  async shutdown(): Promise<void> {
    const settled = [...this.utterances.values()].map((u) => u.settled);
    this.ws.close(SPEECH_SOCKET_CLOSE.going_away, 'the server is shutting down');
    for (const u of this.utterances.values()) u.cancel();
    await Promise.all(settled);
  }
}
