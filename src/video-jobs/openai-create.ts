// OpenAI's video create as this service reads it (POST /v1/videos, JSON or multipart): its body and form
// schemas, `seconds` and `size` mapped to a duration, a resolution and an aspect ratio, `input_reference`
// (a data URL or an uploaded file) to the job's image, and the whole to /v2's create body; and how a
// /v2 job is presented as OpenAI's video. The routes are ./openai-routes.ts.
import { z } from 'zod';
import { defaultVideoModelId, findVideoModel } from '../models/catalog.js';
import type { AspectRatio, Resolution } from '../models/values.js';
import { ApiError, invalidParam } from '../errors.js';
import { LIST_LIMIT_MAX } from '../http/schemas.js';
import { CreateVideoBody, IMAGE_BYTES_MAX, PROMPT_CHARS_MAX } from './schemas.js';
import { bytesText } from '../http/openapi.js';
import { type MultipartForm, type UploadedFile } from '../http/multipart.js';
import { sniffImage } from '../media/image-sniff.js';
import { text } from '../zod-text.js';
import type { VideoJobState } from '../../workflows/messages.js';
import { VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX } from './schemas.js';

/** OpenAI's `size` values and what they mean here. */
export const OPENAI_VIDEO_SIZES: Readonly<Record<string, { resolution: Resolution; aspectRatio: AspectRatio }>> = {
  '1280x720': { resolution: '720p', aspectRatio: '16:9' },
  '720x1280': { resolution: '720p', aspectRatio: '9:16' },
  '1920x1080': { resolution: '1080p', aspectRatio: '16:9' },
  '1080x1920': { resolution: '1080p', aspectRatio: '9:16' },
  '3840x2160': { resolution: '4k', aspectRatio: '16:9' },
  '2160x3840': { resolution: '4k', aspectRatio: '9:16' },
};

export function openAiSizeOf(resolution: string, aspectRatio: string): string {
  const hit = Object.entries(OPENAI_VIDEO_SIZES).find(([, v]) => v.resolution === resolution && v.aspectRatio === aspectRatio);
  return hit ? hit[0] : `${resolution}@${aspectRatio}`;
}

export const STATUS: Record<string, 'queued' | 'in_progress' | 'completed' | 'failed'> = {
  charging: 'queued',
  pending: 'in_progress',
  succeeded: 'completed',
  failed: 'failed',
};

/** A job as OpenAI's `video` object. */
export function presentOpenAiVideo(job: VideoJobState) {
  const status = STATUS[job.status] ?? 'failed';
  return {
    id: job.job_id,
    object: 'video' as const,
    model: job.model,
    status,
    // Queued 0, finished 100; running, the provider's progress as the job keeps it (it only moves
    // forward), 0 until the provider reports one, so the figure never goes back.
    progress: status === 'queued' ? 0 : status === 'in_progress' ? (job.progress ?? 0) : 100,
    created_at: Math.floor(job.created_at_ms / 1000),
    completed_at: job.completed_at_ms === null ? null : Math.floor(job.completed_at_ms / 1000),
    // Stored videos are kept until the video is deleted.
    expires_at: null,
    prompt: null,
    seconds: String(job.params.durationSeconds),
    size: openAiSizeOf(job.params.resolution, job.params.aspectRatio),
    error: status === 'failed' && job.error ? { code: job.error.code, message: job.error.message } : null,
    remixed_from_video_id: null,
  };
}

const SecondsText = z.string().regex(/^[1-9][0-9]{0,2}$/, 'must be a whole number of seconds, such as "8"');
const Seconds = z.union([SecondsText, z.number().int().min(1).max(999)]);
const SECONDS_TEXT = "Seconds of video: one of the model's durations (GET /v2/models).";
const Size = z.enum(Object.keys(OPENAI_VIDEO_SIZES) as [string, ...string[]], {
  error: `must be one of ${Object.keys(OPENAI_VIDEO_SIZES).join(', ')}`,
});
const SIZE_TEXT = 'Width x height: the resolution and aspect ratio (the model must offer both).';
const DATA_URL = /^data:(image\/[a-z+.-]+);base64,([A-Za-z0-9+/=\s]+)$/;
/** A first frame as a data: URL: the base64 of an image of at most IMAGE_BYTES_MAX, its prefix, and room for line breaks. */
export const IMAGE_DATA_URL_CHARS_MAX = 4 * Math.ceil(IMAGE_BYTES_MAX / 3) + 64 * 1024;

