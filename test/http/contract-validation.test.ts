// A contract validates: `api.route` checks the path parameters, query, body (JSON, or a multipart form's
// parts once the multipart parser has read them) and Idempotency-Key of a request against the contract's
// schemas before its handler runs, answers a refused value with the 400 of the surface's error shape
// naming it, or with the contract's own answer (`invalid`, `parts.invalid`), and the handler never runs;
// it hands the handler the values the schemas give (coerced, defaulted, trimmed). Checked on routers of
// their own, mounted as createApp mounts the features' routers, with the service's error handlers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import { z } from 'zod';
import pino from 'pino';
import { ApiRouter, json, type RouteContract } from '../../src/http/openapi.js';
import { jsonBody } from '../../src/http/json-body.js';
import { multipartForm, partRefused, type MultipartForm, type UploadedFile } from '../../src/http/multipart.js';
import { ApiError } from '../../src/errors.js';
import { errorHandler } from '../../src/http/errors.js';
import { openAiErrorHandler } from '../../src/http/openai/errors.js';
import { ErrorResponse } from '../../src/http/schemas.js';

const renameThing = {
  method: 'post',
  path: '/v2/things/{id}',
  operationId: 'renameThing',
  tag: 'Service',
  summary: 'Rename a thing',
  security: 'none',
  idempotent: true,
  requestParams: {
    path: z.object({ id: z.string().regex(/^thing_[0-9]+$/) }),
    query: z.strictObject({ limit: z.coerce.number().int().min(1).max(100).default(20) }),
  },
  body: { component: 'RenameThingBody', schema: z.strictObject({ name: z.string().trim().min(1).max(10) }) },
  responses: { '200': json(ErrorResponse, 'unused') },
} satisfies RouteContract;

const openAiThing = {
  ...renameThing,
  path: '/v1/things/{id}',
  operationId: 'openaiRenameThing',
  errorShape: 'openai',
} satisfies RouteContract;

/** A multipart upload: its parts validated after the multipart parser, and a query refused with the contract's own answer. */
const uploadThing = {
  method: 'post',
  path: '/v2/things',
  operationId: 'uploadThing',
  tag: 'Service',
  summary: 'Upload a thing',
  security: 'none',
  requestParams: { query: z.object({ mode: z.enum(['fast', 'slow']).optional() }) },
  invalid: () => new ApiError(400, 'invalid_request_error', 'unsupported_mode', 'mode must be fast or slow', 'mode'),
  body: {
    component: 'UploadThingForm',
    schema: z.object({ name: z.string(), file: z.file() }),
    mediaType: 'multipart/form-data',
    parts: {
      schema: z.object({ name: z.string().trim().min(1), file: z.custom<UploadedFile>((v) => v !== undefined) }),
      input: (form: MultipartForm) => ({ name: form.fields.get('name'), file: form.files[0] }),
      invalid: partRefused,
    },
  },
  responses: { '200': json(ErrorResponse, 'unused') },
} satisfies RouteContract;

/** A path parameter that spans slashes: mounted on a pattern whose capture groups are the template's parameters, in order. */
const getNestedThing = {
  method: 'get',
  path: '/v2/shelves/{shelf}/things/{path}',
  expressPath: /^\/v2\/shelves\/([a-z]+)\/things\/(.+)$/,
  operationId: 'getNestedThing',
  tag: 'Service',
  summary: 'Get a thing by its path',
  security: 'none',
  requestParams: { path: z.object({ shelf: z.string(), path: z.string().regex(/^[a-z/]+$/) }) },
  responses: { '200': json(ErrorResponse, 'unused') },
} satisfies RouteContract;

let server: Server;
let baseUrl: string;
const seen: unknown[] = [];

before(async () => {
  const api = new ApiRouter();
  api.route(renameThing, jsonBody, (input, _req, res) => {
    seen.push(input);
    // Typed from the contract: a number, a string, a string.
    const answer: { limit: number; name: string; id: string; key: string | undefined } = {
      limit: input.query.limit,
      name: input.body.name,
      id: input.params.id,
      key: input.idempotencyKey,
    };
    res.json(answer);
  });
  const openAi = new ApiRouter();
  openAi.route(openAiThing, jsonBody, (input, _req, res) => {
    seen.push(input);
    res.json({ name: input.body.name });
  });
  const upload = multipartForm({
    limits: {
      filesMax: 1,
      fileBytesMax: 1024,
      totalFileBytesMax: 1024,
      fieldsMax: 1,
      partsMax: 2,
      fieldBytesMax: 100,
      partNameBytesMax: 20,
      concurrentRequestsMax: 2,
    },
    fileParts: ['file'],
    fieldParts: ['name'],
    fileType: { headBytes: 1, detect: async () => 'text', expected: 'a file' },
  });
  api.route(uploadThing, upload, (input, _req, res) => {
    seen.push(input);
    res.json({ name: input.body.name, bytes: input.body.file.bytes, mode: input.query.mode ?? null });
  });
  api.route(getNestedThing, (input, _req, res) => {
    seen.push(input);
    // Typed from the contract.
    const answer: { shelf: string; path: string } = input.params;
    res.json(answer);
  });
  const logger = pino({ level: 'silent' });
  const app = express();
  app.set('query parser', 'simple');
  app.use(openAi.router);
  app.use('/v1', openAiErrorHandler(logger));
  app.use(api.router);
  app.use(errorHandler(logger));
  server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  await new Promise((resolve) => server.close(resolve));
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as any };
}

