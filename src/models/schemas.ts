// The model catalog's schemas: the models as GET /v2/models answers them (./present.ts builds them).
import { z } from 'zod';
import { ASPECT_RATIOS, IMAGE_MIME_TYPES, RESOLUTIONS, SPEECH_FORMATS, SPEECH_PROVIDERS, VIDEO_BACKENDS } from './values.js';

export const VideoResolution = z.enum(RESOLUTIONS);
export const VideoAspectRatio = z.enum(ASPECT_RATIOS);
const PerSecondByResolution = z.partialRecord(VideoResolution, z.number().nonnegative());
export const SpeechResponseFormat = z.enum(SPEECH_FORMATS);

export const VideoModel = z
  .strictObject({
    id: z.string(),
    object: z.literal('model'),
    kind: z.literal('video'),
    owned_by: z.string(),
    family: z.string(),
    variant: z.enum(['standard', 'fast', 'simulated']),
    region: z.string().describe('Where the model is hosted.'),
    backend: z
      .enum(VIDEO_BACKENDS)
      .nullable()
      .describe('What serves the model here (the first of `backends` configured); null when nothing does (not available).'),
    backends: z
      .array(
        z.strictObject({
          backend: z.enum(VIDEO_BACKENDS),
          region: z.string().describe('Where this backend runs the model; fal and Replicate document no region ("global").'),
          available: z.boolean().describe('Whether this backend is configured here.'),
        }),
      )
      .describe(
        'Every backend that can serve the model, in order: a job refused by one for a passing reason goes to the next, at the same price.',
      ),
    simulated: z.boolean(),
    available: z.boolean(),
    deprecated: z.boolean().describe('A retired id, still accepted: a job naming it runs, is priced and is reported as `replaced_by`.'),
    replaced_by: z.string().nullable().describe('The model a deprecated id runs as; null otherwise.'),
    durations_seconds: z.array(z.int().positive()),
    resolutions: z.array(VideoResolution),
    aspect_ratios: z.array(VideoAspectRatio),
    max_n: z.int().positive().describe('The most videos one request may ask for.'),
    supports_seed: z.boolean(),
    supports_image: z.boolean().describe('Accepts `image` (the first frame).'),
    supports_last_frame: z.boolean().describe('Accepts `lastFrame` (with `image`).'),
    image_mime_types: z.array(z.enum(IMAGE_MIME_TYPES)).describe('The image types `image` and `lastFrame` may have.'),
    max_image_bytes: z.int().positive().describe('Largest `image` or `lastFrame`, decoded.'),
    supports_negative_prompt: z.boolean(),
    supports_audio: z.boolean().describe('Accepts `generateAudio`.'),
    generate_audio_default: z.boolean().describe('Whether a job has audio when the request leaves `generateAudio` out.'),
    pricing: z.strictObject({
      currency: z.literal('EUR'),
      unit: z.literal('second_of_video'),
      per_second_in_euro: PerSecondByResolution.describe(
        "Price of one second of video, by resolution, at the model's default audio setting.",
      ),
      per_second_with_audio_in_euro: PerSecondByResolution.nullable().describe(
        'With generateAudio true; null when the model has no audio.',
      ),
      per_second_without_audio_in_euro: PerSecondByResolution.describe('With generateAudio false (or a model without audio).'),
    }),
  })
  .describe('A video model. A job costs the price per second x durationSeconds x n, charged when it is accepted.');
export const SpeechModel = z
  .strictObject({
    id: z.string(),
    object: z.literal('model'),
    kind: z.literal('speech'),
    owned_by: z.string(),
    region: z.string().describe('Where the model is hosted.'),
    backend: z.enum(SPEECH_PROVIDERS).nullable().describe('The voice provider serving the model; null when it is not the configured one.'),
    simulated: z.boolean(),
    available: z.boolean(),
    max_input_chars: z.int().positive(),
    response_formats: z.array(SpeechResponseFormat),
    preset_voices: z
      .array(z.string())
      .describe(
        "The provider's preset voices: usable as `voice` by every workspace without cloning; empty when the model is not available.",
      ),
    pricing: z.strictObject({
      currency: z.literal('EUR'),
      unit: z.literal('1000_characters'),
      per_1000_characters_in_euro: z.number().nonnegative(),
    }),
  })
  .describe('A text-to-speech model.');
export const Model = z.discriminatedUnion('kind', [VideoModel, SpeechModel]);
export const ModelList = z.strictObject({ object: z.literal('list'), data: z.array(Model) });

/** What the API answers, as its clients read it (z.output of the response schemas). */
export type Model = z.output<typeof Model>;
export type VideoModel = z.output<typeof VideoModel>;
export type SpeechModel = z.output<typeof SpeechModel>;
export type ModelList = z.output<typeof ModelList>;

export const RESPONSE_COMPONENTS = { Model, VideoModel, SpeechModel, ModelList } satisfies Record<string, z.ZodType>;
