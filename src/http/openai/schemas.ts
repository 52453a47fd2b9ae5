// Schemas of the OpenAI-compatible surface (/v1) that every feature's /v1 routes share: OpenAI's error
// shape. Each feature's /v1 response schemas are in its openai-schemas.ts, in OpenAI's shapes; like the
// /v2 response schemas they do not build responses: test/http/openapi.responses.test.ts parses real /v1 responses
// with them, and strict objects make a field sent but not documented fail there.
import { z } from 'zod';

/** OpenAI's error `type`s this surface answers (./errors.ts maps the service's types onto them). */
export const OpenAiErrorType = z.enum([
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'insufficient_quota',
  'not_found_error',
  'idempotency_error',
  'rate_limit_error',
  'server_error',
]);

export const OpenAiErrorResponse = z
  .strictObject({
    error: z.strictObject({
      message: z.string().describe('Human-readable explanation.'),
      type: OpenAiErrorType.describe("OpenAI's error type; the SDKs choose their error class by the status, not by this."),
      param: z
        .string()
        .nullable()
        .describe('The parameter or multipart part at fault, when there is one (e.g. "size", "input_reference").'),
      code: z.string().describe('Machine-readable, e.g. invalid_parameter, model_not_found, insufficient_credits, unsupported_feature.'),
    }),
  })
  .describe("Every /v1 error, whatever its status, has OpenAI's shape.");

export const OPENAI_RESPONSE_COMPONENTS = { OpenAiErrorResponse } satisfies Record<string, z.ZodType>;
