// POST /v2/audio/speech: JSON in, audio bytes out (charged once delivered; see services/speech.ts).
import { Router, type RequestHandler } from 'express';
import { CreateSpeechBody, idempotencyKeyOf } from '../schemas.js';
import { jsonBody } from '../json-body.js';
import { principalOf } from '../auth.js';
import { microEurToEur } from '../../money.js';
import type { SpeechService } from '../../services/speech.js';
import { sendSpeechStream } from '../speech-stream.js';


export function speechRoutes(deps: { auth: RequestHandler; limit: RequestHandler; speech: SpeechService }): Router {
  const r = Router();
  // With no voice provider every request is a 503, whatever its body.
  const configured: RequestHandler = (_req, _res, next) => {
    deps.speech.assertConfigured();
    next();
  };

  r.post('/v2/audio/speech', deps.auth, deps.limit, configured, jsonBody, async (req, res) => {
    const body = CreateSpeechBody.parse(req.body);
    const idempotencyKey = idempotencyKeyOf(req);
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
  });

  return r;
}
