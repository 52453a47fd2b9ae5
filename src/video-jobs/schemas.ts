// Video jobs' schemas: the create request (the single source for its validation and its type), the
// list query, and the job as /v2 answers it.
import { z } from 'zod';
import { ASPECT_RATIOS, IMAGE_BYTES_MAX, IMAGE_MIME_TYPES, RESOLUTIONS, VIDEO_BACKENDS } from '../models/values.js';
import { VideoAspectRatio, VideoResolution } from '../models/schemas.js';
import { Euros, PageLimit, UnixSeconds, Uuid } from '../http/schemas.js';
import { text } from '../zod-text.js';
import { JSON_BODY_BYTES_MAX } from '../http/json-body.js';

/** Largest `image` / `lastFrame` accepted, decoded (413 beyond): the models list says it too. */
export { IMAGE_BYTES_MAX };

/** Room for two images (image, lastFrame) at IMAGE_BYTES_MAX in base64, plus the rest of a request. */
export const VIDEO_CREATE_BODY_BYTES_MAX = 2 * 4 * Math.ceil(IMAGE_BYTES_MAX / 3) + JSON_BODY_BYTES_MAX;
/** Creates with a body over JSON_BODY_BYTES_MAX (images) in progress at once, per API process. */
export const VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX = 8;

export const PROMPT_CHARS_MAX = 4_000;
export const NEGATIVE_PROMPT_CHARS_MAX = 1_000;
/** Nesting of `parameters`: objects and arrays at most this deep (the object itself is level 1). */
export const PARAMETERS_DEPTH_MAX = 8;
/** `parameters` as JSON: at most this many bytes (UTF-8), whatever the body limit allows. */
export const PARAMETERS_BYTES_MAX = 16 * 1024;
/**
 * Whether `value` nests objects or arrays deeper than `max` levels. Recursion stops at `max`, so the
 * check itself is bounded; the fingerprint's canonical JSON (recursive) then never meets deep input.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (max <= 0) return true;
  for (const v of Object.values(value)) if (nestsDeeperThan(v, max - 1)) return true;
  return false;
}
const Parameters = z
  .record(z.string(), z.unknown())
  .check((ctx) => {
    if (nestsDeeperThan(ctx.value, PARAMETERS_DEPTH_MAX)) {
      ctx.issues.push({
        code: 'custom',
        input: ctx.value,
        message: `must not nest objects or arrays more than ${PARAMETERS_DEPTH_MAX} levels deep`,
      });
    } else if (Buffer.byteLength(JSON.stringify(ctx.value)) > PARAMETERS_BYTES_MAX) {
      ctx.issues.push({ code: 'custom', input: ctx.value, message: `must be at most ${PARAMETERS_BYTES_MAX} bytes as JSON` });
    }
  })
  .describe(
    `Model-specific options, passed to models that read them (sim-video-1 reads parameters.simulate); ` +
      `ignored by the others. At most ${PARAMETERS_DEPTH_MAX} levels of nesting and ${PARAMETERS_BYTES_MAX} ` +
      `bytes as JSON.`,
  );
// Per-model limits and capabilities live in the catalog (GET /v2/models), which the operator may
// replace; the descriptions (OpenAPI only, not validation) say where to look.
const ImageInput = (what: string) =>
  z
    .strictObject({
      bytesBase64Encoded: z
        .base64('must be standard base64 (RFC 4648, with padding)')
        .min(1, 'must not be empty')
        .describe(
          `The image file, base64: PNG, JPEG or WebP, recognised by its content; at most ${IMAGE_BYTES_MAX / (1024 * 1024)} MiB decoded (413 beyond).`,
        ),
      mimeType: z
        .enum(IMAGE_MIME_TYPES, { error: `must be one of ${IMAGE_MIME_TYPES.join(', ')}` })
        .describe("The image's type; must match its content and be one of the model's image_mime_types."),
    })
    .describe(what);
export const CreateVideoBody = z
  .object({
    prompt: text({ chars_max: PROMPT_CHARS_MAX, notBlank: true }).describe(
      `What to generate: at most ${PROMPT_CHARS_MAX} characters, not blank (leading and trailing white space is removed).`,
    ),
    model: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe(
        "A video model id (GET /v2/models); default: the catalog's default model (veo-3.1-fast-generate-001 " +
          'in the built-in catalog). A retired id listed with `deprecated: true` runs as its `replaced_by`.',
      ),
    n: z.number().int().min(1).optional().describe("Videos to generate: 1 to the model's max_n; default 1."),
    durationSeconds: z
      .number()
      .int()
      .optional()
      .describe("Seconds per video: one of the model's durations_seconds; default the model's default_params."),
    resolution: z
      .string()
      .max(20)
      .optional()
      .describe(`One of the model's resolutions (${RESOLUTIONS.join(', ')}); default the model's default_params.`),
    aspectRatio: z
      .string()
      .max(20)
      .optional()
      .describe(`One of the model's aspect_ratios (${ASPECT_RATIOS.join(', ')}); default the model's default_params.`),
    seed: z.number().int().min(0).max(4_294_967_295).optional().describe('For repeatable output, with models that have supports_seed.'),
    image: ImageInput('The first frame of the video (image to video), for models with supports_image.').optional(),
    lastFrame: ImageInput('The last frame of the video, with `image`, for models with supports_last_frame.').optional(),
    generateAudio: z
      .boolean()
      .optional()
      .describe(
        "Whether the video has generated audio, for models with supports_audio; default the model's generate_audio_default. The price depends on it.",
      ),
    negativePrompt: text({ chars_max: NEGATIVE_PROMPT_CHARS_MAX, notBlank: true })
      .trim()
      .optional()
      .describe(
        `What the video should not show, for models with supports_negative_prompt: at most ${NEGATIVE_PROMPT_CHARS_MAX} characters, not blank.`,
      ),
    parameters: Parameters.optional(),
  })
  .strict();
export type CreateVideoBody = z.infer<typeof CreateVideoBody>;

/** GET /v2/videos/generations: a page of the workspace's jobs, newest first. */
export const ListVideoJobsQuery = z.strictObject({
  limit: PageLimit,
  after: z
    .uuid()
    .optional()
    .describe('The `id` of the last job of the previous page (a job of this workspace: another is a 404); absent for the first page.'),
  status: z.enum(['pending', 'succeeded', 'failed']).optional().describe('Only jobs in this status.'),
  model: z.string().min(1).max(100).optional().describe('Only jobs of this model (a retired id means its replacement).'),
});
export type ListVideoJobsQuery = z.infer<typeof ListVideoJobsQuery>;

