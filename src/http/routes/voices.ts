// POST/GET /v2/audio/voices, GET/DELETE /v2/audio/voices/{id}: parse, call the service, present.
// Clone uploads are multipart: one `name` and one or more `file` parts, held in memory, each file
// recognised as audio by its content.
import { Router, type RequestHandler } from 'express';
import { principalOf } from '../auth.js';
import { ApiError, invalidParam } from '../errors.js';
import { multipartForm, multipartOf, type MultipartLimits } from '../multipart.js';
import { text } from '../../zod-text.js';
import { AUDIO_CONTENT_TYPES, SNIFF_BYTES, sniffAudio, type AudioFormat } from '../../media/audio-sniff.js';
import type { VoiceRecord, VoicesService } from '../../services/voices.js';
import type { VoiceConsentsService } from '../../services/voice-consents.js';

const MiB = 1024 * 1024;

export const VOICE_NAME_MAX_CHARS = 100;

export const VOICE_UPLOAD_LIMITS: MultipartLimits = {
  maxFiles: 10,
  maxFileBytes: 10 * MiB,
  maxTotalFileBytes: 25 * MiB,
  maxFields: 10,
  maxParts: 20,
  maxFieldBytes: 1024,
  maxPartNameBytes: 100,
  // at most 8 x 25 MiB of uploads held in memory by one API process
  maxConcurrentRequests: 8,
};

export function presentVoice(v: VoiceRecord) {
  return {
    id: v.id,
    object: 'voice' as const,
    voice_id: v.voice_id,
    name: v.name,
    requires_verification: v.requires_verification,
    created: Math.floor(v.created_at_ms / 1000),
  };
}

const missingParts = (parts: string[]) =>
  new ApiError(
    400,
    'invalid_request_error',
    'missing_parameter',
    `missing required part${parts.length > 1 ? 's' : ''}: ${parts.join(', ')} (multipart/form-data with a "name" and one or more "file" parts)`,
    parts[0]!,
  );

/** The `name` part: validated as sent (the OpenAPI document states the same), then trimmed. */
export const VoiceName = text({ max_chars: VOICE_NAME_MAX_CHARS, notBlank: true, noControl: true })
  .trim()
  .describe(`The voice's name: one text part, not blank, at most ${VOICE_NAME_MAX_CHARS} characters, no control characters; leading and trailing white space is removed.`);

function parseName(raw: string): string {
  const name = VoiceName.safeParse(raw);
  if (!name.success) throw invalidParam('name', `name ${name.error.issues[0]!.message}`);
  return name.data;
}

export function voiceRoutes(deps: { auth: RequestHandler; limit: RequestHandler; voices: VoicesService; consents?: VoiceConsentsService }): Router {
  const r = Router();
  // Checked before the body is read: with no provider, an upload is refused unread.
  const configured: RequestHandler = (_req, _res, next) => {
    deps.voices.assertConfigured();
    next();
  };
  const upload = multipartForm({
    limits: VOICE_UPLOAD_LIMITS,
    fileParts: ['file'],
    fieldParts: ['name', 'consent'],
    fileType: { headBytes: SNIFF_BYTES, detect: sniffAudio, expected: 'an audio file (WAV, MP3, AAC, FLAC, Ogg, M4A or WebM)' },
  });

  r.post('/v2/audio/voices', deps.auth, deps.limit, configured, upload, async (_req, res) => {
    const form = multipartOf(res);
    const rawName = form.fields.get('name');
    const missing = [...(rawName === undefined ? ['name'] : []), ...(form.files.length === 0 ? ['file'] : [])];
    if (missing.length > 0) throw missingParts(missing);
    const name = parseName(rawName!);
    const samples = form.files.map((f) => {
      const format = f.type as AudioFormat;
      return { filename: f.filename, format, content_type: AUDIO_CONTENT_TYPES[format], data: f.buffer };
    });
    // `consent`: the id of a voice consent of this workspace (POST /v1/audio/voice_consents).
    const consent_id = deps.consents ? await deps.consents.forClone(principalOf(res), form.fields.get('consent')) : null;
    const voice = await deps.voices.create(principalOf(res), { name, samples, consent_id });
    res.json(presentVoice(voice));
  });

  r.get('/v2/audio/voices', deps.auth, configured, async (_req, res) => {
    const voices = await deps.voices.list(principalOf(res));
    res.json({ object: 'list', data: voices.map(presentVoice) });
  });

  r.get('/v2/audio/voices/:id', deps.auth, configured, async (req, res) => {
    res.json(presentVoice(await deps.voices.get(principalOf(res), String(req.params['id']))));
  });

  r.delete('/v2/audio/voices/:id', deps.auth, deps.limit, configured, async (req, res) => {
    const { id } = await deps.voices.delete(principalOf(res), String(req.params['id']));
    res.json({ id, object: 'voice', deleted: true });
  });

  return r;
}
