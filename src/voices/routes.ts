// POST/GET /v2/audio/voices, GET/DELETE /v2/audio/voices/{id}. Each operation's contract, then its
// handler: parse, call the service, present. Clone uploads are multipart: one `name` and one or more
// `file` parts, held in memory, each file recognised as audio by its content.
import type { RequestHandler } from 'express';
import { z, type ZodError } from 'zod';
import { principalOf } from '../http/auth.js';
import { ApiError, invalidParam } from '../errors.js';
import { multipartForm, type MultipartForm, type MultipartLimits, type UploadedFile } from '../http/multipart.js';
import { text } from '../zod-text.js';
import { AUDIO_CONTENT_TYPES, SNIFF_BYTES, sniffAudio, type AudioFormat } from '../media/audio-sniff.js';
import type { VoiceRecord, VoicesService } from './service.js';
import { ApiRouter, bytesText, json, type RouteContract } from '../http/openapi.js';
import { Voice, VoiceDeleted, VoiceList, VoiceProviderName } from './schemas.js';
import type { VoiceConsentsService } from './consents.js';

const MiB = 1024 * 1024;

export const VOICE_NAME_CHARS_MAX = 100;

export const VOICE_UPLOAD_LIMITS: MultipartLimits = {
  filesMax: 10,
  fileBytesMax: 10 * MiB,
  totalFileBytesMax: 25 * MiB,
  fieldsMax: 10,
  partsMax: 20,
  fieldBytesMax: 1024,
  partNameBytesMax: 100,
  // at most 8 x 25 MiB of uploads held in memory by one API process
  concurrentRequestsMax: 8,
};

