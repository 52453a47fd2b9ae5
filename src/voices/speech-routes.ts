// POST /v2/audio/speech: JSON in, audio bytes out (charged once delivered; see ./speech.ts).
import type { RequestHandler } from 'express';
import { ApiRouter, header, json, type ContractHandler, type RouteContract } from '../http/openapi.js';
import { ApiError } from '../errors.js';
import { CreateSpeechBody, SpeechToken } from './schemas.js';
import { SPEECH_TOKEN_CHARS_MAX, type SpeechTokens } from './speech-tokens.js';
import { z } from 'zod';
import { SPEECH_SOCKET_PATH } from './speech-socket.js';
import { speechBodyExample, speechBodySchema } from '../models/openapi-bodies.js';
import { jsonBody } from '../http/json-body.js';
import { principalOf } from '../http/auth.js';
import { microEurToEur } from '../money.js';
import { invalidParam } from '../errors.js';
import type { SpeechService } from './speech.js';
import { sendSpeechStream } from './speech-stream.js';

/** The JSON in the `data` of each server-sent event of a streamed speech (./speech-stream.ts). */
const SPEECH_EVENT_DATA = {
  oneOf: [
    {
      type: 'object',
      description: 'The next bytes of the audio, in the response_format asked for.',
      required: ['type', 'audio'],
      properties: {
        type: { const: 'speech.audio.delta' },
        audio: { type: 'string', contentEncoding: 'base64', description: 'Base64 of the next bytes.' },
      },
    },
    {
      type: 'object',
      description:
        'With `timestamps: "word"`: the timings of the next words, between the audio deltas. Each word once, in order; ' +
        'start_s and end_s in seconds from the start of the audio, monotonic, within its duration.',
      required: ['type', 'words', 'start_s', 'end_s'],
      properties: {
        type: { const: 'speech.word_timestamps' },
        words: { type: 'array', items: { type: 'string' }, minItems: 1 },
        start_s: { type: 'array', items: { type: 'number', minimum: 0 }, minItems: 1 },
        end_s: { type: 'array', items: { type: 'number', minimum: 0 }, minItems: 1 },
      },
    },
    {
      type: 'object',
      description: 'The audio is complete (the last event); characters stand in for tokens.',
      required: ['type', 'usage'],
      properties: {
        type: { const: 'speech.audio.done' },
        usage: {
          type: 'object',
          required: ['input_tokens', 'output_tokens', 'total_tokens'],
          properties: {
            input_tokens: { type: 'integer', minimum: 0 },
            output_tokens: { type: 'integer', minimum: 0 },
            total_tokens: { type: 'integer', minimum: 0 },
          },
        },
      },
    },
    {
      type: 'object',
      description: 'The provider failed mid-stream (the last event); nothing was charged.',
      required: ['type', 'error'],
      properties: {
        type: { const: 'error' },
        error: {
          type: 'object',
          required: ['type', 'code', 'message'],
          properties: {
            type: { type: 'string' },
            code: { type: 'string' },
            message: { type: 'string' },
            param: { type: ['string', 'null'] },
          },
        },
      },
    },
  ],
};

/**
 * One server-sent event, as the HTML standard's event stream parses it (`event` is "message": none is
 * named), its `data` one JSON object. In OpenAPI 3.1 the media type's schema describes each event.
 */
export const SPEECH_SSE_EVENT = {
  type: 'object',
  description:
    'One event of the stream (stream_format "sse"): `data: <JSON>` lines, each a speech.audio.delta (with `timestamps: "word"`, ' +
    'speech.word_timestamps between them), then one speech.audio.done (or an error).',
  required: ['data'],
  properties: {
    event: { type: 'string', const: 'message', description: 'No event name is sent: the default, "message".' },
    data: { type: 'string', contentMediaType: 'application/json', contentSchema: SPEECH_EVENT_DATA },
    id: { type: 'string' },
    retry: { type: 'integer' },
  },
};

