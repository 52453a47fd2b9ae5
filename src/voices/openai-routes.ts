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
// not offered. Each operation's contract sits above its handlers (../http/openapi.ts).
import type { RequestHandler } from 'express';
import { z, type ZodError } from 'zod';
import { principalOf } from '../http/auth.js';
import { ApiError, invalidParam } from '../errors.js';
import { jsonBody } from '../http/json-body.js';
import { multipartForm, partRefused, type MultipartForm, type UploadedFile } from '../http/multipart.js';
import { LIST_LIMIT_MAX } from '../http/schemas.js';
import { AUDIO_CONTENT_TYPES, SNIFF_BYTES, sniffAudio, type AudioFormat } from '../media/audio-sniff.js';
import type { VoicesService } from './service.js';
import type { VoiceConsentRecord, VoiceConsentsService } from './consents.js';
import { VOICE_503, VOICE_UPLOAD_LIMITS, VoiceName } from './routes.js';
import { ApiRouter, bytesText, json, type ContractHandler, type MultipartParts, type RouteContract } from '../http/openapi.js';
import { OPENAI_OPERATION } from '../http/openai/errors.js';
import { OpenAiVoice, OpenAiVoiceDeleted, VoiceConsent, VoiceConsentDeleted, VoiceConsentList } from './openai-schemas.js';
import { openAiPage } from '../http/openai/page.js';

/** A BCP 47 language tag, as far as its shape goes: "en", "en-US", "zh-Hant-TW". */
export const LanguageTag = z
  .string()
  .regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,4}$/, 'must be a BCP 47 language tag such as en or en-US')
  .max(35);

export const presentConsent = (c: VoiceConsentRecord) => ({
  id: c.id,
  object: 'audio.voice_consent' as const,
  name: c.name,
  language: c.language,
  created_at: Math.floor(c.created_at_ms / 1000),
});

const audioCheck = { headBytes: SNIFF_BYTES, detect: sniffAudio, expected: 'an audio file (WAV, MP3, AAC, FLAC, Ogg, M4A or WebM)' };

/** An uploaded file part, required: absent, it is a missing part. */
const filePart = z.custom<UploadedFile>((v) => v !== undefined);

const ListQuery = z.strictObject({
  after: z.string().max(100).optional(),
  limit: z.coerce.number().int().min(1).max(LIST_LIMIT_MAX).default(20),
});
export const UpdateVoiceConsentBody = z.strictObject({ name: VoiceName });

// The multipart forms, for the OpenAPI document: multipart bodies are parsed by ../http/multipart.ts, and
// their parts then validated with the same schemas (each contract's `parts`).
const AUDIO_FILE = z
  .file()
  .min(1)
  .max(VOICE_UPLOAD_LIMITS.fileBytesMax)
  .describe(
    `At most ${bytesText(VOICE_UPLOAD_LIMITS.fileBytesMax)}, recognised as audio by its content (the ` +
      `part's Content-Type is not trusted): ${Object.values(AUDIO_CONTENT_TYPES).join(', ')}.`,
  );
/** An upload form of one audio file, in the part `filePart`, as a request body of the document. */
const audioForm = <P extends MultipartParts>(component: string, schema: z.ZodType, filePart: string, parts: P) => ({
  component,
  schema,
  mediaType: 'multipart/form-data' as const,
  parts,
  description: `multipart/form-data with a boundary; at most ${VOICE_UPLOAD_LIMITS.partsMax} parts.`,
  encoding: { [filePart]: { contentType: Object.values(AUDIO_CONTENT_TYPES).join(', ') } },
});
export const CreateVoiceConsentForm = z
  .strictObject({
    recording: AUDIO_FILE,
    name: VoiceName,
    language: LanguageTag.describe('The language of the recording, a BCP 47 tag such as en or en-US.'),
  })
  .describe(
    'multipart/form-data: the file part "recording" (the owner of the voice consenting to its cloning) and the text parts "name" and "language".',
  );
export const CreateOpenAiVoiceForm = z
  .strictObject({
    name: VoiceName,
    audio_sample: AUDIO_FILE,
    consent: z
      .string()
      .max(VOICE_UPLOAD_LIMITS.fieldBytesMax)
      .describe('The id of a voice consent of this workspace (POST /v1/audio/voice_consents).'),
    type: z.literal('audio_sample').optional().describe('Only voices from an audio sample are offered.'),
  })
  .describe('multipart/form-data: the text parts "name" and "consent", the file part "audio_sample", and optionally "type".');

const upload413 = `The file exceeds ${bytesText(VOICE_UPLOAD_LIMITS.fileBytesMax)} (file_too_large), or the declared body is too large (request_too_large).`;
const upload415 = 'Not multipart/form-data (unsupported_media_type), or a file that is not recognised as audio (unsupported_file_type).';

