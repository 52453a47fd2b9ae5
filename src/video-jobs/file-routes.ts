// GET /v2/files/{key}?expires=&signature=: stored outputs behind signed, expiring URLs. Mounted with
// local storage only: with S3, customers download from the bucket through presigned URLs.
import { pipeline } from 'node:stream/promises';
import { ApiError, notFound } from '../errors.js';
import { contentTypeOfKey, type Storage } from '../storage/local.js';
import type { UrlSigner } from '../storage/signed-urls.js';
import { ApiRouter, header } from '../http/openapi.js';

export function fileRoutes(deps: { storage: Storage; signer: UrlSigner }): ApiRouter {
  const api = new ApiRouter();
  api.route(
    {
      method: 'get',
      path: '/v2/files/{key}',
      // The key contains slashes.
      expressPath: /^\/v2\/files\/(.+)$/,
      operationId: 'getFile',
      tag: 'Files',
      summary: 'Download a generated file (signed URL)',
      description:
        'The `url` of a job video: no bearer token, the signature is the credential. URLs expire; GET the job again for a fresh one. ' +
        'Served with local storage (STORAGE_BACKEND=local, the default); with S3 the video URLs are presigned bucket URLs and this route answers 404.',
      security: 'none',
      parameters: [
        {
          name: 'key',
          in: 'path',
          required: true,
          description: 'The storage key, e.g. videos/{job id}/0.mp4 (contains slashes; take the URL as given).',
          schema: { type: 'string' },
        },
        {
          name: 'expires',
          in: 'query',
          required: true,
          description: 'Expiry, Unix seconds.',
          schema: { type: 'string', pattern: '^\\d{1,12}$' },
        },
        {
          name: 'signature',
          in: 'query',
          required: true,
          description: 'HMAC signature of key and expiry.',
          schema: { type: 'string', maxLength: 100 },
        },
      ],
      responses: {
        '200': {
          description: 'The file.',
          headers: { 'Cache-Control': header('`private, max-age=300`'), 'Content-Length': header('Bytes.', { type: 'integer' }) },
          content: {
            'video/mp4': { schema: { type: 'string', format: 'binary', contentMediaType: 'video/mp4' } },
            'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
          },
        },
      },
      errors: {
        403: 'The URL has expired (url_expired) or is not validly signed (invalid_signature).',
        404: 'No such file (file_not_found).',
      },
    },
    async (_input, req, res) => {
      // The key, expiry and signature are not validated by a schema: whatever they are, the signature
      // check answers (403 when they do not verify), as the document's parameters say.
      const key = String(req.params[0]);
      const q = (name: string) => {
        const value = req.query[name];
        return typeof value === 'string' ? value : undefined;
      };
      const verdict = deps.signer.verify(key, q('expires'), q('signature'));
      if (verdict === 'expired')
        throw new ApiError(403, 'permission_error', 'url_expired', 'this signed URL has expired; fetch the job again for a fresh one');
      if (verdict !== 'ok') throw new ApiError(403, 'permission_error', 'invalid_signature', 'this URL is not validly signed');
      const file = await deps.storage.open(key);
      if (!file) throw notFound('file_not_found', 'no such file');
      res.status(200).set({
        'Content-Type': contentTypeOfKey(key),
        'Content-Length': String(file.bytes),
        'Cache-Control': 'private, max-age=300',
      });
      await pipeline(file.stream, res);
    },
  );
  return api;
}
