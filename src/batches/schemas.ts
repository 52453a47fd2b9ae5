// Batches' and files' schemas: the create body, one request line, and the batch and file as /v2 answers them.
import { z } from 'zod';
import { Euros, PageLimit, UnixSeconds, Uuid } from '../http/schemas.js';

/** Requests of one batch at most (inline or lines of its input file). */
export const BATCH_REQUESTS_MAX = 10_000;
/** The longest completion window (and the default): 24 hours. */
export const COMPLETION_WINDOW_HOURS_MAX = 24;
/** The bytes of an inline create's JSON body (10,000 requests of about 2 KiB). */
export const BATCH_CREATE_BODY_BYTES_MAX = 24 * 1024 * 1024;
/** Bytes of one input file line (a request without images is far smaller). */
export const BATCH_LINE_BYTES_MAX = 64 * 1024;

export const BATCH_ENDPOINTS = ['/v2/videos/generations', '/v2/audio/speech'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

export const BatchRequestLine = z
  .strictObject({
    custom_id: z.string().min(1).max(64).optional().describe('Your id of the request (unique in the batch), echoed in the output.'),
    method: z.literal('POST'),
    url: z.enum(BATCH_ENDPOINTS).describe("The endpoint the request is for; its body is that endpoint's create body."),
    body: z.record(z.string(), z.unknown()).describe('The request body exactly as that endpoint takes it (video requests without images).'),
  })
  .describe('One request of a batch.');
export type BatchRequestLine = z.infer<typeof BatchRequestLine>;

const CompletionWindow = z
  .string()
  .regex(/^\d{1,3}h$/, 'must be hours, e.g. "24h"')
  .optional()
  .describe(
    `How long the batch may run ("1h" to "${COMPLETION_WINDOW_HOURS_MAX}h", default "24h"); requests not started by then fail (expired).`,
  );

export const Metadata = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 keys')
  .nullable()
  .optional()
  .describe('Up to 16 key-value pairs of yours, returned with the batch.');

export const CreateBatchBody = z
  .strictObject({
    requests: z
      .array(z.unknown())
      .min(1)
      .max(BATCH_REQUESTS_MAX)
      .optional()
      .describe(
        `The requests, 1 to ${BATCH_REQUESTS_MAX}: each {"custom_id", "method": "POST", "url": "/v2/videos/generations" | "/v2/audio/speech", "body"}. ` +
          'Each is validated as its own request would be; the first bad one is a 400 invalid_batch_request naming its line.',
      ),
    input_file_id: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe('A file uploaded with purpose "batch" (POST /v2/files): one request per line.'),
    endpoint: z.enum(BATCH_ENDPOINTS).optional().describe('With input_file_id: the endpoint every line names.'),
    completion_window: CompletionWindow,
    metadata: Metadata,
  })
  .refine((b) => (b.requests === undefined) !== (b.input_file_id === undefined), {
    message: 'give either requests or input_file_id (with endpoint)',
    path: ['requests'],
  });
export type CreateBatchBody = z.infer<typeof CreateBatchBody>;

export const BATCH_STATUSES = ['validating', 'in_progress', 'completed', 'cancelling', 'cancelled', 'expired', 'failed'] as const;

export const Batch = z
  .strictObject({
    id: Uuid,
    object: z.literal('batch'),
    endpoint: z.string().nullable().describe("The endpoint of an input file's requests; null for inline requests."),
    status: z.enum(BATCH_STATUSES),
    request_counts: z
      .strictObject({ total: z.int().nonnegative(), completed: z.int().nonnegative(), failed: z.int().nonnegative() })
      .describe('completed: ended succeeded (a shortfall included); failed: ended failed or never started.'),
    reserved_in_euro: Euros.describe("The sum of the requests' estimates, reserved when the batch was created."),
    cost_in_euro: Euros.describe('What the requests that ended cost.'),
    refunded_in_euro: Euros.describe(
      'What of the reservation was given back when the batch ended (one refund: failures, shortfalls and requests never started).',
    ),
    input_file_id: z.string().nullable(),
    output_file_id: z.string().nullable().describe('Once ended: the JSONL of the requests that succeeded (GET /v2/files/{id}/content).'),
    error_file_id: z.string().nullable().describe('Once ended: the JSONL of the requests that failed or never started.'),
    completion_window: z.string(),
    created_at: UnixSeconds,
    expires_at: UnixSeconds,
    cancelling_at: UnixSeconds.nullable(),
    completed_at: UnixSeconds.nullable().describe('When it ended (completed, cancelled, expired or failed).'),
    metadata: z.record(z.string(), z.string()).nullable(),
  })
  .describe('A batch of video and speech requests.');

export const BatchList = z.strictObject({
  object: z.literal('list'),
  data: z.array(Batch).describe('Newest first.'),
  has_more: z.boolean(),
});

export const ListBatchesQuery = z.strictObject({
  limit: PageLimit,
  after: z.uuid().optional().describe('The `id` of the last batch of the previous page.'),
});

export const FileObject = z
  .strictObject({
    id: Uuid,
    object: z.literal('file'),
    purpose: z.enum(['batch', 'batch_output', 'batch_error']),
    filename: z.string(),
    bytes: z.int().nonnegative(),
    created_at: UnixSeconds,
  })
  .describe("An uploaded batch input file, or a batch's output or error file.");

export const BatchEvent = z
  .strictObject({
    id: z
      .string()
      .regex(/^evt_[0-9a-f]{32}$/)
      .describe('The event id, also sent as the `webhook-id` header: the same on every retry.'),
    object: z.literal('event'),
    type: z.literal('batch.completed'),
    created: UnixSeconds.describe('Unix time (seconds) the event happened.'),
    data: Batch,
  })
  .describe(
    'The body of a `batch.completed` delivery, signed as every webhook: `data` is the batch, ended, as GET /v2/batches/{id} answers it.',
  );

export const RESPONSE_COMPONENTS = { Batch, BatchList, FileObject, BatchEvent } satisfies Record<string, z.ZodType>;
