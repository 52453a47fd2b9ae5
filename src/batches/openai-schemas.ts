// /v1 batches and files in OpenAI's shapes (https://platform.openai.com/docs/api-reference/batch,
// https://platform.openai.com/docs/api-reference/files): what the openai SDK's batches and files calls send and read.
import { z } from 'zod';
import { UnixSeconds, Uuid } from '../http/schemas.js';
import { BATCH_STATUSES, Metadata } from './schemas.js';

export const OPENAI_BATCH_ENDPOINTS = ['/v1/videos', '/v1/audio/speech'] as const;

export const OpenAiCreateBatchBody = z
  .strictObject({
    input_file_id: z.string().min(1).max(64).describe('A file uploaded with purpose "batch" (POST /v1/files): one request per line.'),
    endpoint: z.enum(OPENAI_BATCH_ENDPOINTS).describe('The endpoint every line names: /v1/videos or /v1/audio/speech.'),
    completion_window: z
      .string()
      .regex(/^\d{1,3}h$/, 'must be hours, e.g. "24h"')
      .describe('How long the batch may run: "24h" (the longest), or fewer hours.'),
    metadata: Metadata,
  })
  .describe('A batch of the requests of an uploaded file (client.batches.create).');

export const OpenAiBatch = z
  .strictObject({
    id: Uuid,
    object: z.literal('batch'),
    endpoint: z.string(),
    errors: z.null(),
    input_file_id: z.string(),
    completion_window: z.string(),
    status: z.enum(BATCH_STATUSES),
    output_file_id: z.string().nullable(),
    error_file_id: z.string().nullable(),
    created_at: UnixSeconds,
    in_progress_at: UnixSeconds.nullable(),
    expires_at: UnixSeconds,
    finalizing_at: UnixSeconds.nullable(),
    completed_at: UnixSeconds.nullable(),
    failed_at: UnixSeconds.nullable(),
    expired_at: UnixSeconds.nullable(),
    cancelling_at: UnixSeconds.nullable(),
    cancelled_at: UnixSeconds.nullable(),
    request_counts: z.strictObject({ total: z.int().nonnegative(), completed: z.int().nonnegative(), failed: z.int().nonnegative() }),
    metadata: z.record(z.string(), z.string()).nullable(),
  })
  .describe("A batch as OpenAI's `batch` object.");

export const OpenAiFile = z
  .strictObject({
    id: Uuid,
    object: z.literal('file'),
    bytes: z.int().nonnegative(),
    created_at: UnixSeconds,
    filename: z.string(),
    purpose: z.enum(['batch', 'batch_output', 'batch_error']),
    status: z.literal('processed'),
    expires_at: z.null(),
    status_details: z.null(),
  })
  .describe("A file as OpenAI's `file` object.");

export const OPENAI_RESPONSE_COMPONENTS = { OpenAiBatch, OpenAiFile } satisfies Record<string, z.ZodType>;
