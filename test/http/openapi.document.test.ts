// The OpenAPI document (GET /v2/openapi.json): it is structurally valid OpenAPI 3.1; it documents
// exactly the routes the Express app registers, the OpenAI-compatible /v1 ones included (each route is
// mounted from its contract, so this guards against a route mounted around one; the /v1 routes of
// features not offered are the listed exception, each answering 400 unsupported_feature); its schemas
// are z.toJSONSchema of the zod schemas the API validates with (request bodies) and of the response
// schemas of each feature's schemas.ts and openai-schemas.ts (and the shared src/http/schemas.ts);
// every error answer is its surface's one shape (OpenAI's under /v1).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { createApp, RESPONSE_COMPONENTS as RESPONSE_SCHEMAS, type AppDeps } from '../../src/runtime/app.js';
import { ApiError } from '../../src/errors.js';
import { openAiErrorBody } from '../../src/http/openai/errors.js';
import { defaultVideoModelId, videoModels, videoBackendFor } from '../../src/models/catalog.js';
import { CreateVoiceForm, VOICE_UPLOAD_LIMITS } from '../../src/voices/routes.js';
import { CreateFileForm } from '../../src/batches/routes.js';
import { OpenAiCreateVideoBody, OpenAiCreateVideoForm } from '../../src/video-jobs/openai-create.js';
import { OpenAiSpeechBody } from '../../src/voices/openai-speech-routes.js';
import { CreateOpenAiVoiceForm, CreateVoiceConsentForm, UpdateVoiceConsentBody } from '../../src/voices/openai-routes.js';
import { JSON_VALUE_COMPONENT, NO_CONTROL_PATTERN, NO_NUL_PATTERN, refuseNul } from '../../src/http/openapi-no-nul.js';
import { ADMIN_TOKEN, http } from '../helpers/stack.js';
import {
  S,
  OS,
  Json,
  SCHEMAS,
  MULTIPART_FORMS,
  V1_NOT_OFFERED,
  stack,
  customer,
  availability,
  doc,
  jsonSchemaOf,
  pointer,
  deref,
  inlined,
  withoutDiscriminators,
  requestComponents,
  operations,
  instance,
  assertDocumented,
  useDocumentedStack,
} from './openapi.setup.js';

useDocumentedStack();

