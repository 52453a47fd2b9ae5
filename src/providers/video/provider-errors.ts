// What a job's customer is told about a provider call that failed. The provider's own text is kept only
// where it is about the customer's request (a prompt or input the provider refuses); every other failure
// (our credentials, our project's resources, transport errors, a bug) is described in general terms, and
// the provider's text goes to the operator's log only: it can name our cloud project, bucket or ids.
import { ProviderError } from './types.js';

const CUSTOMER_VISIBLE_CODES = new Set(['invalid_request']);
const GENERIC_MESSAGES: Record<string, string> = {
  provider_unauthenticated: "the video provider refused the service's credentials; the operator has been alerted",
  provider_permission_denied: "the video provider refused the service's credentials; the operator has been alerted",
};

/** Longest provider Retry-After honoured, so a far-off date cannot park a job. */
export const RETRY_AFTER_MS_MAX = 60_000;

export interface DescribedProviderError {
  code: string;
  /** For the customer. */
  message: string;
  retryable: boolean;
  /** The provider's Retry-After, clamped to 1 s .. RETRY_AFTER_MS_MAX, when it gave one. */
  retry_after_ms?: number;
  /** The provider's own text reached the customer (else it belongs in the operator's log). */
  visible: boolean;
}

export function describeProviderError(err: ProviderError): DescribedProviderError {
  const visible = CUSTOMER_VISIBLE_CODES.has(err.opts.code);
  return {
    code: err.opts.code,
    message: visible ? err.message : (GENERIC_MESSAGES[err.opts.code] ?? `the video provider call failed (${err.opts.code})`),
    retryable: err.opts.retryable,
    ...(err.opts.retryable && err.opts.retry_after_ms !== undefined
      ? { retry_after_ms: Math.min(Math.max(err.opts.retry_after_ms, 1_000), RETRY_AFTER_MS_MAX) }
      : {}),
    visible,
  };
}

/** Anything that is not the provider's answer (a bug, a database error in an adapter): passing, described in general terms. */
export const INTERNAL_PROVIDER_ERROR: DescribedProviderError = {
  code: 'internal_error',
  message: 'the video provider call failed (internal_error)',
  retryable: true,
  visible: false,
};

export const describeAnyProviderError = (err: unknown): DescribedProviderError =>
  err instanceof ProviderError ? describeProviderError(err) : INTERNAL_PROVIDER_ERROR;

/**
 * Why a provider call failed, as far as waiting may help: `passing` (429, 5xx, timeouts: the provider
 * said to try again), `credentials` (our key, token or account refused: an operator's rotation or a
 * permission fixes it, and the provider's operation runs on meanwhile), `unreadable` (an answer we could
 * not read: a proxy's page, a truncated body), `final` (anything else: the provider's answer stands).
 */
export type ProviderErrorKind = 'passing' | 'credentials' | 'unreadable' | 'final';

const CREDENTIAL_CODES: ReadonlySet<string> = new Set([
  'provider_unauthenticated',
  'provider_permission_denied',
  'provider_auth_failed',
  'provider_payment_required',
]);

export function providerErrorKind(e: Pick<DescribedProviderError, 'code' | 'retryable'>): ProviderErrorKind {
  if (CREDENTIAL_CODES.has(e.code)) return 'credentials';
  if (e.code === 'invalid_response') return 'unreadable';
  return e.retryable ? 'passing' : 'final';
}

/** A provider error that may pass with time (a passing refusal, or our credentials refused): worth another try. */
export const mayPass = (e: Pick<DescribedProviderError, 'code' | 'retryable'>): boolean =>
  e.retryable || providerErrorKind(e) === 'credentials';