export const VideoJob = z
  .strictObject({
    id: Uuid,
    object: z.literal('video.generation_job'),
    status: z.enum(['pending', 'succeeded', 'failed']),
    model: z.string(),
    created: UnixSeconds.describe('Unix time (seconds).'),
    completed: UnixSeconds.nullable().describe('Unix time (seconds) the job finished; null while pending.'),
    params: z
      .strictObject({
        durationSeconds: z.int().positive(),
        resolution: VideoResolution,
        aspectRatio: VideoAspectRatio,
        n: z.int().positive(),
      })
      .describe('The parameters the job runs with, defaults applied.'),
    estimated_cost_in_euro: Euros.describe('Charged when the job was accepted: n videos at the model price.'),
    cost_in_euro: Euros.nullable().describe('The final charge once the job has finished; null while pending.'),
    refunded_in_euro: Euros.describe('Refunded of the estimate (failed job, fewer videos than n).'),
    videos: z
      .array(
        z.strictObject({
          url: z
            .url()
            .describe(
              'An expiring download URL (GET /v2/files/{key} with local storage, a presigned bucket URL with S3); fetch the job again for a fresh one.',
            ),
          expires_at: UnixSeconds.describe('Unix time (seconds) the URL stops working.'),
          content_type: z.string(),
        }),
      )
      .describe('Filled when succeeded; empty otherwise.'),
    error: z.strictObject({ code: z.string(), message: z.string() }).nullable().describe('Why the job failed; null unless failed.'),
    backend: z
      .string()
      .nullable()
      .describe(`The backend that ran the job (${VIDEO_BACKENDS.join(', ')}); null until one accepted it.`),
    progress: z
      .int()
      .min(0)
      .max(100)
      .nullable()
      .describe('0-100 as the provider reports it (only moves forward); 100 once succeeded; null when the provider gives none.'),
    queue_position: z
      .int()
      .min(0)
      .nullable()
      .describe("The job's place in the provider's queue, where the provider says (only moves forward); null otherwise."),
    batch_id: Uuid.nullable().describe('The batch that made the job (POST /v2/batches); null for a job created alone.'),
  })
  .describe('A video generation job.');
export const VideoJobList = z.strictObject({
  object: z.literal('list'),
  data: z.array(VideoJob).describe('Newest first.'),
  has_more: z.boolean().describe('Whether another page follows: ask again with `after` = the last `id` of this one.'),
});
export const VideoJobDeleted = z.strictObject({ id: Uuid, object: z.literal('video.generation_job'), deleted: z.literal(true) });

/** What the API answers, as its clients read it (z.output of the response schemas). */
export type VideoJob = z.output<typeof VideoJob>;
export type VideoJobList = z.output<typeof VideoJobList>;
export type VideoJobDeleted = z.output<typeof VideoJobDeleted>;

export const RESPONSE_COMPONENTS = { VideoJob, VideoJobList, VideoJobDeleted } satisfies Record<string, z.ZodType>;
