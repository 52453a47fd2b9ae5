// Request schemas: the single source for validation, request types and (later) the OpenAPI document.
import type { Request } from 'express';
import { z } from 'zod';
import { fromZodError } from '../errors.js';
import { ASPECT_RATIOS, IMAGE_MIME_TYPES, RESOLUTIONS, VIDEO_BACKENDS } from '../models/catalog.js';
import { WEBHOOK_EVENT_TYPES } from '../webhooks/event-types.js';
import { WEBHOOK_URL_MAX_CHARS } from '../webhooks/target-policy.js';
import { text } from '../zod-text.js';

export const PROMPT_MAX_CHARS = 4_000;
export const NEGATIVE_PROMPT_MAX_CHARS = 1_000;
export const IDEMPOTENCY_KEY_MAX_CHARS = 255;
/** Largest `image` / `lastFrame` accepted, decoded (413 beyond). */
export const IMAGE_MAX_BYTES = 8 * 1024 * 1024;
/** Nesting of `parameters`: objects and arrays at most this deep (the object itself is level 1). */
export const PARAMETERS_MAX_DEPTH = 8;
/** `parameters` as JSON: at most this many bytes (UTF-8), whatever the body limit allows. */
export const PARAMETERS_MAX_BYTES = 16 * 1024;

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
    if (nestsDeeperThan(ctx.value, PARAMETERS_MAX_DEPTH)) {
      ctx.issues.push({ code: 'custom', input: ctx.value, message: `must not nest objects or arrays more than ${PARAMETERS_MAX_DEPTH} levels deep` });
    } else if (Buffer.byteLength(JSON.stringify(ctx.value)) > PARAMETERS_MAX_BYTES) {
      ctx.issues.push({ code: 'custom', input: ctx.value, message: `must be at most ${PARAMETERS_MAX_BYTES} bytes as JSON` });
    }
  })
  .describe(
    `Model-specific options, passed to models that read them (sim-video-1 reads parameters.simulate); ignored by the others. At most ${PARAMETERS_MAX_DEPTH} levels of nesting and ${PARAMETERS_MAX_BYTES} bytes as JSON.`,
  );

// Per-model limits and capabilities live in the catalog (GET /v2/models), which the operator may
// replace; the descriptions (OpenAPI only, not validation) say where to look.
const ImageInput = (what: string) =>
  z
    .strictObject({
      bytesBase64Encoded: z
        .base64('must be standard base64 (RFC 4648, with padding)')
        .min(1, 'must not be empty')
        .describe(`The image file, base64: PNG, JPEG or WebP, recognised by its content; at most ${IMAGE_MAX_BYTES / (1024 * 1024)} MiB decoded (413 beyond).`),
      mimeType: z
        .enum(IMAGE_MIME_TYPES, { error: `must be one of ${IMAGE_MIME_TYPES.join(', ')}` })
        .describe("The image's type; must match its content and be one of the model's image_mime_types."),
    })
    .describe(what);

export const CreateVideoBody = z
  .object({
    prompt: text({ max_chars: PROMPT_MAX_CHARS, notBlank: true }).describe(`What to generate: at most ${PROMPT_MAX_CHARS} characters, not blank (leading and trailing white space is removed).`),
    model: z.string().min(1).max(100).optional().describe("A video model id (GET /v2/models); default: the catalog's default model (veo-3.1-fast-generate-001 in the built-in catalog). A retired id listed with `deprecated: true` runs as its `replaced_by`."),
    n: z.number().int().min(1).optional().describe("Videos to generate: 1 to the model's max_n; default 1."),
    durationSeconds: z.number().int().optional().describe("Seconds per video: one of the model's durations_seconds; default the model's default_params."),
    resolution: z.string().max(20).optional().describe(`One of the model's resolutions (${RESOLUTIONS.join(', ')}); default the model's default_params.`),
    aspectRatio: z.string().max(20).optional().describe(`One of the model's aspect_ratios (${ASPECT_RATIOS.join(', ')}); default the model's default_params.`),
    seed: z.number().int().min(0).max(4_294_967_295).optional().describe('For repeatable output, with models that have supports_seed.'),
    image: ImageInput('The first frame of the video (image to video), for models with supports_image.').optional(),
    lastFrame: ImageInput('The last frame of the video, with `image`, for models with supports_last_frame.').optional(),
    generateAudio: z.boolean().optional().describe("Whether the video has generated audio, for models with supports_audio; default the model's generate_audio_default. The price depends on it."),
    negativePrompt: text({ max_chars: NEGATIVE_PROMPT_MAX_CHARS, notBlank: true })
      .trim()
      .optional()
      .describe(`What the video should not show, for models with supports_negative_prompt: at most ${NEGATIVE_PROMPT_MAX_CHARS} characters, not blank.`),
    parameters: Parameters.optional(),
  })
  .strict();