/** The consent form's parts, in the order they are checked. */
const CreateVoiceConsentParts = {
  schema: z.object({ name: VoiceName, language: LanguageTag, recording: filePart }),
  input: (form: MultipartForm) => ({ name: form.fields.get('name'), language: form.fields.get('language'), recording: form.files[0] }),
  invalid: partRefused,
};
/** The clone form's parts, in the order they are checked: only a voice from an audio sample is offered. */
const CreateOpenAiVoiceParts = {
  schema: z.object({ type: z.literal('audio_sample').optional(), name: VoiceName, audio_sample: filePart, consent: z.string() }),
  input: (form: MultipartForm) => ({
    type: form.fields.get('type'),
    name: form.fields.get('name'),
    audio_sample: form.files[0],
    consent: form.fields.get('consent'),
  }),
  invalid: (err: ZodError, input: Record<string, unknown>) =>
    err.issues[0]!.path[0] === 'type'
      ? invalidParam('type', 'only voices from an audio_sample are offered (a voice from a text prompt is not)', 'unsupported_parameter')
      : partRefused(err, input),
};

const CONSENT_ID = z.object({ id: z.string().describe('The consent id (cons_...).') });
const NO_CONSENT = 'No such consent in this workspace (consent_not_found).';

const openaiCreateVoiceConsent = {
  method: 'post',
  path: '/v1/audio/voice_consents',
  operationId: 'openaiCreateVoiceConsent',
  summary: 'Upload a voice consent (client.audio.voiceConsents.create)',
  description:
    "Stores the recording in which the owner of a voice consents to its cloning; a clone names it in its `consent` part. The consent is this workspace's own.",
  ...OPENAI_OPERATION,
  body: audioForm('CreateVoiceConsentForm', CreateVoiceConsentForm, 'recording', CreateVoiceConsentParts),
  responses: { '200': json(VoiceConsent, 'The consent.') },
  errors: {
    400:
      'A missing, repeated or unknown part, a blank name, a language that is not a BCP 47 tag, or the ' +
      'workspace already holds its maximum of consents; `error.param` names the part.',
    413: upload413,
    415: upload415,
    429: undefined,
    503: 'Too many uploads are in progress (server_busy).',
  },
} satisfies RouteContract;

const openaiListVoiceConsents = {
  method: 'get',
  path: '/v1/audio/voice_consents',
  operationId: 'openaiListVoiceConsents',
  summary: "List this workspace's voice consents (client.audio.voiceConsents.list)",
  description: "Newest first, a page at a time (the SDKs' auto-paging iterator follows `last_id` while `has_more`).",
  ...OPENAI_OPERATION,
  requestParams: { query: ListQuery },
  responses: { '200': json(VoiceConsentList, 'A page of consents.') },
  errors: {
    400: 'Invalid `limit` (1 to 100) or an unknown parameter; `error.param` names it.',
    404: '`after` names no consent of this workspace (consent_not_found, `param: after`).',
  },
} satisfies RouteContract;

const openaiRetrieveVoiceConsent = {
  method: 'get',
  path: '/v1/audio/voice_consents/{id}',
  operationId: 'openaiRetrieveVoiceConsent',
  summary: 'Retrieve a voice consent (client.audio.voiceConsents.retrieve)',
  ...OPENAI_OPERATION,
  requestParams: { path: CONSENT_ID },
  responses: { '200': json(VoiceConsent, 'The consent.') },
  errors: { 404: NO_CONSENT },
} satisfies RouteContract;

const openaiUpdateVoiceConsent = {
  method: 'post',
  path: '/v1/audio/voice_consents/{id}',
  operationId: 'openaiUpdateVoiceConsent',
  summary: 'Rename a voice consent (client.audio.voiceConsents.update)',
  ...OPENAI_OPERATION,
  requestParams: { path: CONSENT_ID },
  body: { component: 'UpdateVoiceConsentBody', schema: UpdateVoiceConsentBody, example: { name: 'Ada Lovelace' } },
  responses: { '200': json(VoiceConsent, 'The consent, renamed.') },
  errors: { 400: 'A blank or too long `name`, or an unknown field.', 404: NO_CONSENT, 429: undefined },
} satisfies RouteContract;

const openaiDeleteVoiceConsent = {
  method: 'delete',
  path: '/v1/audio/voice_consents/{id}',
  operationId: 'openaiDeleteVoiceConsent',
  summary: 'Delete a voice consent (client.audio.voiceConsents.delete)',
  description: 'No new clone may name it; voices already cloned with it keep it.',
  ...OPENAI_OPERATION,
  requestParams: { path: CONSENT_ID },
  responses: { '200': json(VoiceConsentDeleted, 'Deleted.') },
  errors: { 404: NO_CONSENT, 429: undefined },
} satisfies RouteContract;

