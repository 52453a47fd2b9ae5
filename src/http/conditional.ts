// Conditional reads of jobs: each answer carries an entity tag of its exact bytes (ETag), and a read
// whose If-None-Match names the current tag is answered 304 with no body. A client polling a job then
// downloads it only when something in it changed; the read itself costs the same row read either way.
// Express's own check (`req.fresh`) is not used: it ignores If-None-Match when the request carries
// `Cache-Control: no-cache`, which fetch() adds to every request that sets If-None-Match by hand, so
// no client written with fetch would ever get its 304.
import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { header } from './openapi.js';
import { invalidParam } from '../errors.js';

/** The strong entity tag of a body: any change of any byte of the answer changes it. */
export function entityTagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
}

/**
 * Whether an If-None-Match header names `etag` (RFC 9110 13.1.2: weak comparison, a list of tags, or
 * `*` for any current representation).
 */
export function ifNoneMatchNames(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  const opaque = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);
  const wanted = opaque(etag);
  return ifNoneMatch
    .split(',')
    .map((t) => t.trim())
    .some((t) => t === '*' || opaque(t) === wanted);
}

/**
 * Answers `body` as JSON with its ETag, or 304 Not Modified when the request's If-None-Match names that
 * tag. `Cache-Control: private, no-cache`: a cache may keep the answer but must ask again each time.
 */
export function sendJsonConditionally(req: Request, res: Response, body: unknown): void {
  const ifNoneMatch = req.headers['if-none-match'];
  if (ifNoneMatch !== undefined && ifNoneMatch.length > IF_NONE_MATCH_CHARS_MAX)
    throw invalidParam('If-None-Match', `If-None-Match must be at most ${IF_NONE_MATCH_CHARS_MAX} characters`);
  const text = JSON.stringify(body);
  const etag = entityTagOf(text);
  res.setHeader('ETag', etag);
  res.setHeader('Cache-Control', 'private, no-cache');
  if (ifNoneMatchNames(ifNoneMatch, etag)) {
    res.status(304).end();
    return;
  }
  // Written directly rather than through Express's res.send: the type, length and tag are known, and
  // send's content-type parsing, freshness and tag checks would only redo them on every poll.
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(req.method === 'HEAD' ? undefined : text);
}

/** The longest If-None-Match a conditional read takes (a list of a few dozen tags); longer is a 400. */
export const IF_NONE_MATCH_CHARS_MAX = 2048;

/** The If-None-Match parameter of a conditional read, for its contract. */
export const IF_NONE_MATCH_PARAMETER = {
  name: 'If-None-Match',
  in: 'header' as const,
  required: false,
  description: 'The `ETag` of an earlier answer: when nothing in the answer changed since, it is 304 with no body.',
  schema: { type: 'string' as const, maxLength: IF_NONE_MATCH_CHARS_MAX },
};

/** The headers of a conditional read's 200 answer. */
export const CONDITIONAL_HEADERS = {
  ETag: header('A tag of this exact answer: it changes whenever anything in the answer does. Send it back in `If-None-Match`.'),
  'Cache-Control': header('`private, no-cache`.'),
};

/** The 304 answer of a conditional read. */
export const NOT_MODIFIED_RESPONSE = {
  description: 'Not modified: the answer is still the one whose `ETag` was sent in `If-None-Match` (no body).',
  headers: { ETag: header('The same tag.') },
};
