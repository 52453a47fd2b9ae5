// Schemas every feature's routes share: the Idempotency-Key header, the pages of a list, ids, times and
// amounts, and the error shape. Each feature's request and response schemas are in its own schemas.ts
// (and openai-schemas.ts for /v1), each listing its response components (RESPONSE_COMPONENTS), which
// the composition root (../runtime/app.ts) hands to the OpenAPI document.
import { z } from 'zod';

export const IDEMPOTENCY_KEY_CHARS_MAX = 255;
export const IdempotencyKey = z
  .string()
  .min(1)
  .max(IDEMPOTENCY_KEY_CHARS_MAX)
  .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

export const LIST_LIMIT_MAX = 100;
export const LIST_LIMIT_DEFAULT = 20;
export const PageLimit = z.coerce
  .number()
  .int()
  .min(1)
  .max(LIST_LIMIT_MAX)
  .default(LIST_LIMIT_DEFAULT)
  .describe(`Items per page, 1 to ${LIST_LIMIT_MAX}.`);
/** Query of a paginated list whose ids are `prefix` + a serial number: newest first, `after` = the id of the last item of the previous page. */
export const serialPageQuery = (prefix: string) =>
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
export type PageQuery = z.infer<ReturnType<typeof serialPageQuery>>;

// ---------------------------------------------------------------------------------------------
// Parts of the response schemas: what the API answers, for the OpenAPI document (./openapi.ts), which
// names each component after its key in RESPONSE_COMPONENTS. They do not build responses;
// test/http/openapi.responses.test.ts parses real responses with them. Strict objects: a field the API sends that
// is not documented fails that test.

export const Uuid = z.uuid();
export const UnixSeconds = z.int().nonnegative();
export const Euros = z.number().describe('An amount in euros.');
/** The `type` of an error; matches ErrorType in ./errors.ts (checked by test/http/openapi.setup.ts). */
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
      param: z
        .string()
        .nullable()
        .describe('The parameter, header or multipart part at fault, when there is one (e.g. "n", "Idempotency-Key", "file").'),
    }),
  })
  .describe('Every error, whatever its status, has this shape.');

export const RESPONSE_COMPONENTS = { ErrorResponse } satisfies Record<string, z.ZodType>;
