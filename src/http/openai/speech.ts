// POST /v1/audio/speech (client.audio.speech.create): OpenAI's request over the service's speech.
// `voice` is a preset voice of the provider or a cloned voice's id (a string, or {"id": ...});
// `response_format` defaults to mp3 as OpenAI's does; `instructions` is accepted and passed to no
// provider, since neither the simulator nor ElevenLabs takes instructions; `stream_format` "audio"
// streams the bytes as they are made and "sse" sends speech.audio.delta / speech.audio.done events.
// Without stream_format the answer is one complete file. Charged exactly as /v2/audio/speech.
import { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import { CreateSpeechBody, idempotencyKeyOf } from '../schemas.js';
import { fromZodError } from '../../errors.js';
import { jsonBody } from '../json-body.js';
import { principalOf } from '../auth.js';
import type { SpeechService } from '../../services/speech.js';
import { sendSpeechStream } from '../speech-stream.js';

export const INSTRUCTIONS_MAX_CHARS = 4_096;

export const OpenAiSpeechBody = CreateSpeechBody.extend({
  voice: z.union([CreateSpeechBody.shape.voice, z.strictObject({ id: CreateSpeechBody.shape.voice })]),
  instructions: z.string().max(INSTRUCTIONS_MAX_CHARS).optional().describe('Accepted; no configured provider takes instructions, so they do not change the speech.'),
}).strict();

export function openAiSpeechRoutes(deps: { auth: RequestHandler; limit: RequestHandler; speech: SpeechService }): Router {
  const r = Router();
  const configured: RequestHandler = (_req, _res, next) => {
    deps.speech.assertConfigured();
    next();
  };
  r.post('/audio/speech', deps.auth, deps.limit, configured, jsonBody, async (req, res) => {
    const parsed = OpenAiSpeechBody.safeParse(req.body);
    if (!parsed.success) throw fromZodError(parsed.error);
    const { instructions: _ignored, voice, ...rest } = parsed.data;
    const body = { ...rest, voice: typeof voice === 'string' ? voice : voice.id, response_format: rest.response_format ?? 'mp3' };
    const idempotencyKey = idempotencyKeyOf(req);
    if (body.stream_format !== undefined) {
      const stream = await deps.speech.speakStream(principalOf(res), body, idempotencyKey);
      sendSpeechStream(res, stream, body.stream_format, {});
      return;
    }
    const speech = await deps.speech.speak(principalOf(res), body, idempotencyKey);
    res.status(200).set({ 'Content-Type': speech.content_type }).send(speech.audio);
  });
  return r;
}