export type CreateVideoBody = z.infer<typeof CreateVideoBody>;

// Euros as JSON numbers: a binary float cannot say "at most 6 decimal places" (and JSON Schema's
// multipleOf is inexact for floats), so amounts are bounded and rounded to the nearest micro-euro.
const EUROS_ROUNDED = 'Euros, rounded to the nearest micro-euro (6 decimal places).';
export const CreateWorkspaceBody = z
  .object({
    name: text({ max_chars: 200, notBlank: true }).trim().describe('Not blank; at most 200 characters; leading and trailing white space is removed.'),
    credits_in_euro: z.number().min(0).max(1_000_000).optional().describe(`Starting credits. ${EUROS_ROUNDED}`),
  })
  .strict();
export const AddCreditsBody = z.object({ amount_in_euro: z.number().min(0.000001).max(1_000_000).describe(EUROS_ROUNDED) }).strict();
export const CreateApiKeyBody = z
  .object({
    models: z.array(z.string().min(1).max(100)).min(1).max(100).optional(),
    spend_limit_in_euro: z
      .number()
      .finite()
      .min(0)
      .max(1_000_000)
      .optional()
      .describe(`Most the key's jobs and speech together may charge, net of refunds; absent = no limit. ${EUROS_ROUNDED}`),
  })
  .strict();

export const SetWorkspaceLimitsBody = z
  .object({
    max_pending_jobs: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .nullable()
      .describe("Video jobs the workspace may have pending at once (beyond: 429 too_many_pending_jobs, nothing charged); null = the service's default."),
  })
  .strict();

export const IdempotencyKey = z.string().min(1).max(IDEMPOTENCY_KEY_MAX_CHARS).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const CreateSpeechBody = z
  .object({
    model: z.string().min(1).max(100).optional().describe('A speech model id (GET /v2/models); default: the first model of the configured voice provider.'),
    input: text({ notBlank: true }).describe("The text to speak: not blank, at most the model's max_input_chars characters (Unicode code points), which are billed."),
    voice: text({ max_chars: 200, min_chars: 1 }).describe("A voice_id of this workspace's cloned voices (GET /v2/audio/voices) or a preset voice of the provider."),
    response_format: z
      .enum(['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'], { error: 'must be one of mp3, opus, aac, flac, wav, pcm' })
      .optional()
      .describe('wav (default): a RIFF WAVE file; pcm: raw signed 16-bit little-endian mono samples; mp3; opus (in Ogg); aac (ADTS); flac.'),
    speed: z.number().min(0.25).max(4).optional().describe('Speaking rate, 1 = normal (default), 0.25 to 4; providers that cannot change it speak at 1.'),
    stream_format: z
      .enum(['audio', 'sse'], { error: 'must be one of audio, sse' })
      .optional()
      .describe('audio: the bytes are streamed as they are made (mp3, wav and pcm before the synthesis ends; opus, aac and flac when it has); sse: server-sent events speech.audio.delta (base64 audio) and speech.audio.done. Absent: one complete file.'),
  })
  .strict();

export const WebhookEventType = z.enum(WEBHOOK_EVENT_TYPES).describe('video.generation.failed includes cancelled jobs.');

export const CreateWebhookBody = z
  .object({
    url: z
      .string()
      .min(1)
      .max(WEBHOOK_URL_MAX_CHARS)
      .describe(
        'Where events are POSTed: an https URL naming its host by a DNS name (not an IP address), without credentials or fragment; ' +
          'in development (not NODE_ENV=production) also a loopback URL (localhost, 127.x.x.x, [::1]) over http or https. ' +
          'The name is resolved at every delivery attempt, and an attempt to a host resolving to a private, loopback, link-local or otherwise non-public address is refused (its deliveries show why).',
      ),
    events: z
      .array(WebhookEventType)
      .min(1)
      .max(WEBHOOK_EVENT_TYPES.length)
      .refine((a) => new Set(a).size === a.length, 'must not repeat an event type')
      .meta({ uniqueItems: true })
      .optional()
      .describe('The event types sent to this endpoint; default all of them.'),
  })
  .strict();

