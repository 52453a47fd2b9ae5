// Voices' and speech's schemas: the speech request, and the cloned voices as /v2 answers them.
import { z } from 'zod';
import { UnixSeconds, Uuid } from '../http/schemas.js';
import { text } from '../zod-text.js';
import { SPEECH_FORMATS, SPEECH_PROVIDERS } from '../models/values.js';

/** A voice provider's name: where a voice is cloned, and then always spoken and deleted. */
export const VoiceProviderName = z
  .enum(SPEECH_PROVIDERS, { error: `must be one of ${SPEECH_PROVIDERS.join(', ')}` })
  .describe(
    'The voice provider that clones the voice (one of those configured here, listed as `backend` by GET /v2/models); ' +
      'default: the first configured. The voice is then always spoken and deleted there.',
  );

export const CreateSpeechBody = z
  .object({
    model: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe('A speech model id (GET /v2/models); default: the first model of the configured voice provider.'),
    input: text({ notBlank: true }).describe(
      "The text to speak: not blank, at most the model's max_input_chars characters (Unicode code points), which are billed.",
    ),
    voice: text({ chars_max: 200, chars_min: 1 }).describe(
      "A voice_id of this workspace's cloned voices (GET /v2/audio/voices) or a preset voice of the provider.",
    ),
    response_format: z
      .enum(SPEECH_FORMATS, { error: `must be one of ${SPEECH_FORMATS.join(', ')}` })
      .optional()
      .describe(
        'wav (default): a RIFF WAVE file; pcm: raw signed 16-bit little-endian mono samples; mp3; opus (in Ogg); aac (ADTS); flac.',
      ),
    speed: z
      .number()
      .min(0.25)
      .max(4)
      .optional()
      .describe('Speaking rate, 1 = normal (default), 0.25 to 4; providers that cannot change it speak at 1.'),
    stream_format: z
      .enum(['audio', 'sse'], { error: 'must be one of audio, sse' })
      .optional()
      .describe(
        'audio: the bytes are streamed as they are made (mp3, wav and pcm before the synthesis ends; opus, ' +
          'aac and flac when it has); sse: server-sent events speech.audio.delta (base64 audio) and ' +
          'speech.audio.done. Absent: one complete file.',
      ),
    timestamps: z
      .enum(['word'], { error: 'must be word' })
      .optional()
      .describe(
        'word (only with stream_format "sse", else a 400): speech.word_timestamps events ({"words", "start_s", "end_s"}: each word once, in order, ' +
          "its start and end in seconds from the start of the audio) come between the speech.audio.delta events, whatever the voice's provider.",
      ),
  })
  .strict();

export const Voice = z
  .strictObject({
    id: Uuid.describe('Registry id: for GET and DELETE /v2/audio/voices/{id}.'),
    object: z.literal('voice'),
    voice_id: z.string().describe('The provider voice id: the `voice` of POST /v2/audio/speech.'),
    name: z.string(),
    requires_verification: z.boolean(),
    provider: z.enum(SPEECH_PROVIDERS).describe('The voice provider that cloned the voice: it speaks it, with its own speech models.'),
    created: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe('A cloned voice, visible only from its own workspace.');
export const VoiceList = z.strictObject({ object: z.literal('list'), data: z.array(Voice) });
export const VoiceDeleted = z.strictObject({ id: Uuid, object: z.literal('voice'), deleted: z.literal(true) });

export const SpeechToken = z
  .strictObject({
    object: z.literal('speech.token'),
    token: z.string().describe('Opens the speech WebSocket: `GET /v2/audio/speech/stream?token=<token>`.'),
    expires_at: UnixSeconds.describe('Unix time (seconds) after which the token opens no socket.'),
    url_path: z.literal('/v2/audio/speech/stream').describe('Where the WebSocket is, on this API.'),
  })
  .describe('A short-lived token for the speech WebSocket, as its API key, for browsers.');

/** What the API answers, as its clients read it (z.output of the response schemas). */
export type Voice = z.output<typeof Voice>;
export type VoiceList = z.output<typeof VoiceList>;
export type VoiceDeleted = z.output<typeof VoiceDeleted>;
export type SpeechToken = z.output<typeof SpeechToken>;

export const RESPONSE_COMPONENTS = { Voice, VoiceList, VoiceDeleted, SpeechToken } satisfies Record<string, z.ZodType>;
