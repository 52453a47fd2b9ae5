// Response schemas of the OpenAI-compatible surface (/v1): what its routes answer, in OpenAI's shapes,
// for the OpenAPI document (../openapi.ts names each component after its export here). Like the /v2
// response schemas of ../schemas.ts they do not build responses; test/http/openapi.test.ts parses real /v1
// responses with them, and strict objects make a field sent but not documented fail there.
import { z } from 'zod';

const UnixSeconds = z.int().nonnegative();

/** OpenAI's error `type`s this surface answers (./errors.ts maps the service's types onto them). */
export const OpenAiErrorType = z.enum([
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'insufficient_quota',
  'not_found_error',
  'idempotency_error',
  'rate_limit_error',
  'server_error',
]);

export const OpenAiErrorResponse = z
  .strictObject({
    error: z.strictObject({
      message: z.string().describe('Human-readable explanation.'),
      type: OpenAiErrorType.describe("OpenAI's error type; the SDKs choose their error class by the status, not by this."),
      param: z.string().nullable().describe('The parameter or multipart part at fault, when there is one (e.g. "size", "input_reference").'),
      code: z.string().describe('Machine-readable, e.g. invalid_parameter, model_not_found, insufficient_credits, unsupported_feature.'),
    }),
  })
  .describe("Every /v1 error, whatever its status, has OpenAI's shape.");

export const OpenAiVideo = z
  .strictObject({
    id: z.uuid().describe('The id of the job, the same on /v2/videos/generations/{id}.'),
    object: z.literal('video'),
    model: z.string(),
    status: z.enum(['queued', 'in_progress', 'completed', 'failed']),
    progress: z.int().min(0).max(100).describe('0 queued, 50 in progress, 100 finished: providers report no fraction done.'),
    created_at: UnixSeconds.describe('Unix time (seconds).'),
    completed_at: UnixSeconds.nullable().describe('Unix time (seconds) the video finished; null until then.'),
    expires_at: z.null().describe('Always null: a video is kept until it is deleted.'),
    prompt: z.null().describe('Always null: the prompt is not echoed.'),
    seconds: z.string().describe('Seconds of video, e.g. "4".'),
    size: z.string().describe('Width x height, e.g. "1280x720".'),
    error: z.strictObject({ code: z.string(), message: z.string() }).nullable().describe('Why the video failed; null unless failed.'),
    remixed_from_video_id: z.null().describe('Always null: remixing is not offered.'),
  })
  .describe('A video: a job of /v2/videos/generations in the shape of OpenAI\'s Videos API.');
export const OpenAiVideoList = z.strictObject({
  object: z.literal('list'),
  data: z.array(OpenAiVideo),
  first_id: z.uuid().nullable(),
  last_id: z.uuid().nullable().describe('The `after` of the next page.'),
  has_more: z.boolean(),
});
export const OpenAiVideoDeleted = z.strictObject({ id: z.uuid(), object: z.literal('video.deleted'), deleted: z.literal(true) });

export const OpenAiModel = z
  .strictObject({
    id: z.string(),
    object: z.literal('model'),
    created: UnixSeconds.describe("Unix time (seconds); the catalog has no dates, so every model reports this service's first release."),
    owned_by: z.string(),
  })
  .describe('A video or speech model this API key may use and something here serves.');
export const OpenAiModelList = z.strictObject({ object: z.literal('list'), data: z.array(OpenAiModel) });

const ConsentId = z.string().regex(/^cons_[0-9a-f]{24}$/);
export const VoiceConsent = z
  .strictObject({
    id: ConsentId,
    object: z.literal('audio.voice_consent'),
    name: z.string(),
    language: z.string().describe('BCP 47 language tag of the recording.'),
    created_at: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe("A recording in which a voice's owner consents to its cloning; this workspace's own.");
export const VoiceConsentList = z.strictObject({
  object: z.literal('list'),
  data: z.array(VoiceConsent).describe('Newest first.'),
  first_id: ConsentId.nullable(),
  last_id: ConsentId.nullable().describe('The `after` of the next page.'),
  has_more: z.boolean(),
});
export const VoiceConsentDeleted = z.strictObject({ id: z.string(), object: z.literal('audio.voice_consent'), deleted: z.literal(true) });

export const OpenAiVoice = z
  .strictObject({
    id: z.string().describe('The voice_id: the `voice` of speech on /v1 and /v2.'),
    object: z.literal('audio.voice'),
    name: z.string(),
    type: z.literal('audio_sample'),
    created_at: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe('A voice cloned from an audio sample, with a consent.');
export const OpenAiVoiceDeleted = z.strictObject({ id: z.string(), object: z.literal('audio.voice.deleted'), deleted: z.literal(true) });