export function presentVoice(v: VoiceRecord) {
  return {
    id: v.id,
    object: 'voice' as const,
    voice_id: v.voice_id,
    name: v.name,
    requires_verification: v.requires_verification,
    provider: v.provider,
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
export const VoiceName = text({ chars_max: VOICE_NAME_CHARS_MAX, notBlank: true, noControl: true })
  .trim()
  .describe(
    `The voice's name: one text part, not blank, at most ${VOICE_NAME_CHARS_MAX} characters, no control ` +
      `characters; leading and trailing white space is removed.`,
  );

/**
 * The multipart form of POST /v2/audio/voices. Documentation only: multipart bodies are parsed by
 * ../http/multipart.ts, not zod, so this is built from the limits that parser enforces (VOICE_UPLOAD_LIMITS);
 * the contract validates the parsed parts with CreateVoiceParts.
 */
export const CreateVoiceForm = z
  .strictObject({
    name: VoiceName,
    file: z
      .array(z.file().min(1).max(VOICE_UPLOAD_LIMITS.fileBytesMax))
      .min(1)
      .max(VOICE_UPLOAD_LIMITS.filesMax)
      .describe(
        `Audio samples of the voice, one file per "file" part: 1 to ${VOICE_UPLOAD_LIMITS.filesMax} files, each at most ` +
          `${bytesText(VOICE_UPLOAD_LIMITS.fileBytesMax)}, together at most ${bytesText(VOICE_UPLOAD_LIMITS.totalFileBytesMax)}. ` +
          `Recognised by content (the part's Content-Type is not trusted): ${Object.values(AUDIO_CONTENT_TYPES).join(', ')}.`,
      ),
    consent: z
      .string()
      .max(64)
      .optional()
      .describe(
        'The id of a voice consent of this workspace (POST /v1/audio/voice_consents); required when the operator sets VOICE_CONSENT_REQUIRED.',
      ),
    provider: VoiceProviderName.optional(),
  })
  .describe(
    'multipart/form-data: one "name" part, one or more "file" parts, an optional "consent" and an optional "provider" part; no other parts.',
  );

/**
 * The form as the handler takes it: the parts named, then `name` validated. The file parts' size and
 * type are the multipart parser's (../http/multipart.ts); `consent` is looked up by the clone.
 */
const CreateVoiceParts = {
  schema: z.object({
    name: VoiceName,
    file: z.array(z.custom<UploadedFile>()).min(1),
    consent: z.string().optional(),
    provider: VoiceProviderName.optional(),
  }),
  input: (form: MultipartForm) => ({
    name: form.fields.get('name'),
    file: form.files,
    consent: form.fields.get('consent'),
    provider: form.fields.get('provider'),
  }),
  invalid: (err: ZodError, input: Record<string, unknown>) => {
    const missing = [
      ...(input['name'] === undefined ? ['name'] : []),
      ...(Array.isArray(input['file']) && input['file'].length === 0 ? ['file'] : []),
    ];
    if (missing.length > 0) return missingParts(missing);
    const issue = err.issues[0]!;
    const param = issue.path[0] === 'provider' ? 'provider' : 'name';
    return invalidParam(param, `${param} ${issue.message}`);
  },
};

export const VOICE_503 =
  'No voice provider is configured (provider_not_configured), the provider could not be reached ' +
  '(provider_unavailable), or too many uploads are in progress (server_busy).';
const NO_VOICE = 'No such voice in this workspace (voice_not_found).';

const createVoice = {
  method: 'post',
  path: '/v2/audio/voices',
  operationId: 'createVoice',
  tag: 'Voices',
  summary: 'Clone a voice',
  description: 'Clones a voice from audio samples. The voice is visible and usable only from this workspace.',
  security: 'apiKey',
  body: {
    component: 'CreateVoiceForm',
    schema: CreateVoiceForm,
    mediaType: 'multipart/form-data',
    parts: CreateVoiceParts,
    description: `multipart/form-data with a boundary; at most ${VOICE_UPLOAD_LIMITS.partsMax} parts.`,
    encoding: { file: { contentType: Object.values(AUDIO_CONTENT_TYPES).join(', ') } },
  },
  responses: { '200': json(Voice, 'The new voice.') },
  errors: {
    400:
      'Invalid form: a missing, repeated or unknown part, a blank name, an empty file, too many files, a ' +
      'malformed or truncated body, or the workspace already holds its maximum of voices.',
    413:
      `A file above ${bytesText(VOICE_UPLOAD_LIMITS.fileBytesMax)} (file_too_large), the files together ` +
      `above ${bytesText(VOICE_UPLOAD_LIMITS.totalFileBytesMax)} (upload_too_large), or the declared body ` +
      `too large (request_too_large).`,
    415: 'Not multipart/form-data (unsupported_media_type), or a file that is not recognised as audio (unsupported_file_type, `param: file`).',
    429: undefined,
    503: VOICE_503,
  },
} satisfies RouteContract;

const listVoices = {
  method: 'get',
  path: '/v2/audio/voices',
  operationId: 'listVoices',
  tag: 'Voices',
  summary: "List this workspace's voices",
  security: 'apiKey',
  responses: { '200': json(VoiceList, 'The voices, newest first.') },
  errors: { 503: VOICE_503 },
} satisfies RouteContract;

const getVoice = {
  method: 'get',
  path: '/v2/audio/voices/{id}',
  operationId: 'getVoice',
  tag: 'Voices',
  summary: 'Get a voice',
  security: 'apiKey',
  requestParams: { path: z.object({ id: z.string().describe('The voice registry id (`id` of the voice, not its `voice_id`).') }) },
  responses: { '200': json(Voice, 'The voice.') },
  errors: { 404: NO_VOICE, 503: VOICE_503 },
} satisfies RouteContract;

const deleteVoice = {
  method: 'delete',
  path: '/v2/audio/voices/{id}',
  operationId: 'deleteVoice',
  tag: 'Voices',
  summary: 'Delete a voice',
  description: 'Removes the voice from the registry now and from the provider durably.',
  security: 'apiKey',
  requestParams: { path: z.object({ id: z.string().describe('The voice registry id.') }) },
  responses: { '200': json(VoiceDeleted, 'Deleted.') },
  errors: {
    404: NO_VOICE,
    429: undefined,
    503: 'No voice provider is configured, or the deletion could not be started (temporarily_unavailable); nothing changed.',
  },
} satisfies RouteContract;

export function voiceRoutes(deps: {
  auth: RequestHandler;
  limit: RequestHandler;
  voices: VoicesService;
  consents?: VoiceConsentsService;
}): ApiRouter {
  const api = new ApiRouter();
  // Checked before the body is read: with no provider, an upload is refused unread.
  const configured: RequestHandler = (_req, _res, next) => {
    deps.voices.assertConfigured();
    next();
  };
  const upload = multipartForm({
    limits: VOICE_UPLOAD_LIMITS,
    fileParts: ['file'],
    fieldParts: ['name', 'consent', 'provider'],
    fileType: { headBytes: SNIFF_BYTES, detect: sniffAudio, expected: 'an audio file (WAV, MP3, AAC, FLAC, Ogg, M4A or WebM)' },
  });

  api.route(createVoice, deps.auth, deps.limit, configured, upload, async (input, _req, res) => {
    const { name, file, consent, provider } = input.body;
    const samples = file.map((f) => {
      const format = f.type as AudioFormat;
      return { filename: f.filename, format, content_type: AUDIO_CONTENT_TYPES[format], data: f.buffer };
    });
    // `consent`: the id of a voice consent of this workspace (POST /v1/audio/voice_consents).
    const consent_id = deps.consents ? await deps.consents.forClone(principalOf(res), consent) : null;
    const voice = await deps.voices.create(principalOf(res), { name, samples, consent_id, provider });
    res.json(presentVoice(voice));
  });

  api.route(listVoices, deps.auth, configured, async (_input, _req, res) => {
    const voices = await deps.voices.list(principalOf(res));
    res.json({ object: 'list', data: voices.map(presentVoice) });
  });

  api.route(getVoice, deps.auth, configured, async (input, _req, res) => {
    res.json(presentVoice(await deps.voices.get(principalOf(res), input.params.id)));
  });

  api.route(deleteVoice, deps.auth, deps.limit, configured, async (input, _req, res) => {
    const { id } = await deps.voices.delete(principalOf(res), input.params.id);
    res.json({ id, object: 'voice', deleted: true });
  });

  return api;
}
