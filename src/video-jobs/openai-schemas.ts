// Video jobs on the OpenAI-compatible surface (/v1): the video in the shape of OpenAI's Videos API.
import { z } from 'zod';
import { UnixSeconds } from '../http/schemas.js';

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
  .describe("A video: a job of /v2/videos/generations in the shape of OpenAI's Videos API.");
export const OpenAiVideoList = z.strictObject({
  object: z.literal('list'),
  data: z.array(OpenAiVideo),
  first_id: z.uuid().nullable(),
  last_id: z.uuid().nullable().describe('The `after` of the next page.'),
  has_more: z.boolean(),
});
export const OpenAiVideoDeleted = z.strictObject({ id: z.uuid(), object: z.literal('video.deleted'), deleted: z.literal(true) });

export const OPENAI_RESPONSE_COMPONENTS = { OpenAiVideo, OpenAiVideoList, OpenAiVideoDeleted } satisfies Record<string, z.ZodType>;
