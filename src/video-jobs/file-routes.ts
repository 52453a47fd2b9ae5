// GET /v2/files/{key}?expires=&signature=: stored outputs behind signed, expiring URLs. Mounted with
// local storage only: with S3, customers download from the bucket through presigned URLs.
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { ApiError, notFound } from '../errors.js';
import { contentTypeOfKey, type Storage } from '../storage/local.js';
import type { UrlSigner } from '../storage/signed-urls.js';
import { ApiRouter, bareJsonSchema, header, type RouteContract } from '../http/openapi.js';

/** The key (it contains slashes), the expiry and the signature of a signed URL, as the signer makes them. */
export const FilePath = z.object({ key: z.string() });
export const FileQuery = z.object({ expires: z.string().regex(/^\d{1,12}$/), signature: z.string().max(100) });

const invalidSignature = () => new ApiError(403, 'permission_error', 'invalid_signature', 'this URL is not validly signed');

export const getFile = {
  method: 'get',
  path: '/v2/files/{key}',
  // The key contains slashes: the one capture group is {key}. A batch file (/v2/files/{id}, /v2/files/{id}/content:
  // ../batches/routes.ts) is one id, never a key.
  expressPath: /^\/v2\/files\/(?![0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/content$)([^/]+\/.+)$/,
  operationId: 'getFile',
  tag: 'Files',
  summary: 'Download a generated file (signed URL)',
  description:
    'The `url` of a job video: no bearer token, the signature is the credential. URLs expire; GET the job again for a fresh one. ' +
    'Served with local storage (STORAGE_BACKEND=local, the default); with S3 the video URLs are presigned bucket URLs and this route answers 404.',
  security: 'none',
  requestParams: { path: FilePath, query: FileQuery },
  // A URL whose expiry or signature is missing or malformed is not validly signed: the signature check's 403, never a 400.
  invalid: invalidSignature,
  // Stated here, each schema rendered from the zod schema above that validates it.
  parameters: [
    {
      name: 'key',
      in: 'path',
      required: true,
      description: 'The storage key, e.g. videos/{job id}/0.mp4 (contains slashes; take the URL as given).',
      schema: bareJsonSchema(FilePath.shape.key, 'input'),
    },
    {
      name: 'expires',
      in: 'query',
      required: true,
      description: 'Expiry, Unix seconds.',
      schema: bareJsonSchema(FileQuery.shape.expires, 'input'),
    },
    {
      name: 'signature',
      in: 'query',
      required: true,
      description: 'HMAC signature of key and expiry.',
      schema: bareJsonSchema(FileQuery.shape.signature, 'input'),
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
} satisfies RouteContract;

export function fileRoutes(deps: { storage: Storage; signer: UrlSigner }): ApiRouter {
  const api = new ApiRouter();
  api.route(getFile, async ({ params: { key }, query: { expires, signature } }, _req, res) => {
    const verdict = deps.signer.verify(key, expires, signature);
    if (verdict === 'expired')
      throw new ApiError(403, 'permission_error', 'url_expired', 'this signed URL has expired; fetch the job again for a fresh one');
    if (verdict !== 'ok') throw invalidSignature();
    const file = await deps.storage.open(key);
    if (!file) throw notFound('file_not_found', 'no such file');
    res.status(200).set({
      'Content-Type': contentTypeOfKey(key),
      'Content-Length': String(file.bytes),
      'Cache-Control': 'private, max-age=300',
    });
    await pipeline(file.stream, res);
  });
  return api;
}
