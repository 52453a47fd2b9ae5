// The fingerprint of a create request: an Idempotency-Key reused with another request is refused (409).
// Canonical JSON (RFC 8785, the `canonicalize` package), so the same request with its keys in another
// order is the same request. Jobs created by the first release stored a hash of JSON.stringify (key
// order as sent); they still match a retry that sends the same bytes.
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

export interface Fingerprint {
  /** What a new job stores. */
  current: string;
  /** Whether a stored fingerprint (of this release or the first) names this request. */
  matches(stored: string): boolean;
}

const CANONICAL_PREFIX = 'v2:';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export function requestFingerprint(parts: {
  model: string;
  prompt: string;
  params: object;
  seed: number | null;
  parameters: object | null;
  /** Further inputs (images by digest, audio, negative prompt), only those the request has. */
  inputs: unknown[];
}): Fingerprint {
  const tuple = [parts.model, parts.prompt, parts.params, parts.seed, parts.parameters, ...parts.inputs];
  const current = CANONICAL_PREFIX + sha256(canonicalize(tuple)!);
  const firstRelease = sha256(JSON.stringify(tuple));
  return { current, matches: (stored) => stored === current || stored === firstRelease };
}