describe("a contract's schemas run before its handler", () => {
  test('a valid request: the handler gets the values the schemas give (coerced, defaulted, trimmed)', async () => {
    seen.length = 0;
    const r = await post('/v2/things/thing_1?limit=7', { name: '  ada ' }, { 'idempotency-key': 'k-1' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body, { limit: 7, name: 'ada', id: 'thing_1', key: 'k-1' });
    assert.deepEqual((await post('/v2/things/thing_2', { name: 'b' })).body, { limit: 20, name: 'b', id: 'thing_2' });
    assert.equal(seen.length, 2);
  });

  const refusals: [string, string, unknown, Record<string, string>, { code: string; param: string | null; message: RegExp }][] = [
    ['a path parameter', '/v2/things/nope', { name: 'a' }, {}, { code: 'invalid_parameter', param: 'id', message: /^invalid id: / }],
    [
      'a query parameter out of range',
      '/v2/things/thing_1?limit=0',
      { name: 'a' },
      {},
      { code: 'invalid_parameter', param: 'limit', message: /^invalid limit: / },
    ],
    [
      'an unknown query parameter',
      '/v2/things/thing_1?colour=red',
      { name: 'a' },
      {},
      { code: 'invalid_parameter', param: 'colour', message: /^unknown parameter: colour$/ },
    ],
    [
      'a missing body field',
      '/v2/things/thing_1',
      {},
      {},
      { code: 'missing_parameter', param: 'name', message: /^missing required parameter: name$/ },
    ],
    [
      'a blank body field',
      '/v2/things/thing_1',
      { name: '   ' },
      {},
      { code: 'invalid_parameter', param: 'name', message: /^invalid name: / },
    ],
    [
      'an unknown body field',
      '/v2/things/thing_1',
      { name: 'a', colour: 'red' },
      {},
      { code: 'invalid_parameter', param: 'colour', message: /^unknown parameter: colour$/ },
    ],
    [
      'an Idempotency-Key too long',
      '/v2/things/thing_1',
      { name: 'a' },
      { 'idempotency-key': 'k'.repeat(300) },
      { code: 'invalid_parameter', param: 'Idempotency-Key', message: /^invalid Idempotency-Key: / },
    ],
  ];
  for (const [what, path, body, headers, expected] of refusals) {
    test(`${what}: 400 naming it, the handler not run`, async () => {
      seen.length = 0;
      const r = await post(path, body, headers);
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.deepEqual(Object.keys(r.body.error).sort(), ['code', 'message', 'param', 'type']);
      assert.equal(r.body.error.type, 'invalid_request_error');
      assert.equal(r.body.error.code, expected.code);
      assert.equal(r.body.error.param, expected.param);
      assert.match(r.body.error.message, expected.message);
      assert.equal(seen.length, 0, 'the handler did not run');
    });
  }

  test('a path pattern: its capture groups are the named path parameters, validated', async () => {
    seen.length = 0;
    const r = await fetch(`${baseUrl}/v2/shelves/top/things/a/b/c`);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { shelf: 'top', path: 'a/b/c' });
    const refused = await fetch(`${baseUrl}/v2/shelves/top/things/a/B`);
    assert.equal(refused.status, 400);
    assert.equal(((await refused.json()) as any).error.param, 'path');
    assert.equal(seen.length, 1, 'the handler ran once');
  });

  test("under /v1, the same refusal in OpenAI's error shape", async () => {
    seen.length = 0;
    const r = await post('/v1/things/thing_1', { name: '' });
    assert.equal(r.status, 400);
    assert.deepEqual(Object.keys(r.body.error), ['message', 'type', 'param', 'code']);
    assert.equal(r.body.error.param, 'name');
    assert.equal(seen.length, 0, 'the handler did not run');
  });
});

describe('a multipart form: its parts validated after the parser, before the handler', () => {
  const form = (parts: Record<string, string | Blob>) => {
    const f = new FormData();
    for (const [k, v] of Object.entries(parts)) {
      if (v instanceof Blob) f.append(k, v, 'a.txt');
      else f.append(k, v);
    }
    return f;
  };
  const send = async (body: FormData, query = '') => {
    const r = await fetch(`${baseUrl}/v2/things${query}`, { method: 'POST', body });
    return { status: r.status, body: (await r.json()) as any };
  };

  test('valid parts: the handler gets them typed, the file as uploaded', async () => {
    seen.length = 0;
    const r = await send(form({ name: ' ada ', file: new Blob(['hello']) }), '?mode=fast');
    assert.deepEqual(r.body, { name: 'ada', bytes: 5, mode: 'fast' });
    assert.equal(seen.length, 1);
  });

  test("a missing or invalid part, or a refused query: the contract's answer, the handler not run", async () => {
    seen.length = 0;
    const missing = await send(form({ name: 'ada' }));
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body.error, {
      type: 'invalid_request_error',
      code: 'missing_parameter',
      message: 'missing required part: file',
      param: 'file',
    });
    const blank = await send(form({ name: '  ', file: new Blob(['x']) }));
    assert.equal(blank.status, 400);
    assert.equal(blank.body.error.code, 'invalid_parameter');
    assert.equal(blank.body.error.param, 'name');
    assert.match(blank.body.error.message, /^name /);
    const mode = await send(form({ name: 'ada', file: new Blob(['x']) }), '?mode=turbo');
    assert.deepEqual(mode.body.error, {
      type: 'invalid_request_error',
      code: 'unsupported_mode',
      message: 'mode must be fast or slow',
      param: 'mode',
    });
    assert.equal(seen.length, 0, 'the handler did not run');
  });
});