/** What speech answers, by media type: the audio of each response_format, or server-sent events (stream_format "sse"). */
export const SPEECH_CONTENT = Object.fromEntries([
  ...['audio/wav', 'audio/pcm', 'audio/mpeg', 'audio/ogg', 'audio/aac', 'audio/flac'].map(
    (t) => [t, { schema: { type: 'string', format: 'binary', contentMediaType: t } }] as const,
  ),
  ['text/event-stream', { schema: SPEECH_SSE_EVENT }] as const,
]);

/** The errors speech can answer. */
export const SPEECH_ERRORS: RouteContract['errors'] = {
  400:
    'Invalid request, e.g. blank or too long `input`, a response_format the model does not offer, a `model` of another voice provider ' +
    "than the voice's (`param: model`), or `timestamps` without stream_format sse.",
  402: undefined,
  403: undefined,
  404: 'Unknown model (model_not_found, `param: model`) or voice (voice_not_found, `param: voice`).',
  409: undefined,
  429: undefined,
  502: undefined,
  503: 'No voice provider is configured, or it could not be reached.',
};

const createSpeech = {
  method: 'post',
  path: '/v2/audio/speech',
  operationId: 'createSpeech',
  tag: 'Speech',
  summary: 'Text to speech',
  description:
    'Speaks `input` with `voice` and answers the audio. Charged per character, once the audio is produced; a provider failure charges nothing. ' +
    'With an `Idempotency-Key`, a retry with the same body answers again without a second charge.',
  security: 'apiKey',
  idempotent: true,
  // One variant per speech model of the configured voice provider, with its limits.
  body: { component: 'CreateSpeechBody', schema: CreateSpeechBody, example: speechBodyExample, override: speechBodySchema },
  responses: {
    '200': {
      description:
        'The audio, in `response_format` (wav, pcm, mp3, opus, aac or flac, as the model offers). With `stream_format: "audio"` the bytes are streamed while ' +
        'they are made; with `"sse"`, as `speech.audio.delta` and `speech.audio.done` server-sent events.',
      headers: {
        'Content-Disposition': header('`inline; filename="speech.wav"` (or .pcm).'),
        'X-Speech-Request-Id': header('The speech request id (derived from the Idempotency-Key when given).', {
          type: 'string',
          format: 'uuid',
        }),
        'X-Model': header('The model that spoke.'),
        'X-Characters': header('Characters billed (Unicode code points).', { type: 'integer', minimum: 1 }),
        'X-Cost-In-Euro': header('The charge, in euros.', { type: 'number' }),
        'Idempotent-Replayed': header('`true` when this answers an Idempotency-Key retry (not charged again).', {
          type: 'string',
          const: 'true',
        }),
      },
      content: SPEECH_CONTENT,
    },
  },
  errors: SPEECH_ERRORS,
} satisfies RouteContract;

function createSpeechHandler(deps: { speech: SpeechService }): ContractHandler<typeof createSpeech> {
  return async ({ body, idempotencyKey }, _req, res) => {
    if (body.timestamps !== undefined && body.stream_format !== 'sse') {
      throw invalidParam('timestamps', 'timestamps needs stream_format "sse" (the timings are events of the stream)');
    }
    if (body.stream_format !== undefined) {
      const stream = await deps.speech.speakStream(principalOf(res), body, idempotencyKey);
      sendSpeechStream(res, stream, body.stream_format, {
        'X-Speech-Request-Id': stream.speech_request_id,
        'X-Model': stream.model,
        'X-Characters': String(stream.characters),
        'X-Cost-In-Euro': String(microEurToEur(stream.cost_micro_eur)),
        ...(stream.replayed ? { 'Idempotent-Replayed': 'true' } : {}),
      });
      return;
    }
    const speech = await deps.speech.speak(principalOf(res), body, idempotencyKey);
    res
      .status(200)
      .set({
        'Content-Type': speech.content_type,
        'Content-Disposition': `inline; filename="speech.${body.response_format ?? 'wav'}"`,
        'X-Speech-Request-Id': speech.speech_request_id,
        'X-Model': speech.model,
        'X-Characters': String(speech.characters),
        'X-Cost-In-Euro': String(microEurToEur(speech.cost_micro_eur)),
        ...(speech.replayed ? { 'Idempotent-Replayed': 'true' } : {}),
      })
      .send(speech.audio);
  };
}