const openaiCreateVoice = {
  method: 'post',
  path: '/v1/audio/voices',
  operationId: 'openaiCreateVoice',
  summary: 'Clone a voice with a consent (client.audio.voices.create)',
  description:
    'Clones a voice from one audio sample, naming the consent of its owner. The voice is the same as one cloned by POST /v2/audio/voices: ' +
    'its `id` (the voice_id) is the `voice` of speech on /v1 and /v2.',
  ...OPENAI_OPERATION,
  body: audioForm('CreateOpenAiVoiceForm', CreateOpenAiVoiceForm, 'audio_sample', CreateOpenAiVoiceParts),
  responses: { '200': json(OpenAiVoice, 'The new voice.') },
  errors: {
    400:
      'A missing, repeated or unknown part, a blank name, a `type` other than audio_sample, or the ' +
      'workspace already holds its maximum of voices; `error.param` names the part.',
    404: 'The consent names no consent of this workspace (consent_not_found, `param: consent`).',
    413: upload413,
    415: upload415,
    429: undefined,
    503: VOICE_503,
  },
} satisfies RouteContract;

const openaiDeleteVoice = {
  method: 'delete',
  path: '/v1/audio/voices/{id}',
  operationId: 'openaiDeleteVoice',
  summary: 'Delete a voice (client.audio.voices.delete)',
  description: 'Removes the voice from the registry now and from the provider durably, as DELETE /v2/audio/voices/{id}; its consent stays.',
  ...OPENAI_OPERATION,
  requestParams: { path: z.object({ id: z.string().describe('The voice id (its voice_id).') }) },
  responses: { '200': json(OpenAiVoiceDeleted, 'Deleted.') },
  errors: {
    404: 'No such voice in this workspace (voice_not_found, `param: voice_id`).',
    429: undefined,
    503: 'No voice provider is configured, or the deletion could not be started (temporarily_unavailable); nothing changed.',
  },
} satisfies RouteContract;

type OpenAiVoiceRoutesDeps = { auth: RequestHandler; limit: RequestHandler; voices: VoicesService; consents: VoiceConsentsService };

function createVoiceHandler(deps: OpenAiVoiceRoutesDeps): ContractHandler<typeof openaiCreateVoice> {
  return async (input, _req, res) => {
    const { name, audio_sample: sample, consent } = input.body;
    const principal = principalOf(res);
    const consent_id = await deps.consents.forClone(principal, consent);
    const format = sample.type as AudioFormat;
    const voice = await deps.voices.create(principal, {
      name,
      samples: [{ filename: sample.filename, format, content_type: AUDIO_CONTENT_TYPES[format], data: sample.buffer }],
      consent_id,
    });
    res.json({
      id: voice.voice_id,
      object: 'audio.voice',
      name: voice.name,
      type: 'audio_sample',
      created_at: Math.floor(voice.created_at_ms / 1000),
    });
  };
}

function deleteVoiceHandler(deps: OpenAiVoiceRoutesDeps): ContractHandler<typeof openaiDeleteVoice> {
  return async (input, _req, res) => {
    const id = input.params.id;
    const principal = principalOf(res);
    const registryId = await deps.consents.registryIdOf(principal, id);
    if (!registryId) throw new ApiError(404, 'not_found_error', 'voice_not_found', `no voice ${id}`, 'voice_id');
    await deps.voices.delete(principal, registryId);
    res.json({ id, object: 'audio.voice.deleted', deleted: true });
  };
}

export function openAiVoiceRoutes(deps: OpenAiVoiceRoutesDeps): ApiRouter {
  const api = new ApiRouter();
  const configured: RequestHandler = (_req, _res, next) => {
    deps.voices.assertConfigured();
    next();
  };
  const upload = (filePart: string, fieldParts: string[]) =>
    multipartForm({ limits: { ...VOICE_UPLOAD_LIMITS, filesMax: 1 }, fileParts: [filePart], fieldParts, fileType: audioCheck });

  api.route(openaiCreateVoiceConsent, deps.auth, deps.limit, upload('recording', ['name', 'language']), async ({ body }, _req, res) => {
    const consent = await deps.consents.create(principalOf(res), {
      name: body.name,
      language: body.language,
      recording: body.recording.buffer,
      extension: body.recording.type,
    });
    res.json(presentConsent(consent));
  });
  api.route(openaiListVoiceConsents, deps.auth, async ({ query }, _req, res) => {
    const page = await deps.consents.list(principalOf(res), query);
    res.json(openAiPage(page.data.map(presentConsent), page.has_more));
  });
  api.route(openaiRetrieveVoiceConsent, deps.auth, async ({ params }, _req, res) => {
    res.json(presentConsent(await deps.consents.get(principalOf(res), params.id)));
  });
  api.route(openaiUpdateVoiceConsent, deps.auth, deps.limit, jsonBody, async ({ params, body }, _req, res) => {
    res.json(presentConsent(await deps.consents.rename(principalOf(res), params.id, body.name)));
  });
  api.route(openaiDeleteVoiceConsent, deps.auth, deps.limit, async ({ params: { id } }, _req, res) => {
    await deps.consents.delete(principalOf(res), id);
    res.json({ id, object: 'audio.voice_consent', deleted: true });
  });
  api.route(
    openaiCreateVoice,
    deps.auth,
    deps.limit,
    configured,
    upload('audio_sample', ['name', 'consent', 'type']),
    createVoiceHandler(deps),
  );
  api.route(openaiDeleteVoice, deps.auth, deps.limit, configured, deleteVoiceHandler(deps));
  return api;
}