export const LIST_LIMIT_MAX = 100;
export const LIST_LIMIT_DEFAULT = 20;
/** The public ids of the entries of the ledger and of webhook delivery attempts: a prefix and a serial number. */
export const LEDGER_ENTRY_ID_PREFIX = 'le_';
export const DELIVERY_ATTEMPT_ID_PREFIX = 'whatt_';
const PageLimit = z.coerce.number().int().min(1).max(LIST_LIMIT_MAX).default(LIST_LIMIT_DEFAULT).describe(`Items per page, 1 to ${LIST_LIMIT_MAX}.`);
/** Query of a paginated list whose ids are `prefix` + a serial number: newest first, `after` = the id of the last item of the previous page. */
const serialPageQuery = (prefix: string) =>
  z
    .object({
      limit: PageLimit,
      after: z
        .string()
        .regex(new RegExp(`^${prefix}[0-9]{1,15}$`), `must be an id of this list (${prefix}<number>)`)
        .optional()
        .describe(`The \`id\` (${prefix}<number>) of the last item of the previous page; absent for the first page.`),
    })
    .strict();
export const LedgerPageQuery = serialPageQuery(LEDGER_ENTRY_ID_PREFIX);
export const DeliveryPageQuery = serialPageQuery(DELIVERY_ATTEMPT_ID_PREFIX);
export type PageQuery = z.infer<typeof LedgerPageQuery>;

/** GET /v2/videos/generations: a page of the workspace's jobs, newest first. */
export const ListVideoJobsQuery = z.strictObject({
  limit: PageLimit,
  after: z.uuid().optional().describe('The `id` of the last job of the previous page (a job of this workspace: another is a 404); absent for the first page.'),
  status: z.enum(['pending', 'succeeded', 'failed']).optional().describe('Only jobs in this status.'),
  model: z.string().min(1).max(100).optional().describe('Only jobs of this model (a retired id means its replacement).'),
});
export type ListVideoJobsQuery = z.infer<typeof ListVideoJobsQuery>;

/** The optional `Idempotency-Key` header, validated (a 400 naming the header when malformed). */
export function idempotencyKeyOf(req: Request): string | undefined {
  const raw = req.get('idempotency-key');
  if (raw === undefined) return undefined;
  const k = IdempotencyKey.safeParse(raw);
  if (!k.success) throw fromZodError(k.error, 'Idempotency-Key');
  return k.data;
}

// ---------------------------------------------------------------------------------------------
// Response schemas: what the API answers (src/models/present.ts and the routes), for the OpenAPI
// document (src/http/openapi.ts), which names each component after its export here. They do not
// build responses; test/http/openapi.test.ts parses real responses with them. Strict objects: a field
// the API sends that is not documented here fails that test.

const Uuid = z.uuid();
const UnixSeconds = z.int().nonnegative();
const Euros = z.number().describe('An amount in euros.');
export const VideoResolution = z.enum(RESOLUTIONS);
export const VideoAspectRatio = z.enum(ASPECT_RATIOS);
const PerSecondByResolution = z.partialRecord(VideoResolution, z.number().nonnegative());
export const SpeechResponseFormat = z.enum(['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm']);
/** The `type` of an error; matches ErrorType in ./errors.ts (checked by test/http/openapi.test.ts). */
export const ApiErrorType = z.enum([
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'insufficient_credits_error',
  'not_found_error',
  'idempotency_error',
  'rate_limit_error',
  'provider_error',
  'api_error',
]);

export const ErrorResponse = z
  .strictObject({
    error: z.strictObject({
      type: ApiErrorType,
      code: z.string().describe('Machine-readable, e.g. invalid_parameter, model_not_found, insufficient_credits.'),
      message: z.string().describe('Human-readable explanation.'),
      param: z.string().nullable().describe('The parameter, header or multipart part at fault, when there is one (e.g. "n", "Idempotency-Key", "file").'),
    }),
  })
  .describe('Every error, whatever its status, has this shape.');

