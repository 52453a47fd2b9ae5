// Request schemas: the single source for validation, request types and (later) the OpenAPI document.
import type { Request } from 'express';
import { z } from 'zod';
import { fromZodError } from './errors.js';

export const PROMPT_MAX_CHARS = 4_000;
export const IDEMPOTENCY_KEY_MAX_CHARS = 255;

export const CreateVideoBody = z
  .object({
    prompt: z.string().trim().min(1, 'must not be empty').max(PROMPT_MAX_CHARS, `at most ${PROMPT_MAX_CHARS} characters`),
    model: z.string().min(1).max(100).optional(),
    n: z.number().int().min(1).optional(),
    durationSeconds: z.number().int().optional(),
    resolution: z.string().max(20).optional(),
    aspectRatio: z.string().max(20).optional(),
    seed: z.number().int().min(0).max(4_294_967_295).optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type CreateVideoBody = z.infer<typeof CreateVideoBody>;

const euros = z.number().finite().positive().max(1_000_000);

export const CreateWorkspaceBody = z
  .object({ name: z.string().trim().min(1).max(200), credits_in_euro: z.number().finite().min(0).max(1_000_000).optional() })
  .strict();
export const AddCreditsBody = z.object({ amount_in_euro: euros }).strict();
export const CreateApiKeyBody = z
  .object({ models: z.array(z.string().min(1).max(100)).min(1).max(100).optional() })
  .strict();

export const IdempotencyKey = z.string().min(1).max(IDEMPOTENCY_KEY_MAX_CHARS).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const CreateSpeechBody = z
  .object({
    model: z.string().min(1).max(100).optional(),
    input: z.string(),
    voice: z.string().min(1, 'must not be empty').max(200),
    response_format: z.enum(['wav', 'pcm'], { error: 'must be one of wav, pcm' }).optional(),
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
