// GET /v2/files/{key}?expires=&signature=: stored outputs behind signed, expiring URLs. Mounted with
// local storage only: with S3, customers download from the bucket through presigned URLs.
import { Router } from 'express';
import { pipeline } from 'node:stream/promises';
import { ApiError, notFound } from '../errors.js';
import { contentTypeOfKey, type Storage } from '../../storage/local.js';
import type { UrlSigner } from '../../storage/signed-urls.js';

export function fileRoutes(deps: { storage: Storage; signer: UrlSigner }): Router {
  const r = Router();
  r.get(/^\/v2\/files\/(.+)$/, async (req, res) => {
    const key = String((req.params as Record<string, string>)['0']);
    const q = (name: string) => (typeof req.query[name] === 'string' ? (req.query[name] as string) : undefined);
    const verdict = deps.signer.verify(key, q('expires'), q('signature'));
    if (verdict === 'expired') throw new ApiError(403, 'permission_error', 'url_expired', 'this signed URL has expired; fetch the job again for a fresh one');
    if (verdict !== 'ok') throw new ApiError(403, 'permission_error', 'invalid_signature', 'this URL is not validly signed');
    const file = await deps.storage.open(key);
    if (!file) throw notFound('file_not_found', 'no such file');
    res.status(200).set({
      'Content-Type': contentTypeOfKey(key),
      'Content-Length': String(file.bytes),
      'Cache-Control': 'private, max-age=300',
    });
    await pipeline(file.stream, res);
  });
  return r;
}
