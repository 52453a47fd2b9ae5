// Custom voices with consent (client.audio.voiceConsents.*, client.audio.voices.*):
//
//   POST   /v1/audio/voice_consents        multipart: recording (audio), name, language (BCP 47) -> audio.voice_consent
//   GET    /v1/audio/voice_consents        cursor list (after, limit)
//   GET    /v1/audio/voice_consents/{id}   -> audio.voice_consent
//   POST   /v1/audio/voice_consents/{id}   JSON {name}                                          -> audio.voice_consent
//   DELETE /v1/audio/voice_consents/{id}   -> {id, object: "audio.voice_consent", deleted: true}
//   POST   /v1/audio/voices                multipart: name, audio_sample (audio), consent        -> audio.voice
//   DELETE /v1/audio/voices/{id}           -> {id, object: "audio.voice.deleted", deleted: true}
//
// A voice's `id` is the voice_id /v2 reports, usable as `voice` in speech on /v1 and /v2. Voices are the
// registry of /v2/audio/voices (same limits, same durable deletion); a voice made from a text prompt is
// not offered.
import { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import { principalOf } from '../auth.js';
import { ApiError, fromZodError, invalidParam } from '../../errors.js';
import { jsonBody } from '../json-body.js';
import { multipartForm, multipartOf } from '../multipart.js';
import { LIST_LIMIT_MAX } from '../schemas.js';
import { AUDIO_CONTENT_TYPES, SNIFF_BYTES, sniffAudio, type AudioFormat } from '../../media/audio-sniff.js';
import type { VoicesService } from '../../services/voices.js';
import type { VoiceConsentRecord, VoiceConsentsService } from '../../services/voice-consents.js';
import { VOICE_UPLOAD_LIMITS, VoiceName } from '../routes/voices.js';

/** A BCP 47 language tag, as far as its shape goes: "en", "en-US", "zh-Hant-TW". */
export const LanguageTag = z.string().regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,4}$/, 'must be a BCP 47 language tag such as en or en-US').max(35);

export const presentConsent = (c: VoiceConsentRecord) => ({
  id: c.id,
  object: 'audio.voice_consent' as const,
  name: c.name,
  language: c.language,
  created_at: Math.floor(c.created_at_ms / 1000),
});

const missing = (part: string) => new ApiError(400, 'invalid_request_error', 'missing_parameter', `missing required part: ${part}`, part);
const audioCheck = { headBytes: SNIFF_BYTES, detect: sniffAudio, expected: 'an audio file (WAV, MP3, AAC, FLAC, Ogg, M4A or WebM)' };

function field(fields: Map<string, string>, part: string, schema: z.ZodType<string>): string {
  const raw = fields.get(part);
  if (raw === undefined) throw missing(part);
  const v = schema.safeParse(raw);
  if (!v.success) throw invalidParam(part, `${part} ${v.error.issues[0]!.message}`);
  return v.data;
}

const ListQuery = z.strictObject({ after: z.string().max(100).optional(), limit: z.coerce.number().int().min(1).max(LIST_LIMIT_MAX).default(20) });

export function openAiVoiceRoutes(deps: { auth: RequestHandler; limit: RequestHandler; voices: VoicesService; consents: VoiceConsentsService }): Router {
  const r = Router();
  const configured: RequestHandler = (_req, _res, next) => {
    deps.voices.assertConfigured();
    next();
  };
  const consentUpload = multipartForm({ limits: { ...VOICE_UPLOAD_LIMITS, maxFiles: 1 }, fileParts: ['recording'], fieldParts: ['name', 'language'], fileType: audioCheck });
  const voiceUpload = multipartForm({ limits: { ...VOICE_UPLOAD_LIMITS, maxFiles: 1 }, fileParts: ['audio_sample'], fieldParts: ['name', 'consent', 'type'], fileType: audioCheck });

  r.post('/audio/voice_consents', deps.auth, deps.limit, consentUpload, async (_req, res) => {
    const form = multipartOf(res);
    const name = field(form.fields, 'name', VoiceName);
    const language = field(form.fields, 'language', LanguageTag);
    const recording = form.files[0];
    if (!recording) throw missing('recording');
    const consent = await deps.consents.create(principalOf(res), { name, language, recording: recording.buffer, extension: recording.type });
    res.json(presentConsent(consent));
  });

  r.get('/audio/voice_consents', deps.auth, async (req, res) => {
    const q = ListQuery.safeParse(req.query);
    if (!q.success) throw fromZodError(q.error);
    const page = await deps.consents.list(principalOf(res), q.data);
    const data = page.data.map(presentConsent);
    res.json({ object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: page.has_more });
  });

  r.get('/audio/voice_consents/:id', deps.auth, async (req, res) => {
    res.json(presentConsent(await deps.consents.get(principalOf(res), String(req.params['id']))));
  });

  r.post('/audio/voice_consents/:id', deps.auth, deps.limit, jsonBody, async (req, res) => {
    const body = z.strictObject({ name: VoiceName }).safeParse(req.body ?? {});
    if (!body.success) throw fromZodError(body.error);
    res.json(presentConsent(await deps.consents.rename(principalOf(res), String(req.params['id']), body.data.name)));
  });

  r.delete('/audio/voice_consents/:id', deps.auth, deps.limit, async (req, res) => {
    const id = String(req.params['id']);
    await deps.consents.delete(principalOf(res), id);
    res.json({ id, object: 'audio.voice_consent', deleted: true });
  });

  r.post('/audio/voices', deps.auth, deps.limit, configured, voiceUpload, async (_req, res) => {
    const form = multipartOf(res);
    const type = form.fields.get('type');
    if (type !== undefined && type !== 'audio_sample') throw invalidParam('type', 'only voices from an audio_sample are offered (a voice from a text prompt is not)', 'unsupported_parameter');
    const name = field(form.fields, 'name', VoiceName);
    const sample = form.files[0];
    if (!sample) throw missing('audio_sample');
    const principal = principalOf(res);
    const consent = form.fields.get('consent');
    if (consent === undefined) throw missing('consent');
    const consent_id = await deps.consents.forClone(principal, consent);
    const format = sample.type as AudioFormat;
    const voice = await deps.voices.create(principal, {
      name,
      samples: [{ filename: sample.filename, format, content_type: AUDIO_CONTENT_TYPES[format], data: sample.buffer }],
      consent_id,
    });
    res.json({ id: voice.voice_id, object: 'audio.voice', name: voice.name, type: 'audio_sample', created_at: Math.floor(voice.created_at_ms / 1000) });
  });

  r.delete('/audio/voices/:id', deps.auth, deps.limit, configured, async (req, res) => {
    const id = String(req.params['id']);
    const principal = principalOf(res);
    const registryId = await deps.consents.registryIdOf(principal, id);
    if (!registryId) throw new ApiError(404, 'not_found_error', 'voice_not_found', `no voice ${id}`, 'voice_id');
    await deps.voices.delete(principal, registryId);
    res.json({ id, object: 'audio.voice.deleted', deleted: true });
  });

  return r;
}