const createSpeechToken = {
  method: 'post',
  path: '/v2/audio/speech/tokens',
  operationId: 'createSpeechToken',
  tag: 'Speech',
  summary: 'A token for the speech WebSocket',
  description:
    'A short-lived token that opens the speech WebSocket (`GET /v2/audio/speech/stream?token=...`) as this API key, for a browser, which ' +
    'cannot send an Authorization header on a WebSocket. Good for opening sockets until `expires_at` (SPEECH_TOKEN_TTL_S after it was ' +
    "made), never beyond its key: a revoked key's tokens are refused at once.",
  security: 'apiKey',
  responses: { '201': json(SpeechToken, 'The token.') },
  errors: { 429: undefined, 503: 'No voice provider is configured.' },
} satisfies RouteContract;

/**
 * The speech WebSocket, in the document: the upgrade itself is served by ./speech-socket.ts, on the
 * listener's upgrade requests, before Express; a plain GET of its path reaches this route and is told to
 * upgrade (426).
 */
const openSpeechSocket = {
  method: 'get',
  path: SPEECH_SOCKET_PATH,
  operationId: 'openSpeechSocket',
  tag: 'Speech',
  summary: 'Speech over a WebSocket',
  description:
    'Send this GET as a WebSocket upgrade. Authenticated at the upgrade by the bearer API key or, for a browser, `?token=` from ' +
    '`POST /v2/audio/speech/tokens`. Then JSON text frames: the client sends `{"context_id", "voice", "model"?, "text", "continue"?, "flush"?}` ' +
    'and `{"context_id", "cancel": true}`; the server answers `context`, `audio` (base64 PCM s16le), `word_timestamps`, `done` (the characters ' +
    'charged and their cost) and `error` messages, several contexts at once on one socket. Every character spoken is charged once, held before ' +
    'the provider is called; a socket that drops is charged for what was spoken. Refusals at the upgrade are HTTP answers in the error shape.',
  security: 'apiKey',
  requestParams: {
    query: z.object({
      token: z
        .string()
        .max(SPEECH_TOKEN_CHARS_MAX)
        .optional()
        .describe('A token from POST /v2/audio/speech/tokens, instead of the Authorization header (browsers).'),
    }),
  },
  responses: { '101': { description: 'Switching Protocols: the WebSocket is open.' } },
  errors: {
    426: undefined,
    429: 'Too many sockets of this API key (`too_many_sockets`), or too many failed authentications from this address.',
    503: 'No voice provider is configured.',
  },
} satisfies RouteContract;

export function speechRoutes(deps: {
  auth: RequestHandler;
  limit: RequestHandler;
  speech: SpeechService;
  tokens?: SpeechTokens;
}): ApiRouter {
  const api = new ApiRouter();
  // With no voice provider every request is a 503, whatever its body.
  const configured: RequestHandler = (_req, _res, next) => {
    deps.speech.assertConfigured();
    next();
  };

  api.route(createSpeech, deps.auth, deps.limit, configured, jsonBody, createSpeechHandler(deps));
  api.route(openSpeechSocket, deps.auth, deps.limit, configured, () => {
    throw new ApiError(
      426,
      'invalid_request_error',
      'upgrade_required',
      `${SPEECH_SOCKET_PATH} is a WebSocket: send the request as an upgrade (Connection: Upgrade, Upgrade: websocket)`,
      null,
      // The connection is not kept: some clients cannot reuse one whose last answer named an Upgrade.
      { Upgrade: 'websocket', Connection: 'close' },
    );
  });
  api.route(createSpeechToken, deps.auth, deps.limit, configured, async (_input, _req, res) => {
    if (!deps.tokens) throw new ApiError(503, 'api_error', 'speech_socket_unavailable', 'the speech WebSocket is not served here');
    const { token, expires_at_s } = deps.tokens.issue(principalOf(res));
    res.status(201).json({ object: 'speech.token', token, expires_at: expires_at_s, url_path: SPEECH_SOCKET_PATH });
  });

  return api;
}