describe('document structure (OpenAPI 3.1)', () => {
  test('served as JSON, to any origin', async () => {
    const r = await http(stack.baseUrl, 'GET', '/v2/openapi.json');
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.deepEqual(r.body, doc);
  });

  test('root: openapi 3.1, info, paths, components, security schemes', () => {
    assert.match(doc.openapi, /^3\.1\.\d+$/);
    assert.equal(typeof doc.info.title, 'string');
    assert.equal(typeof doc.info.version, 'string');
    assert.equal(doc.jsonSchemaDialect, undefined, "OpenAPI 3.1's default dialect (JSON Schema 2020-12): Swagger UI warns about any other");
    assert.ok(Object.keys(doc.paths).length > 0);
    for (const p of Object.keys(doc.paths)) assert.ok(p.startsWith('/'), p);
    assert.ok(Object.keys(doc.components.schemas).length > 0);
    assert.deepEqual(doc.components.securitySchemes.ApiKeyAuth, {
      ...doc.components.securitySchemes.ApiKeyAuth,
      type: 'http',
      scheme: 'bearer',
    });
    assert.deepEqual(doc.components.securitySchemes.AdminToken, {
      ...doc.components.securitySchemes.AdminToken,
      type: 'http',
      scheme: 'bearer',
    });
    const allowedRoot = [
      'openapi',
      'info',
      'jsonSchemaDialect',
      'servers',
      'paths',
      'webhooks',
      'components',
      'security',
      'tags',
      'externalDocs',
    ];
    for (const k of Object.keys(doc)) assert.ok(allowedRoot.includes(k) || k.startsWith('x-'), `unknown root field ${k}`);
  });

  test('every $ref resolves', () => {
    const walk = (o: Json, at: string) => {
      if (o === null || typeof o !== 'object') return;
      if (typeof o.$ref === 'string') assert.notEqual(pointer(o.$ref), undefined, `${at}: dangling ${o.$ref}`);
      for (const [k, v] of Object.entries(o)) walk(v, `${at}/${k}`);
    };
    walk(doc, '#');
  });

  test('operations: unique ids, known tags, a 2xx answer, path parameters declared both ways, known security', () => {
    const ids = new Set<string>();
    const tags = new Set(doc.tags.map((t: Json) => t.name));
    for (const { path, method, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      assert.equal(typeof op.operationId, 'string', where);
      assert.ok(!ids.has(op.operationId), `duplicate operationId ${op.operationId}`);
      ids.add(op.operationId);
      assert.equal(typeof op.summary, 'string', where);
      for (const t of op.tags) assert.ok(tags.has(t), `${where}: undeclared tag ${t}`);
      assert.ok(
        // A WebSocket's success is its upgrade (101 Switching Protocols).
        Object.keys(op.responses).some((s) => /^2\d\d$/.test(s) || s === '101'),
        `${where}: no 2xx response`,
      );
      for (const s of Object.keys(op.responses)) assert.match(s, /^([1-5]\d\d|[1-5]XX|default)$/, where);
      for (const resp of Object.values(op.responses) as Json[]) assert.equal(typeof deref(resp).description, 'string', where);
      const params = (op.parameters ?? []).map(deref);
      for (const p of params) {
        assert.ok(['path', 'query', 'header', 'cookie'].includes(p.in), where);
        assert.ok(p.schema, `${where}: parameter ${p.name} has no schema`);
      }
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const inPath = params.filter((p: Json) => p.in === 'path');
      assert.deepEqual(inPath.map((p: Json) => p.name).sort(), templated.sort(), `${where}: path parameters`);
      for (const p of inPath) assert.equal(p.required, true, `${where}: path parameter ${p.name} must be required`);
      for (const req of op.security ?? [])
        for (const name of Object.keys(req)) assert.ok(doc.components.securitySchemes[name], `${where}: ${name}`);
    }
  });

  test('a prompt is documented as the API holds it: at least one character, not blank, on /v2 and /v1 alike', async () => {
    const prompts = (schema: Json): Json[] =>
      typeof schema !== 'object' || schema === null
        ? []
        : [...(schema.properties?.prompt ? [schema.properties.prompt] : []), ...Object.values(schema).flatMap((v) => prompts(v as Json))];
    for (const name of ['CreateVideoBody', 'OpenAiCreateVideoBody']) {
      const found = prompts(doc.components.schemas[name]);
      assert.ok(found.length > 0, name);
      for (const prompt of found) {
        assert.equal(prompt.minLength, 1, name);
        assert.equal(prompt.maxLength, 4000, name);
        assert.ok(!new RegExp(prompt.pattern, 'u').test('   ') && new RegExp(prompt.pattern, 'u').test(' a '), name);
      }
    }
    for (const prompt of ['', '   ']) {
      const r = await http(stack.baseUrl, 'POST', '/v1/videos', { token: customer.key, json: { prompt } });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error.param, 'prompt');
    }
  });

  test('every string parameter of a path or query refuses control characters, as the API does (400)', () => {
    let strings = 0;
    for (const { path, method, op } of operations())
      for (const p of (op.parameters ?? []).map(deref).filter((x: Json) => x.in === 'path' || x.in === 'query')) {
        const schema = deref(p.schema);
        if (schema.type !== 'string' || 'enum' in schema || 'const' in schema) continue;
        strings++;
        const patterns = [schema.pattern, ...(schema.allOf ?? []).map((x: Json) => x.pattern)];
        assert.ok(patterns.includes(NO_CONTROL_PATTERN), `${method.toUpperCase()} ${path} ${p.name}: ${JSON.stringify(schema)}`);
        assert.ok(!new RegExp(NO_CONTROL_PATTERN, 'u').test('a\u0000b') && new RegExp(NO_CONTROL_PATTERN, 'u').test('veo-3.1'));
      }
    assert.ok(strings > 10, `${strings} string parameters`);
  });

  test('authentication: /v2 and /v1 routes take an API key, /admin the admin token, files the signature; 401 documented wherever a token is', () => {
    for (const { path, method, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      const schemes = (op.security as Json[]).flatMap((r) => Object.keys(r));
      if (path.startsWith('/admin/')) assert.deepEqual(schemes, ['AdminToken'], where);
      else if (path === '/v2/files/{key}' || path === '/v2/openapi.json') assert.deepEqual(schemes, [], where);
      else if (path.startsWith('/v2/') || path.startsWith('/v1/')) assert.deepEqual(schemes, ['ApiKeyAuth'], where);
      else assert.deepEqual(schemes, [], where);
      if (schemes.length > 0) assert.ok(op.responses['401'], `${where}: 401 not documented`);
    }
    const file = doc.paths['/v2/files/{key}'].get;
    const query = file.parameters.map(deref).filter((p: Json) => p.in === 'query');
    assert.deepEqual(query.map((p: Json) => [p.name, p.required]).sort(), [
      ['expires', true],
      ['signature', true],
    ]);
    assert.deepEqual(
      Object.keys(file.responses)
        .filter((s) => s !== 'default')
        .sort(),
      ['200', '403', '404'],
    );
  });

  test("every error answer is its surface's one error shape (OpenAI's under /v1); 429 documents Retry-After", () => {
    let v1Errors = 0;
    for (const { path, method, op } of operations()) {
      const component = path.startsWith('/v1/') ? 'OpenAiErrorResponse' : 'ErrorResponse';
      for (const [status, resp0] of Object.entries(op.responses) as [string, Json][]) {
        if (/^2/.test(status)) continue;
        if (status === '304') continue; // a conditional read's Not Modified: no body, not an error
        if (status === '101') continue; // a WebSocket's upgrade: no body, not an error
        if (path === '/readyz' && status === '503') continue; // {"ok": false}, not an error
        const resp = deref(resp0);
        assert.deepEqual(Object.keys(resp.content ?? {}), ['application/json'], `${method.toUpperCase()} ${path} ${status}`);
        assert.equal(
          resp.content['application/json'].schema?.$ref,
          `#/components/schemas/${component}`,
          `${method.toUpperCase()} ${path} ${status}`,
        );
        if (status === '429') assert.ok(resp.headers?.['Retry-After'], `${method.toUpperCase()} ${path} 429 without Retry-After`);
        if (component === 'OpenAiErrorResponse') v1Errors++;
      }
    }
    assert.ok(v1Errors > 0, 'the /v1 operations document their errors');
  });

  test("OpenAiErrorResponse holds every error the service can throw, as /v1's error handler renders it", () => {
    for (const type of S.ApiErrorType.options) {
      const body = openAiErrorBody(new ApiError(400, type, 'some_code', 'a message', null));
      const parsed = OS.OpenAiErrorResponse.safeParse(body);
      assert.ok(parsed.success, `${type}: ${JSON.stringify(parsed.error?.issues)}`);
    }
  });

  test('create video: Idempotency-Key, 202 with Location, and every error status it can answer', () => {
    const op = doc.paths['/v2/videos/generations'].post;
    const header = op.parameters.map(deref).find((p: Json) => p.in === 'header' && p.name === 'Idempotency-Key');
    assert.ok(header);
    assert.deepEqual(header.schema, jsonSchemaOf(S.IdempotencyKey, 'input'));
    assert.equal(header.schema.maxLength, S.IDEMPOTENCY_KEY_CHARS_MAX);
    assert.ok(op.responses['202'].headers.Location);
    for (const s of [400, 401, 402, 403, 404, 409, 413, 415, 429, 503]) assert.ok(op.responses[String(s)], `no ${s}`);
  });

  test('voice upload: multipart name + file[], with the upload limits the parser enforces', () => {
    const body = doc.paths['/v2/audio/voices'].post.requestBody;
    assert.deepEqual(Object.keys(body.content), ['multipart/form-data']);
    const form = deref(body.content['multipart/form-data'].schema);
    assert.deepEqual(form.required, ['name', 'file']);
    assert.equal(form.properties.file.type, 'array');
    assert.equal(form.properties.file.minItems, 1);
    assert.equal(form.properties.file.maxItems, VOICE_UPLOAD_LIMITS.filesMax);
    assert.equal(form.properties.file.items.maxLength, VOICE_UPLOAD_LIMITS.fileBytesMax);
    assert.equal(form.properties.file.items.format, 'binary');
    assert.match(form.properties.file.description, /together at most 25 MiB/);
    const post = doc.paths['/v2/audio/voices'].post;
    for (const s of [400, 401, 413, 415, 429, 503]) assert.ok(post.responses[String(s)], `no ${s}`);
  });

  test('speech answers the audio of each response_format, or server-sent events', () => {
    for (const path of ['/v2/audio/speech', '/v1/audio/speech']) {
      const ok = doc.paths[path].post.responses['200'];
      assert.deepEqual(
        Object.keys(ok.content).sort(),
        ['audio/aac', 'audio/flac', 'audio/mpeg', 'audio/ogg', 'audio/pcm', 'audio/wav', 'text/event-stream'],
        path,
      );
      for (const s of [400, 401, 402, 403, 404, 409, 413, 415, 429, 503])
        assert.ok(doc.paths[path].post.responses[String(s)], `${path}: no ${s}`);
    }
  });

  test('POST /v1/videos takes JSON or multipart (what the SDKs send); content answers video/mp4 or image/jpeg', () => {
    const body = doc.paths['/v1/videos'].post.requestBody;
    assert.deepEqual(Object.keys(body.content), ['application/json', 'multipart/form-data']);
    assert.equal(body.content['application/json'].schema.$ref, '#/components/schemas/OpenAiCreateVideoBody');
    // input_reference.file_id is parsed only to answer 400 unsupported_parameter: the document accepts no value of it.
    const json = deref(body.content['application/json'].schema);
    assert.deepEqual(json.properties.input_reference.properties.file_id.not, {});
    const form = deref(body.content['multipart/form-data'].schema);
    assert.deepEqual(form.required, ['prompt']);
    assert.equal(form.properties.input_reference.format, 'binary');
    assert.equal(form.properties.input_reference.maxLength, S.IMAGE_BYTES_MAX);
    // The first frame once: a form with both the file part and the data: URL is a 400 (said in words: a `not`
    // over a binary part stops schemathesis' coverage phase).
    assert.match(form.description, /not both \(400, param input_reference\)/);
    const content = doc.paths['/v1/videos/{id}/content'].get.responses['200'].content;
    assert.deepEqual(Object.keys(content).sort(), ['image/jpeg', 'video/mp4']);
  });
});

describe('schemas are generated from zod', () => {
  test('POST /v2/videos/generations body: one variant per model served here (from the catalog), plus the default model without `model`', () => {
    const body = doc.paths['/v2/videos/generations'].post.requestBody;
    assert.equal(body.required, true);
    const schema = deref(body.content['application/json'].schema);
    const zodBody = refuseNul(jsonSchemaOf(S.CreateVideoBody, 'input')) as Json;
    const served = videoModels().filter((m) => videoBackendFor(m, availability()) !== null);
    assert.ok(served.length > 0);
    for (const m of served) {
      const variants = schema.oneOf.filter((v: Json) => v.properties.model?.const === m.id);
      const readsSimulate = m.accepts_parameters && videoBackendFor(m, availability()) === 'simulator';
      assert.equal(variants.length, readsSimulate ? m.max_n + 1 : 1, m.id);
      for (const v of variants) {
        assert.deepEqual(v.properties.prompt, zodBody.properties.prompt);
        assert.deepEqual(v.properties.durationSeconds.enum, [...m.durations_seconds]);
        assert.deepEqual(v.properties.resolution.enum, [...m.resolutions]);
        assert.deepEqual(v.properties.aspectRatio.enum, [...m.aspect_ratios]);
        if (v.properties.n) assert.equal(v.properties.n.maximum, m.max_n);
        assert.equal('seed' in v.properties, m.supports_seed);
        assert.deepEqual(v.required.sort(), (v.properties.n?.const ? ['model', 'n', 'prompt'] : ['model', 'prompt']).sort());
        assert.equal(v.additionalProperties, false);
      }
    }
    const defaults = schema.oneOf.filter((v: Json) => !('model' in v.properties));
    assert.ok(defaults.length >= 1);
    for (const v of defaults) assert.ok(v.title.includes(defaultVideoModelId()), v.title);
    assert.equal(zodBody.properties.prompt.maxLength, S.PROMPT_CHARS_MAX);
    assert.equal(zodBody.properties.prompt.minLength, 1);
    assert.ok(zodBody.properties.prompt.pattern, 'not blank');
    assert.deepEqual(zodBody.properties.prompt.allOf, [{ pattern: NO_NUL_PATTERN }], 'no NUL (refused by the JSON body parser)');
  });

  test('every request body component is z.toJSONSchema (io input) of the schema the route validates with', () => {
    const validators: Record<string, z.ZodType> = {
      CreateVideoBody: S.CreateVideoBody,
      CreateSpeechBody: S.CreateSpeechBody,
      CreateWorkspaceBody: S.CreateWorkspaceBody,
      SetWorkspaceLimitsBody: S.SetWorkspaceLimitsBody,
      AddCreditsBody: S.AddCreditsBody,
      UpdateAccountBody: S.UpdateAccountBody,
      CreateApiKeyBody: S.CreateApiKeyBody,
      CreateWebhookBody: S.CreateWebhookBody,
      CreateCheckoutBody: S.CreateCheckoutBody,
      CreateVoiceForm, // documentation of the multipart form (multipart is not parsed by zod)
      OpenAiCreateVideoBody,
      OpenAiCreateVideoForm,
      OpenAiSpeechBody,
      CreateVoiceConsentForm,
      UpdateVoiceConsentBody,
      CreateOpenAiVoiceForm,
      CreateBatchBody: S.CreateBatchBody,
      OpenAiCreateBatchBody: OS.OpenAiCreateBatchBody,
      CreateFileForm, // documentation of the multipart form
    };
    assert.deepEqual(requestComponents(), Object.keys(validators).sort());
    // Per-model bodies: each variant keeps the zod properties it does not narrow for its model.
    const narrowed: Record<string, string[]> = {
      // image / lastFrame: narrowed to the model's image types, each tied to the leading bytes of its files.
      CreateVideoBody: ['model', 'n', 'durationSeconds', 'resolution', 'aspectRatio', 'parameters', 'image', 'lastFrame', 'generateAudio'],
      CreateSpeechBody: ['model', 'input', 'response_format'],
      OpenAiSpeechBody: ['model', 'input', 'response_format'],
      CreateApiKeyBody: ['models'],
      // the URL rule of this mode (production or not), as the service checks it
      CreateWebhookBody: ['url'],
    };
    for (const [name, schema] of Object.entries(validators)) {
      // JSON bodies: with NUL refused in every string and key (the JSON body parser refuses it).
      const generated = MULTIPART_FORMS.includes(name) ? jsonSchemaOf(schema, 'input') : (refuseNul(jsonSchemaOf(schema, 'input')) as Json);
      const component = doc.components.schemas[name];
      if (!narrowed[name]) {
        assert.deepEqual(component, generated, name);
        continue;
      }
      for (const v of component.oneOf ?? [component]) {
        for (const [prop, propSchema] of Object.entries(generated.properties)) {
          if (!narrowed[name]!.includes(prop) && prop in v.properties) assert.deepEqual(v.properties[prop], propSchema, `${name}.${prop}`);
        }
        for (const prop of Object.keys(v.properties)) assert.ok(prop in generated.properties, `${name}: ${prop} is not in the zod schema`);
      }
    }
    // and each JSON body of the document refers to one of them
    for (const { path, method, op } of operations()) {
      const ref = op.requestBody?.content?.['application/json']?.schema?.$ref;
      if (op.requestBody?.content?.['application/json']) assert.ok(ref && ref.split('/').pop() in validators, `${method} ${path}`);
    }
  });

  test('every response component is z.toJSONSchema (io output) of the response schema of that name in a schemas.ts (openai-schemas.ts for /v1)', () => {
    const names = Object.keys(RESPONSE_SCHEMAS);
    assert.deepEqual(Object.keys(doc.components.schemas).sort(), [...requestComponents(), JSON_VALUE_COMPONENT, ...names].sort());
    for (const name of names) {
      const schema = SCHEMAS[name];
      assert.ok(schema instanceof z.ZodType, `${name} is not exported by a schemas.ts or openai-schemas.ts`);
      assert.deepEqual(withoutDiscriminators(inlined(doc.components.schemas[name])), jsonSchemaOf(schema, 'output'), name);
    }
  });
});

describe('the document covers exactly the routes the app registers', () => {
  interface RouteLayer {
    route?: { path: string | RegExp; methods: Record<string, boolean> };
    handle: { stack?: RouteLayer[] };
    match(path: string): boolean;
  }
  /** Every route of the real app (createApp), by walking its router and the routers mounted in it. */
  function registeredRoutes(): { method: string; path: string | RegExp; layer: RouteLayer }[] {
    // Construction only captures its dependencies; `files` set: /v2/files is mounted with local storage; `batches` set: /v2/batches;
    // `storage` and `voiceConsents` set: /v1 is mounted, with its voice routes.
    const deps = {
      adminToken: 'x'.repeat(32),
      rateLimitPerMinute: 60,
      backends: { simulator: true },
      voiceProviders: ['simulator'],
      files: {},
      storage: {},
      voiceConsents: {},
      ffmpeg: {},
      batches: {},
    } as unknown as AppDeps;
    const app = createApp(deps) as unknown as { router: { stack: RouteLayer[] } };
    const out: { method: string; path: string | RegExp; layer: RouteLayer }[] = [];
    const walk = (stack: RouteLayer[]) => {
      for (const layer of stack) {
        if (layer.route) {
          for (const m of Object.keys(layer.route.methods)) if (m !== '_all') out.push({ method: m, path: layer.route.path, layer });
        } else if (Array.isArray(layer.handle.stack)) walk(layer.handle.stack);
      }
    };
    walk(app.router.stack);
    return out;
  }

  test('every /v2, /v1 and /admin route, and /healthz, /livez, /readyz, /docs, is documented with its method (but the /v1 features not offered)', () => {
    const routes = registeredRoutes();
    const v1 = routes.filter((r) => typeof r.path === 'string' && r.path.startsWith('/v1/'));
    assert.ok(v1.length > V1_NOT_OFFERED.length, `the /v1 routes are mounted: ${v1.map((r) => `${r.method} ${r.path}`).join(', ')}`);
    for (const route of V1_NOT_OFFERED)
      assert.ok(
        v1.some((r) => `${r.method} ${r.path}` === route),
        `${route} is not registered`,
      );
    // Path patterns (RegExp routes, e.g. /v2/files/...) are always in scope. Stripe's webhook is Stripe's,
    // not the customers' API (like the provider callbacks): left out of the document.
    const inScope = routes.filter(
      (r) =>
        typeof r.path !== 'string' ||
        (r.path !== '/v2/billing/stripe-webhook' &&
          (r.path.startsWith('/v2/') ||
            r.path.startsWith('/v1/') ||
            r.path.startsWith('/admin/') ||
            ['/healthz', '/livez', '/readyz', '/docs'].includes(r.path)) &&
          !V1_NOT_OFFERED.includes(`${r.method} ${r.path}`)),
    );
    assert.equal(inScope.length, operations().length, `registered: ${inScope.map((r) => `${r.method} ${r.path}`).join(', ')}`);
    for (const r of inScope) {
      if (typeof r.path === 'string') {
        const template = r.path.replace(/:(\w+)/g, '{$1}');
        assert.ok(doc.paths[template]?.[r.method], `${r.method.toUpperCase()} ${r.path} is registered but not documented`);
      } else {
        const hits = operations().filter((o) => o.method === r.method && r.layer.match(instance(o.path)));
        assert.equal(
          hits.length,
          1,
          `${r.method.toUpperCase()} ${r.path} is registered; documented as: ${hits.map((h) => h.path).join(', ')}`,
        );
      }
    }
  });

  test('every documented operation is a registered route', () => {
    const routes = registeredRoutes();
    for (const { path, method } of operations()) {
      assert.ok(
        routes.some((r) => r.method === method && r.layer.match(instance(path))),
        `${method.toUpperCase()} ${path} is documented but no route answers it`,
      );
    }
  });

  test('probed over HTTP, every documented operation is answered by its route with a documented status', async () => {
    const control = await http(stack.baseUrl, 'GET', '/v2/no-such-route', { token: customer.key });
    assert.equal(control.body.error.code, 'route_not_found');
    const adminControl = await http(stack.baseUrl, 'GET', '/admin/v1/no-such-route', { token: ADMIN_TOKEN });
    assert.equal(adminControl.body.error.code, 'route_not_found');
    for (const { path, method, op } of operations()) {
      const schemes = (op.security as Json[]).flatMap((r) => Object.keys(r));
      const token = schemes.includes('AdminToken') ? ADMIN_TOKEN : schemes.includes('ApiKeyAuth') ? customer.key : undefined;
      // No body: POSTs stop at their body parser (415); GETs of an unknown id at 404; nothing is created.
      const r = await http(stack.baseUrl, method.toUpperCase(), instance(path), token ? { token } : {});
      assert.ok(!(r.status === 404 && r.body?.error?.code === 'route_not_found'), `${method.toUpperCase()} ${path}: route_not_found`);
      assert.ok(op.responses[String(r.status)], `${method.toUpperCase()} ${path} answered ${r.status}, not documented`);
      assertDocumented(method, path, r);
    }
  });

  test("each /v1 route left out of the document answers 400 unsupported_feature in OpenAI's error shape", async () => {
    for (const route of V1_NOT_OFFERED) {
      const [method, path] = route.split(' ') as [string, string];
      const r = await http(stack.baseUrl, method.toUpperCase(), path.replace(/:\w+/g, 'x'), {
        token: customer.key,
        ...(method === 'post' ? { json: {} } : {}),
      });
      assert.equal(r.status, 400, `${route}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, 'unsupported_feature', route);
      assert.ok(OS.OpenAiErrorResponse.safeParse(r.body).success, `${route}: ${JSON.stringify(r.body)}`);
    }
  });
});