export const VideoJob = z
  .strictObject({
    id: Uuid,
    object: z.literal('video.generation_job'),
    status: z.enum(['pending', 'succeeded', 'failed']),
    model: z.string(),
    created: UnixSeconds.describe('Unix time (seconds).'),
    completed: UnixSeconds.nullable().describe('Unix time (seconds) the job finished; null while pending.'),
    params: z.strictObject({
      durationSeconds: z.int().positive(),
      resolution: VideoResolution,
      aspectRatio: VideoAspectRatio,
      n: z.int().positive(),
    }).describe('The parameters the job runs with, defaults applied.'),
    estimated_cost_in_euro: Euros.describe('Charged when the job was accepted: n videos at the model price.'),
    cost_in_euro: Euros.nullable().describe('The final charge once the job has finished; null while pending.'),
    refunded_in_euro: Euros.describe('Refunded of the estimate (failed job, fewer videos than n).'),
    videos: z
      .array(
        z.strictObject({
          url: z.url().describe('An expiring download URL (GET /v2/files/{key} with local storage, a presigned bucket URL with S3); fetch the job again for a fresh one.'),
          expires_at: UnixSeconds.describe('Unix time (seconds) the URL stops working.'),
          content_type: z.string(),
        }),
      )
      .describe('Filled when succeeded; empty otherwise.'),
    error: z.strictObject({ code: z.string(), message: z.string() }).nullable().describe('Why the job failed; null unless failed.'),
    backend: z.string().nullable().describe('The backend that ran the job (simulator, vertex, fal, replicate); null until one accepted it.'),
    progress: z.int().min(0).max(100).nullable().describe('0-100 as the provider reports it (only moves forward); 100 once succeeded; null when the provider gives none.'),
    queue_position: z.int().min(0).nullable().describe("The job's place in the provider's queue, where the provider says (only moves forward); null otherwise."),
  })
  .describe('A video generation job.');
export const VideoJobList = z.strictObject({
  object: z.literal('list'),
  data: z.array(VideoJob).describe('Newest first.'),
  has_more: z.boolean().describe('Whether another page follows: ask again with `after` = the last `id` of this one.'),
});
/** An operator's view of a job: its record (what GET answers) beside its workflow's answer to the jobState query. */
export const AdminVideoJob = z.strictObject({
  id: Uuid,
  object: z.literal('admin.video_job'),
  record: VideoJob.describe('The job as GET /v2/videos/generations/{id} answers it: its record.'),
  workflow: z
    .strictObject({
      status: z.string().nullable().describe("The workflow's own status (charging, pending, succeeded, failed, or a refusal); null when it did not answer."),
      state: VideoJob.nullable().describe('The workflow\'s answer to the jobState query, presented like the record; null when it did not answer.'),
      failure: z.string().nullable().describe('Why the workflow did not answer (closed past retention, no worker, timed out); null when it did.'),
    })
    .describe("The job's workflow, queried now."),
});
export const VideoJobDeleted = z.strictObject({ id: Uuid, object: z.literal('video.generation_job'), deleted: z.literal(true) });

export const VideoModel = z
  .strictObject({
    id: z.string(),
    object: z.literal('model'),
    kind: z.literal('video'),
    owned_by: z.string(),
    family: z.string(),
    variant: z.enum(['standard', 'fast', 'simulated']),
    region: z.string().describe('Where the model is hosted.'),
    backend: z.enum(VIDEO_BACKENDS).nullable().describe('What serves the model here (the first of `backends` configured); null when nothing does (not available).'),
    backends: z
      .array(
        z.strictObject({
          backend: z.enum(VIDEO_BACKENDS),
          region: z.string().describe('Where this backend runs the model; fal and Replicate document no region ("global").'),
          available: z.boolean().describe('Whether this backend is configured here.'),
        }),
      )
      .describe('Every backend that can serve the model, in order: a job refused by one for a passing reason goes to the next, at the same price.'),
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
      per_second_in_euro: PerSecondByResolution.describe("Price of one second of video, by resolution, at the model's default audio setting."),
      per_second_with_audio_in_euro: PerSecondByResolution.nullable().describe('With generateAudio true; null when the model has no audio.'),
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
    backend: z.enum(['simulator', 'elevenlabs']).nullable().describe('The voice provider serving the model; null when it is not the configured one.'),
    simulated: z.boolean(),
    available: z.boolean(),
    max_input_chars: z.int().positive(),
    response_formats: z.array(SpeechResponseFormat),
    preset_voices: z.array(z.string()).describe("The provider's preset voices: usable as `voice` by every workspace without cloning; empty when the model is not available."),
    pricing: z.strictObject({
      currency: z.literal('EUR'),
      unit: z.literal('1000_characters'),
      per_1000_characters_in_euro: z.number().nonnegative(),
    }),
  })
  .describe('A text-to-speech model.');

