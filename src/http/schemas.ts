// Request schemas: the single source for validation, request types and (later) the OpenAPI document.
import type { Request } from 'express';
import { z } from 'zod';
import { fromZodError } from './errors.js';
import { DEFAULT_VIDEO_MODEL_ID, VIDEO_MODELS, type VideoModel as CatalogVideoModel } from '../catalog.js';
import { text } from '../zod-text.js';

export const PROMPT_MAX_CHARS = 4_000;
export const IDEMPOTENCY_KEY_MAX_CHARS = 255;

// Per-model limits live in the catalog; the descriptions (OpenAPI only, not validation) say where.
const acrossVideoModels = (pick: (m: CatalogVideoModel) => readonly (string | number)[]) => [...new Set(VIDEO_MODELS.flatMap(pick))].join(', ');
const defaultVideoModel = VIDEO_MODELS.find((m) => m.id === DEFAULT_VIDEO_MODEL_ID);

export const CreateVideoBody = z
  .object({
    prompt: text({ max_chars: PROMPT_MAX_CHARS, notBlank: true }).describe(`What to generate: at most ${PROMPT_MAX_CHARS} characters, not blank (leading and trailing white space is removed).`),
    model: z.string().min(1).max(100).optional().describe(`A video model id (GET /v2/models); default ${DEFAULT_VIDEO_MODEL_ID}.`),
    n: z.number().int().min(1).optional().describe(`Videos to generate: 1 to the model's max_n (at most ${Math.max(...VIDEO_MODELS.map((m) => m.max_n))} for the current models); default ${defaultVideoModel?.default_params.n}.`),
    durationSeconds: z.number().int().optional().describe(`Seconds per video: one of the model's durations_seconds (${acrossVideoModels((m) => m.durations_s)}); default ${defaultVideoModel?.default_params.durationSeconds}.`),
    resolution: z.string().max(20).optional().describe(`One of the model's resolutions (${acrossVideoModels((m) => m.resolutions)}); default ${defaultVideoModel?.default_params.resolution}.`),
    aspectRatio: z.string().max(20).optional().describe(`One of the model's aspect_ratios (${acrossVideoModels((m) => m.aspect_ratios)}); default ${defaultVideoModel?.default_params.aspectRatio}.`),
    seed: z.number().int().min(0).max(4_294_967_295).optional().describe('For repeatable output, with models that have supports_seed.'),
    parameters: z.record(z.string(), z.unknown()).optional().describe('Model-specific options, passed to models that read them (sim-video-1 reads parameters.simulate); ignored by the others.'),
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
  .object({ models: z.array(z.string().min(1).max(100)).min(1).max(100).optional() })
  .strict();

export const IdempotencyKey = z.string().min(1).max(IDEMPOTENCY_KEY_MAX_CHARS).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const CreateSpeechBody = z
  .object({
    model: z.string().min(1).max(100).optional().describe('A speech model id (GET /v2/models); default: the first model of the configured voice provider.'),
    input: text({ notBlank: true }).describe("The text to speak: not blank, at most the model's max_input_chars characters (Unicode code points), which are billed."),
    voice: text({ max_chars: 200, min_chars: 1 }).describe("A voice_id of this workspace's cloned voices (GET /v2/audio/voices) or a preset voice of the provider."),
    response_format: z.enum(['wav', 'pcm'], { error: 'must be one of wav, pcm' }).optional().describe('wav (default): a RIFF WAVE file; pcm: raw signed 16-bit little-endian mono samples.'),
  })
  .strict();

/** The optional `Idempotency-Key` header, validated (a 400 naming the header when malformed). */
export function idempotencyKeyOf(req: Request): string | undefined {
  const raw = req.get('idempotency-key');
  if (raw === undefined) return undefined;
  const k = IdempotencyKey.safeParse(raw);
  if (!k.success) throw fromZodError(k.error, 'Idempotency-Key');
  return k.data;
}

// ---------------------------------------------------------------------------------------------
// Response schemas: what the API answers (src/http/presenters.ts and the routes), for the OpenAPI
// document (src/http/openapi.ts), which names each component after its export here. They do not
// build responses; test/openapi.test.ts parses real responses with them. Strict objects: a field
// the API sends that is not documented here fails that test.

const Uuid = z.uuid();
const UnixSeconds = z.int().nonnegative();
const Euros = z.number().describe('An amount in euros.');
export const VideoResolution = z.enum(['720p', '1080p']);
export const VideoAspectRatio = z.enum(['16:9', '9:16']);
export const SpeechResponseFormat = z.enum(['wav', 'pcm']);
/** The `type` of an error; matches ErrorType in ./errors.ts (checked by test/openapi.test.ts). */
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
  })
  .describe('A video generation job.');

export const VideoModel = z
  .strictObject({
    id: z.string(),
    object: z.literal('model'),
    kind: z.literal('video'),
    owned_by: z.string(),
    family: z.string(),
    variant: z.enum(['standard', 'fast', 'simulated']),
    region: z.string().describe('Where the model is hosted.'),
    backend: z.enum(['simulator', 'vertex']).nullable().describe('What serves the model here; null when nothing does (not available).'),
    simulated: z.boolean(),
    available: z.boolean(),
    durations_seconds: z.array(z.int().positive()),
    resolutions: z.array(VideoResolution),
    aspect_ratios: z.array(VideoAspectRatio),
    max_n: z.int().positive().describe('The most videos one request may ask for.'),
    supports_seed: z.boolean(),
    pricing: z.strictObject({
      currency: z.literal('EUR'),
      unit: z.literal('second_of_video'),
      per_second_in_euro: z.partialRecord(VideoResolution, z.number().nonnegative()).describe('Price of one second of video, by resolution.'),
    }),
  })
  .describe('A video model.');

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

// Admin API (contract.md 3)
export const Workspace = z.strictObject({ id: Uuid, object: z.literal('workspace'), name: z.string(), balance_in_euro: Euros });
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
    speech_requests_checked: z.int().nonnegative(),
    speech_mismatches: z.array(z.strictObject({ speech_request_id: Uuid, cost_micro_eur: MicroEuros, ledger_net_charge_micro_eur: MicroEuros })),
  })
  .describe('ok: every balance equals the sum of its ledger entries and every job and speech charge matches its cost (at most 100 mismatches of each kind listed).');
