// POST /v1/audio/speech (client.audio.speech.create): OpenAI's request over the service's speech.
// `voice` is a preset voice of the provider or a cloned voice's id (a string, or {"id": ...});
// `response_format` defaults to mp3 as OpenAI's does; `instructions` is accepted and passed to no
// provider, since neither the simulator nor ElevenLabs takes instructions; `stream_format` "audio"
// streams the bytes as they are made and "sse" sends speech.audio.delta / speech.audio.done events.
// Without stream_format the answer is one complete file. Charged exactly as /v2/audio/speech.
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { CreateSpeechBody } from './schemas.js';
import { jsonBody } from '../http/json-body.js';
import { principalOf } from '../http/auth.js';
import type { SpeechService } from './speech.js';
import { sendSpeechStream } from './speech-stream.js';
import { ApiRouter, type RouteContract } from '../http/openapi.js';
import { speechBodyExample, speechBodySchema } from '../models/openapi-bodies.js';
import { SPEECH_CONTENT, SPEECH_ERRORS } from './speech-routes.js';
import { INSUFFICIENT_CREDITS_402, OPENAI_OPERATION } from '../http/openai/errors.js';

export const INSTRUCTIONS_CHARS_MAX = 4_096;

export const OpenAiSpeechBody = CreateSpeechBody.omit({ timestamps: true })
  .extend({
    voice: z.union([CreateSpeechBody.shape.voice, z.strictObject({ id: CreateSpeechBody.shape.voice })]),
    instructions: z
      .string()
      .max(INSTRUCTIONS_CHARS_MAX)
      .optional()
      .describe('Accepted; no configured provider takes instructions, so they do not change the speech.'),
    response_format: CreateSpeechBody.shape.response_format.describe(
      'mp3 (default); opus (in Ogg); aac (ADTS); flac; wav: a RIFF WAVE file; pcm: raw signed 16-bit little-endian mono samples.',
    ),
  })
  .strict();

const openaiCreateSpeech = {
  method: 'post',
  path: '/v1/audio/speech',
  operationId: 'openaiCreateSpeech',
  summary: 'Text to speech (client.audio.speech.create)',
  description:
    'Speaks `input` with `voice` (a preset voice of the provider or the id of a cloned voice, as a string or `{"id": ...}`) and answers the audio; ' +
    'charged per character as POST /v2/audio/speech, once the audio is produced. With an ' +
    '`Idempotency-Key`, a retry with the same body answers again without a second charge.',
  ...OPENAI_OPERATION,
  idempotent: true,
  // One variant per speech model of the configured voice provider, with its limits.
  body: {
    component: 'OpenAiSpeechBody',
    schema: OpenAiSpeechBody,
    example: (ctx) => {
      const example = speechBodyExample(ctx);
      return example && { ...example, response_format: 'mp3' };
    },
    override: speechBodySchema,
  },
  responses: {
    '200': {
      description:
        'The audio, in `response_format` (mp3 unless asked otherwise). With `stream_format: "audio"` the ' +
        'bytes are streamed while they are made; with `"sse"`, ' +
        'as `speech.audio.delta` (base64 audio) and `speech.audio.done` server-sent events.',
      content: SPEECH_CONTENT,
    },
  },
  errors: { ...SPEECH_ERRORS, 402: INSUFFICIENT_CREDITS_402 },
} satisfies RouteContract;

export function openAiSpeechRoutes(deps: { auth: RequestHandler; limit: RequestHandler; speech: SpeechService }): ApiRouter {
  const api = new ApiRouter();
  const configured: RequestHandler = (_req, _res, next) => {
    deps.speech.assertConfigured();
    next();
  };
  api.route(
    openaiCreateSpeech,

    deps.auth,
    deps.limit,
    configured,
    jsonBody,
    async (input, _req, res) => {
      const { instructions: _ignored, voice, ...rest } = input.body;
      const body = { ...rest, voice: typeof voice === 'string' ? voice : voice.id, response_format: rest.response_format ?? 'mp3' };
      const idempotencyKey = input.idempotencyKey;
      if (body.stream_format !== undefined) {
        const stream = await deps.speech.speakStream(principalOf(res), body, idempotencyKey);
        sendSpeechStream(res, stream, body.stream_format, {});
        return;
      }
      const speech = await deps.speech.speak(principalOf(res), body, idempotencyKey);
      res.status(200).set({ 'Content-Type': speech.content_type }).send(speech.audio);
    },
  );
  return api;
}