export const Model = z.discriminatedUnion('kind', [VideoModel, SpeechModel]);
export const ModelList = z.strictObject({ object: z.literal('list'), data: z.array(Model) });

export const Voice = z
  .strictObject({
    id: Uuid.describe('Registry id: for GET and DELETE /v2/audio/voices/{id}.'),
    object: z.literal('voice'),
    voice_id: z.string().describe('The provider voice id: the `voice` of POST /v2/audio/speech.'),
    name: z.string(),
    requires_verification: z.boolean(),
    created: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe("A cloned voice, visible only from its own workspace.");
export const VoiceList = z.strictObject({ object: z.literal('list'), data: z.array(Voice) });
export const VoiceDeleted = z.strictObject({ id: Uuid, object: z.literal('voice'), deleted: z.literal(true) });

export const Health = z.strictObject({ ok: z.boolean() });

// Admin API
export const Workspace = z.strictObject({
  id: Uuid,
  object: z.literal('workspace'),
  name: z.string(),
  balance_in_euro: Euros,
  max_pending_jobs: z.number().int().nullable().describe("Video jobs the workspace may have pending at once; null = the service's default (MAX_PENDING_JOBS_PER_WORKSPACE)."),
});
export const WorkspaceCredits = z.strictObject({
  id: Uuid,
  object: z.literal('workspace'),
  balance_in_euro: Euros.describe('The balance after the top-up.'),
  topup_id: Uuid.describe('The same for a retry with the same Idempotency-Key.'),
});
export const ApiKey = z.strictObject({
  id: Uuid,
  object: z.literal('api_key'),
  key: z.string().describe('The bearer key; shown this once only.'),
  models: z.array(z.string()).nullable().describe('The models the key may use; null = all.'),
  spend_limit_in_euro: Euros.nullable().describe("Most the key's jobs and speech may charge, net of refunds; null = no limit."),
});
const MicroEuros = z.int();
export const LedgerAudit = z
  .strictObject({
    ok: z.boolean(),
    workspaces_checked: z.int().nonnegative(),
    jobs_checked: z.int().nonnegative(),
    ledger_entries: z.int().nonnegative(),
    balance_mismatches: z.array(z.strictObject({ workspace_id: Uuid, balance_micro_eur: MicroEuros, ledger_sum_micro_eur: MicroEuros })),
    job_mismatches: z.array(
      z.strictObject({ job_id: Uuid, status: z.string(), expected_net_charge_micro_eur: MicroEuros, ledger_net_charge_micro_eur: MicroEuros }),
    ),
    hold_mismatches: z.array(z.strictObject({ workspace_id: Uuid, held_micro_eur: MicroEuros, holds_sum_micro_eur: MicroEuros })),
    key_spend_mismatches: z.array(z.strictObject({ api_key_id: Uuid, spent_micro_eur: MicroEuros, charged_micro_eur: MicroEuros })),
    speech_requests_checked: z.int().nonnegative(),
    speech_mismatches: z.array(z.strictObject({ speech_request_id: Uuid, cost_micro_eur: MicroEuros, ledger_net_charge_micro_eur: MicroEuros })),
    stale_speech_holds: z
      .array(z.strictObject({ speech_request_id: Uuid, held_since: z.string() }))
      .describe('Speech requests still holding credits long after the hold should have been released (the reconciler releases them within two intervals).'),
    topups_checked: z.int().nonnegative(),
    topup_mismatches: z
      .array(z.strictObject({ topup_id: Uuid, amount_micro_eur: MicroEuros, ledger_sum_micro_eur: MicroEuros, entries: z.int() }))
      .describe('Top-ups that are not exactly one ledger entry of their workspace and amount (entries -1: a top-up entry naming no top-up of its workspace).'),
    pending_jobs_checked: z.int().nonnegative().describe('Pending jobs whose workflow was looked up in Temporal.'),
    unaccounted_jobs: z
      .array(
        z.strictObject({
          job_id: Uuid,
          reason: z.enum(['workflow_not_running', 'past_deadline', 'charged_after_refusal']),
          detail: z.string(),
        }),
      )
      .describe('Charged jobs nothing will settle: a pending job whose workflow is not running, one pending long past its deadline, a charge for a refused attempt. The reconciler settles the first kind within two intervals.'),
  })
  .describe(
    'ok: every balance equals the sum of its ledger entries, every speech hold is backed by a request in flight, every API key\'s spend is what its requests charged net of refunds, every job and speech charge matches its cost, and no charged job is unaccounted for (at most 100 of each kind listed).',
  );

export const ApiKeyRevoked = z.strictObject({ id: Uuid, object: z.literal('api_key'), revoked: z.literal(true) });

// Balance and ledger statement
export const Balance = z.strictObject({ object: z.literal('balance'), balance_in_euro: Euros }).describe("The caller's workspace balance.");
export const LedgerEntry = z
  .strictObject({
    id: z.string().regex(/^le_\d+$/).describe('The entry id; `after` of the next page.'),
    object: z.literal('ledger_entry'),
    type: z.enum(['credit', 'charge', 'refund']).describe('credit: a top-up; charge: a video job (its estimate, charged up front) or a speech request; refund: what a job did not deliver.'),
    amount_in_euro: z.number().positive().describe('The amount moved, always positive; `type` says which way.'),
    balance_after_in_euro: Euros.describe('The workspace balance right after this entry.'),
    job_id: Uuid.nullable().describe('The video job the entry belongs to; null for credits and speech.'),
    speech_request_id: Uuid.nullable().describe('The speech request charged (X-Speech-Request-Id); null otherwise.'),
    created: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe('One entry of the append-only ledger.');
export const LedgerEntryList = z.strictObject({ object: z.literal('list'), data: z.array(LedgerEntry).describe('Newest first.'), has_more: z.boolean() });

// Webhooks
export const WebhookEndpoint = z
  .strictObject({
    id: Uuid,
    object: z.literal('webhook_endpoint'),
    url: z.string(),
    events: z.array(WebhookEventType),
    created: UnixSeconds.describe('Unix time (seconds).'),
  })
  .describe("An endpoint of the caller's workspace (its secret is shown only when it is created).");
export const WebhookEndpointCreated = WebhookEndpoint.extend({
  secret: z.string().regex(/^whsec_[A-Za-z0-9+/]+={0,2}$/).describe('The signing secret, `whsec_` + base64 of 32 random bytes; shown this once only.'),
}).describe('The new endpoint, with its signing secret.');
export const WebhookEndpointList = z.strictObject({ object: z.literal('list'), data: z.array(WebhookEndpoint).describe('Newest first.') });
export const WebhookEndpointDeleted = z.strictObject({ id: Uuid, object: z.literal('webhook_endpoint'), deleted: z.literal(true) });
export const WebhookDeliveryAttempt = z
  .strictObject({
    id: z.string().regex(/^whatt_\d+$/).describe('The attempt id; `after` of the next page.'),
    object: z.literal('webhook_delivery_attempt'),
    delivery_id: Uuid.describe('The delivery (one event to this endpoint) the attempt belongs to.'),
    event_id: z.string().describe('The event sent: the `webhook-id` header and the body `id`, the same on every attempt.'),
    event_type: WebhookEventType,
    attempt: z.int().positive().describe('1 for the first attempt of the delivery, then 2, 3, ...'),
    created: UnixSeconds.describe('Unix time (seconds) of the attempt (its `webhook-timestamp`).'),
    status: z.enum(['succeeded', 'failed']).describe('succeeded: answered 2xx within 10 s.'),
    http_status: z.int().nullable().describe("The endpoint's HTTP status; null when none was received."),
    error: z.string().nullable().describe('Why the attempt failed (e.g. HTTP 500, redirect (302) not followed, timeout, connection refused); null when it succeeded.'),
    duration_ms: z.int().nonnegative(),
    delivery_status: z.enum(['pending', 'succeeded', 'failed']).describe('The delivery now: pending while retried, failed once given up (after 24 hours) or the endpoint deleted.'),
  })
  .describe('One HTTP attempt to deliver an event to the endpoint.');
export const WebhookDeliveryAttemptList = z.strictObject({
  object: z.literal('list'),
  data: z.array(WebhookDeliveryAttempt).describe('Newest first.'),
  has_more: z.boolean(),
});
export const WebhookEvent = z
  .strictObject({
    id: z.string().regex(/^evt_[0-9a-f]{32}$/).describe('The event id, also sent as the `webhook-id` header: the same on every retry; use it to process an event once.'),
    object: z.literal('event'),
    type: WebhookEventType,
    created: UnixSeconds.describe('Unix time (seconds) the event happened.'),
    data: VideoJob,
  })
  .describe(
    'The body of every webhook delivery (POST, application/json), signed per Standard Webhooks. `data` is the job as GET /v2/videos/generations/{id} ' +
      'answered when the event happened; its video URLs expire: fetch the job again for fresh ones.',
  );