export const OpenAiCreateVideoBody = z
  .object({
    prompt: text({ chars_max: PROMPT_CHARS_MAX, notBlank: true }).describe(
      `What to generate: at most ${PROMPT_CHARS_MAX} characters, not blank (leading and trailing white space is removed).`,
    ),
    model: z.string().min(1).max(100).optional().describe("A video model id of GET /v1/models; absent: the service's default model."),
    seconds: Seconds.optional().describe(`${SECONDS_TEXT} A string ("4", "8") or a number.`),
    size: Size.optional().describe(SIZE_TEXT),
    input_reference: z
      .strictObject({
        image_url: z.string().max(IMAGE_DATA_URL_CHARS_MAX).optional(),
        // Parsed so that a client sending it is told what to send instead; the document states that no value is accepted.
        file_id: z
          .string()
          .max(200)
          .optional()
          .describe('Not offered (400 unsupported_parameter): send the image itself, as image_url or a file part.')
          .meta({ not: {} }),
      })
      .optional()
      .describe('The first frame: {"image_url": "data:image/png;base64,..."} in JSON, or an image file in multipart (PNG, JPEG or WebP).'),
  })
  .strict();
type OpenAiCreateVideo = z.infer<typeof OpenAiCreateVideoBody>;

export const MULTIPART_FIELDS = ['prompt', 'model', 'seconds', 'size', 'input_reference[image_url]', 'input_reference[file_id]'] as const;
export const MULTIPART_LIMITS = {
  filesMax: 1,
  fileBytesMax: IMAGE_BYTES_MAX,
  totalFileBytesMax: IMAGE_BYTES_MAX,
  fieldsMax: MULTIPART_FIELDS.length,
  partsMax: MULTIPART_FIELDS.length + 1,
  fieldBytesMax: 4 * PROMPT_CHARS_MAX,
  partNameBytesMax: 100,
  concurrentRequestsMax: VIDEO_CREATE_CONCURRENT_LARGE_BODIES_MAX,
};
export const IMAGE_TYPES = 'image/png, image/jpeg, image/webp';

/**
 * The multipart form of POST /v1/videos, as the openai SDKs send it. Documentation only: multipart
 * bodies are parsed by ../http/multipart.ts, and the contract validates the parsed parts as the JSON
 * body they stand for (OpenAiCreateVideoParts).
 */
export const OpenAiCreateVideoForm = z
  .strictObject({
    prompt: OpenAiCreateVideoBody.shape.prompt,
    model: OpenAiCreateVideoBody.shape.model,
    seconds: SecondsText.optional().describe(`${SECONDS_TEXT} E.g. "4".`),
    size: Size.optional().describe(SIZE_TEXT),
    input_reference: z
      .file()
      .min(1)
      .max(IMAGE_BYTES_MAX)
      .optional()
      .describe(
        `The first frame: a PNG, JPEG or WebP file of at most ${bytesText(IMAGE_BYTES_MAX)}, recognised by ` +
          `its content (the part's Content-Type is not trusted).`,
      ),
    'input_reference[image_url]': z
      .string()
      .max(IMAGE_DATA_URL_CHARS_MAX)
      .optional()
      .describe(
        `Or the first frame as a data: URL (data:image/png;base64,...; what the openai SDKs send for ` +
          `input_reference: {image_url}), an image of at most ${bytesText(IMAGE_BYTES_MAX)} once decoded; other ` +
          `URLs are not fetched.`,
      ),
  })
  .describe(
    'multipart/form-data: text parts prompt, model, seconds and size, and the first frame as the file ' +
      'part input_reference or the text part input_reference[image_url], not both (400, param input_reference); no other parts.',
  );

export const OpenAiListVideosQuery = z.strictObject({
  after: z.string().max(100).optional(),
  limit: z.coerce.number().int().min(1).max(LIST_LIMIT_MAX).default(20),
  order: z.enum(['asc', 'desc']).default('desc'),
});

