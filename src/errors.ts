// The errors the service answers its customers with, in one shape: {"error": {"type", "code", "message",
// "param"}}. Services throw them (a refusal, a missing resource, a limit reached, a dependency down); the
// HTTP surfaces render them (src/http/errors.ts for /v2, src/http/openai/errors.ts in OpenAI's format).
import { ZodError } from 'zod';

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'insufficient_credits_error'
  | 'not_found_error'
  | 'idempotency_error'
  | 'rate_limit_error'
  | 'provider_error'
  | 'api_error';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const invalidParam = (param: string | null, message: string, code = 'invalid_parameter') =>
  new ApiError(400, 'invalid_request_error', code, message, param);
export const notFound = (code: string, message: string, param: string | null = null) =>
  new ApiError(404, 'not_found_error', code, message, param);

/** A request the API key's spend limit does not cover: 402, nothing charged. */
export const keySpendLimitExceeded = () =>
  new ApiError(
    402,
    'insufficient_credits_error',
    'key_spend_limit_exceeded',
    "this API key's spend limit does not cover the cost of this request; nothing was charged",
  );

/** Turns the first zod issue into a 400 naming the parameter. */
export function fromZodError(err: ZodError, prefix = ''): ApiError {
  const issue = err.issues[0]!;
  let path = issue.path.map(String);
  if (issue.code === 'unrecognized_keys' && issue.keys[0]) path = [...path, issue.keys[0]];
  const param = prefix + path.join('.') || null;
  // zod does not report the input by default: a missing value is the type error that received undefined.
  const missing = issue.code === 'invalid_type' && / received undefined$/.test(issue.message);
  const message =
    issue.code === 'unrecognized_keys'
      ? `unknown parameter: ${param}`
      : missing
        ? `missing required parameter: ${param}`
        : `invalid ${param ?? 'request'}: ${issue.message}`;
  return new ApiError(400, 'invalid_request_error', missing ? 'missing_parameter' : 'invalid_parameter', message, param);
}
