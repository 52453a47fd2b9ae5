// Voices and their consents on the OpenAI-compatible surface (/v1), in the shapes of OpenAI's Audio API.
import { z } from 'zod';
import { UnixSeconds } from '../http/schemas.js';

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

export const OPENAI_RESPONSE_COMPONENTS = {
  VoiceConsent,
  VoiceConsentList,
  VoiceConsentDeleted,
  OpenAiVoice,
  OpenAiVoiceDeleted,
} satisfies Record<string, z.ZodType>;