/** Renames the /v2 parameter an error names to the /v1 one the client sent. */
const V1_PARAMS: Record<string, string> = {
  durationSeconds: 'seconds',
  resolution: 'size',
  aspectRatio: 'size',
  image: 'input_reference',
  'image.bytesBase64Encoded': 'input_reference',
  'image.mimeType': 'input_reference',
};
export function asV1Param(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.param === null || !(err.param in V1_PARAMS)) return err;
  const param = V1_PARAMS[err.param]!;
  return new ApiError(err.status, err.type, err.code, err.message.replaceAll(err.param, param), param, err.headers);
}

function imageFromDataUrl(url: string): NonNullable<CreateVideoBody['image']> {
  const m = DATA_URL.exec(url);
  if (!m)
    throw invalidParam(
      'input_reference',
      'input_reference.image_url must be a data: URL of a base64 image (data:image/png;base64,...); other URLs are not fetched',
    );
  const bytes = Buffer.from(m[2]!.replace(/\s+/g, ''), 'base64');
  if (bytes.length > IMAGE_BYTES_MAX)
    throw new ApiError(
      413,
      'invalid_request_error',
      'image_too_large',
      `input_reference exceeds ${IMAGE_BYTES_MAX} bytes`,
      'input_reference',
    );
  const type = sniffImage(bytes);
  if (!type) throw invalidParam('input_reference', 'input_reference must be a PNG, JPEG or WebP image');
  return { bytesBase64Encoded: bytes.toString('base64'), mimeType: type };
}

/**
 * The /v2 create body of a /v1 request, validated as /v2 validates its own (the model's limits are
 * checked by the create itself).
 */
export function toCreateBody(body: OpenAiCreateVideo, uploaded: { buffer: Buffer; type: string } | undefined): CreateVideoBody {
  const out: CreateVideoBody = { prompt: body.prompt, n: 1 };
  if (body.model !== undefined) out.model = body.model;
  if (body.seconds !== undefined) out.durationSeconds = Number(body.seconds);
  if (body.size !== undefined) {
    const { resolution, aspectRatio } = OPENAI_VIDEO_SIZES[body.size]!;
    const model = findVideoModel(body.model ?? defaultVideoModelId());
    if (model && (!model.resolutions.includes(resolution) || !model.aspect_ratios.includes(aspectRatio))) {
      const offered = Object.entries(OPENAI_VIDEO_SIZES)
        .filter(([, v]) => model.resolutions.includes(v.resolution) && model.aspect_ratios.includes(v.aspectRatio))
        .map(([k]) => k);
      throw invalidParam(
        'size',
        `model ${model.id} does not offer size ${body.size}; it offers ${offered.join(', ')}`,
        'unsupported_parameter',
      );
    }
    out.resolution = resolution;
    out.aspectRatio = aspectRatio;
  }
  if (uploaded && body.input_reference !== undefined)
    throw invalidParam('input_reference', 'give the first frame once: a file part input_reference, or input_reference[image_url]');
  if (uploaded)
    out.image = {
      bytesBase64Encoded: uploaded.buffer.toString('base64'),
      mimeType: uploaded.type as NonNullable<CreateVideoBody['image']>['mimeType'],
    };
  else if (body.input_reference?.file_id !== undefined)
    throw invalidParam(
      'input_reference',
      'input_reference.file_id is not offered: send the image itself (a file part, or image_url as a data: URL)',
      'unsupported_parameter',
    );
  else if (body.input_reference?.image_url !== undefined) out.image = imageFromDataUrl(body.input_reference.image_url);
  return CreateVideoBody.parse(out);
}

/** The multipart form, validated as the JSON body it stands for, with the uploaded first frame beside it. */
export const OpenAiCreateVideoParts = OpenAiCreateVideoBody.extend({ uploaded: z.custom<UploadedFile>().optional() });
export function openAiCreateVideoInput(form: MultipartForm): Record<string, unknown> {
  const f = form.fields;
  const raw: Record<string, unknown> = {};
  for (const k of ['prompt', 'model', 'seconds', 'size'] as const) if (f.has(k)) raw[k] = f.get(k);
  const ref: Record<string, string> = {};
  if (f.has('input_reference[image_url]')) ref['image_url'] = f.get('input_reference[image_url]')!;
  if (f.has('input_reference[file_id]')) ref['file_id'] = f.get('input_reference[file_id]')!;
  if (Object.keys(ref).length > 0) raw['input_reference'] = ref;
  if (form.files[0]) raw['uploaded'] = form.files[0];
  return raw;
}
