// The OpenAPI document (GET /v2/openapi.json) and the docs page (GET /docs): the document is
// structurally valid OpenAPI 3.1; it documents exactly the routes the Express app registers, the
// OpenAI-compatible /v1 ones included (each route is mounted from its contract, so this guards
// against a route mounted around one; the /v1 routes of features not offered are the listed
// exception, each answering 400 unsupported_feature); its schemas are z.toJSONSchema of the zod
// schemas the API validates with (request bodies) and of the response schemas of each feature's
// schemas.ts and openai-schemas.ts (and the shared src/http/schemas.ts); every error answer is its
// surface's one shape (OpenAI's under /v1); and real responses of the running API, looked up by the
// operation and status that answered them, parse with the schema documented there. The page is Swagger UI from its npm
// package, everything served from this origin.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { z } from 'zod';
import * as SharedSchemas from '../../src/http/schemas.js';
import * as VideoJobSchemas from '../../src/video-jobs/schemas.js';
import * as ModelSchemas from '../../src/models/schemas.js';
import * as VoiceSchemas from '../../src/voices/schemas.js';
import * as ServiceSchemas from '../../src/service/schemas.js';
import * as AdminSchemas from '../../src/admin/schemas.js';
import * as AccountSchemas from '../../src/account/schemas.js';
import * as WebhookSchemas from '../../src/webhooks/schemas.js';
import * as SharedOpenAiSchemas from '../../src/http/openai/schemas.js';
import * as VideoJobOpenAiSchemas from '../../src/video-jobs/openai-schemas.js';
import * as ModelOpenAiSchemas from '../../src/models/openai-schemas.js';
import * as VoiceOpenAiSchemas from '../../src/voices/openai-schemas.js';
import type { OpenApiDocument } from '../../src/http/openapi.js';
import { createApp, RESPONSE_COMPONENTS as RESPONSE_SCHEMAS, type AppDeps } from '../../src/http/app.js';
import { ApiError, type ErrorType } from '../../src/errors.js';
import type { errorBody } from '../../src/http/errors.js';
import type { presentVoice } from '../../src/voices/routes.js';
import type { presentDeliveryAttempt, presentWebhookEndpoint } from '../../src/webhooks/routes.js';
import type { presentLedgerEntry } from '../../src/account/statement-routes.js';
import type { presentOpenAiVideo } from '../../src/video-jobs/openai-routes.js';
import type { presentConsent } from '../../src/voices/openai-routes.js';
import { openAiErrorBody } from '../../src/http/openai/errors.js';
import type { AuditReport } from '../../src/billing/audit.js';
import type { SpeechModel } from '../../src/models/catalog.js';
import type { AspectRatio, Resolution, SpeechFormat, VideoBackend } from '../../src/models/values.js';
import { defaultVideoModelId, videoModels, videoBackendFor } from '../../src/models/catalog.js';
import { CreateVoiceForm, VOICE_UPLOAD_LIMITS } from '../../src/voices/routes.js';
import { OpenAiCreateVideoBody, OpenAiCreateVideoForm } from '../../src/video-jobs/openai-routes.js';
import { OpenAiSpeechBody } from '../../src/voices/openai-speech-routes.js';
import { CreateOpenAiVoiceForm, CreateVoiceConsentForm, UpdateVoiceConsentBody } from '../../src/voices/openai-routes.js';
import { DOCS_ASSETS, DOCS_INIT_SCRIPT } from '../../src/service/docs-routes.js';
import { JSON_VALUE_COMPONENT, NO_NUL_PATTERN, refuseNul } from '../../src/http/openapi-no-nul.js';
import { encodeWav } from '../../src/media/wav.js';
import { ADMIN_TOKEN, http, newCustomer, simJob, startStack, waitForJob, type HttpResult, type Stack } from '../helpers/stack.js';
import { pngImage, pngOfSize } from '../helpers/images.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

/** The schemas of /v2 and of /v1, by their exports. */
const S = { ...SharedSchemas, ...VideoJobSchemas, ...ModelSchemas, ...VoiceSchemas, ...ServiceSchemas, ...AdminSchemas, ...AccountSchemas, ...WebhookSchemas };
const OS = { ...SharedOpenAiSchemas, ...VideoJobOpenAiSchemas, ...ModelOpenAiSchemas, ...VoiceOpenAiSchemas };

// ---------------------------------------------------------------------------------------------
// Compile-time: the documented enums are the code's own, and what the presenters return has the
// documented types (tsc -p . checks this file).
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const sameType = <T extends true>(): T | undefined => undefined;
sameType<Equals<z.infer<typeof S.ApiErrorType>, ErrorType>>();
sameType<Equals<z.infer<typeof S.VideoResolution>, Resolution>>();
sameType<Equals<z.infer<typeof S.VideoAspectRatio>, AspectRatio>>();
sameType<Equals<z.infer<typeof S.SpeechResponseFormat>, SpeechFormat>>();
sameType<Equals<NonNullable<z.infer<typeof S.VideoModel>['backend']>, VideoBackend>>();
sameType<Equals<NonNullable<z.infer<typeof S.SpeechModel>['backend']>, SpeechModel['provider']>>();
export type PresentersMatchSchemas = [
  (x: ReturnType<typeof presentVoice>) => z.infer<typeof S.Voice>,
  (x: ReturnType<typeof errorBody>) => z.infer<typeof S.ErrorResponse>,
  (x: AuditReport) => z.infer<typeof S.LedgerAudit>,
  (x: ReturnType<typeof presentWebhookEndpoint>) => z.infer<typeof S.WebhookEndpoint>,
  (x: ReturnType<typeof presentDeliveryAttempt>) => z.infer<typeof S.WebhookDeliveryAttempt>,
  (x: ReturnType<typeof presentLedgerEntry>) => z.infer<typeof S.LedgerEntry>,
  (x: ReturnType<typeof presentOpenAiVideo>) => z.infer<typeof OS.OpenAiVideo>,
  (x: ReturnType<typeof presentConsent>) => z.infer<typeof OS.VoiceConsent>,
];
export const presentersMatchSchemas: PresentersMatchSchemas = [(x) => x, (x) => x, (x) => x, (x) => x, (x) => x, (x) => x, (x) => x, (x) => x];

// ---------------------------------------------------------------------------------------------

type Json = any;
/** The response schemas, by the name their component has: /v2's and /v1's. */
const SCHEMAS: Record<string, unknown> = { ...S, ...OS };
/** Request bodies that are multipart forms (documentation only: no NUL rule, which is the JSON body parser's). */
const MULTIPART_FORMS = ['CreateVoiceForm', 'OpenAiCreateVideoForm', 'CreateVoiceConsentForm', 'CreateOpenAiVoiceForm'];
/**
 * The /v1 routes of OpenAI's API this service does not offer: mounted only to answer 400
 * unsupported_feature (which the SDKs raise as BadRequestError), so not operations of the document.
 */
const V1_NOT_OFFERED = ['post /v1/videos/edits', 'post /v1/videos/extensions', 'post /v1/videos/characters', 'get /v1/videos/characters/:id', 'post /v1/videos/:id/remix'];
const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'head', 'options', 'trace'] as const;
const SAMPLE_ID = '00000000-0000-4000-8000-000000000000';

let stack: Stack;
let customer: { workspaceId: string; key: string };
const availability = () => ({ simulator: stack.config.simulator, vertex: stack.config.vertex !== null, voiceProvider: stack.config.voiceProvider });
let doc: OpenApiDocument & Json;
before(async () => {
  stack = await startStack();
  customer = await newCustomer(stack, 100);
  const r = await http(stack.baseUrl, 'GET', '/v2/openapi.json');
  assert.equal(r.status, 200);
  doc = r.body;
});
after(async () => {
  await stack.stop();
});

/** A JSON Schema without its root $schema (the document declares the dialect once). */
function bare(schema: Json): Json {
  const { $schema, ...rest } = schema;
  assert.equal($schema, 'https://json-schema.org/draft/2020-12/schema');
  return rest;
}
const jsonSchemaOf = (schema: z.ZodType, io: 'input' | 'output') => bare(z.toJSONSchema(schema, { io }));

function pointer(ref: string): Json {
  assert.ok(ref.startsWith('#/'), `only local $refs: ${ref}`);
  return ref
    .slice(2)
    .split('/')
    .reduce((o: Json, k) => (o === undefined ? undefined : o[k.replace(/~1/g, '/').replace(/~0/g, '~')]), doc);
}
const deref = (o: Json): Json => (o && typeof o.$ref === 'string' ? deref(pointer(o.$ref)) : o);
/** The schema with every $ref replaced by what it points at. */
function inlined(o: Json): Json {
  if (Array.isArray(o)) return o.map(inlined);
  if (o === null || typeof o !== 'object') return o;
  if (typeof o.$ref === 'string') return inlined(pointer(o.$ref));
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, inlined(v)]));
}

/**
 * The schema without OpenAPI's `discriminator`, which zod-openapi adds (with `type: object`) to a
 * discriminated union, after checking it names a property every variant has.
 */
function withoutDiscriminators(o: Json): Json {
  if (Array.isArray(o)) return o.map(withoutDiscriminators);
  if (o === null || typeof o !== 'object') return o;
  const { discriminator, ...rest } = o;
  if (discriminator) {
    assert.equal(rest.type, 'object');
    delete rest.type;
    for (const v of rest.oneOf ?? rest.anyOf) assert.ok(deref(v).required.includes(discriminator.propertyName), discriminator.propertyName);
  }
  return Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, withoutDiscriminators(v)]));
}

/** The request body components: those a request body of an operation refers to. */
function requestComponents(): string[] {
  const refs = operations().flatMap(({ op }) => Object.values(op.requestBody?.content ?? {}).map((m: Json) => m.schema?.$ref as string | undefined));
  return [...new Set(refs.filter((r) => r !== undefined).map((r) => r.split('/').pop()!))].sort();
}

function operations(): { path: string; method: string; op: Json }[] {
  return Object.entries(doc.paths).flatMap(([path, item]: [string, Json]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method] })),
  );
}
/** A concrete request path for a path template. */
const instance = (template: string) => template.replace(/\{key\}/g, 'videos/x/0.mp4').replace(/\{[^}]+\}/g, SAMPLE_ID);

/** The response schema documented for (method, path, status), as the zod schema of the same name. */
function documented(method: string, path: string, status: number, contentType: string | null): { name: string; schema: z.ZodType } | null {
  const op = doc.paths[path]?.[method];
  assert.ok(op, `${method.toUpperCase()} ${path} is not documented`);
  const resp = deref(op.responses[String(status)] ?? op.responses['default']);
  assert.ok(op.responses[String(status)] || status >= 500, `${method.toUpperCase()} ${path} answered ${status}, which is not documented`);
  const base = (contentType ?? '').split(';')[0]!.trim();
  const content = resp.content ?? {};
  assert.ok(base in content, `${method.toUpperCase()} ${path} ${status} answered ${contentType}; documented: ${Object.keys(content).join(', ')}`);
  const ref: string | undefined = content[base].schema?.$ref;
  if (!ref) return null;
  const name = ref.split('/').pop()!;
  const schema = SCHEMAS[name];
  assert.ok(schema instanceof z.ZodType, `${name} is not a zod schema exported by a schemas.ts or openai-schemas.ts`);
  return { name, schema };
}

/** Asserts that a real response is documented for its operation and status and parses with that schema. */
function assertDocumented(method: string, path: string, r: HttpResult): void {
  const d = documented(method, path, r.status, r.headers.get('content-type'));
  if (!d) return;
  const parsed = d.schema.safeParse(r.body);
  assert.ok(parsed.success, `${method.toUpperCase()} ${path} ${r.status} does not match ${d.name}: ${JSON.stringify(parsed.error?.issues)}\n${JSON.stringify(r.body)}`);
}

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
    assert.deepEqual(doc.components.securitySchemes.ApiKeyAuth, { ...doc.components.securitySchemes.ApiKeyAuth, type: 'http', scheme: 'bearer' });
    assert.deepEqual(doc.components.securitySchemes.AdminToken, { ...doc.components.securitySchemes.AdminToken, type: 'http', scheme: 'bearer' });
    const allowedRoot = ['openapi', 'info', 'jsonSchemaDialect', 'servers', 'paths', 'webhooks', 'components', 'security', 'tags', 'externalDocs'];
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
      assert.ok(Object.keys(op.responses).some((s) => /^2\d\d$/.test(s)), `${where}: no 2xx response`);
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
      for (const req of op.security ?? []) for (const name of Object.keys(req)) assert.ok(doc.components.securitySchemes[name], `${where}: ${name}`);
    }
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
    assert.deepEqual(query.map((p: Json) => [p.name, p.required]).sort(), [['expires', true], ['signature', true]]);
    assert.deepEqual(Object.keys(file.responses).filter((s) => s !== 'default').sort(), ['200', '403', '404']);
  });

  test("every error answer is its surface's one error shape (OpenAI's under /v1); 429 documents Retry-After", () => {
    let v1Errors = 0;
    for (const { path, method, op } of operations()) {
      const component = path.startsWith('/v1/') ? 'OpenAiErrorResponse' : 'ErrorResponse';
      for (const [status, resp0] of Object.entries(op.responses) as [string, Json][]) {
        if (/^2/.test(status)) continue;
        if (status === '304') continue; // a conditional read's Not Modified: no body, not an error
        if (path === '/readyz' && status === '503') continue; // {"ok": false}, not an error
        const resp = deref(resp0);
        assert.deepEqual(Object.keys(resp.content ?? {}), ['application/json'], `${method.toUpperCase()} ${path} ${status}`);
        assert.equal(resp.content['application/json'].schema?.$ref, `#/components/schemas/${component}`, `${method.toUpperCase()} ${path} ${status}`);
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
      assert.deepEqual(Object.keys(ok.content).sort(), ['audio/aac', 'audio/flac', 'audio/mpeg', 'audio/ogg', 'audio/pcm', 'audio/wav', 'text/event-stream'], path);
      for (const s of [400, 401, 402, 403, 404, 409, 413, 415, 429, 503]) assert.ok(doc.paths[path].post.responses[String(s)], `${path}: no ${s}`);
    }
  });

  test('POST /v1/videos takes JSON or multipart (what the SDKs send); content answers video/mp4 or image/jpeg', () => {
    const body = doc.paths['/v1/videos'].post.requestBody;
    assert.deepEqual(Object.keys(body.content), ['application/json', 'multipart/form-data']);
    assert.equal(body.content['application/json'].schema.$ref, '#/components/schemas/OpenAiCreateVideoBody');
    const form = deref(body.content['multipart/form-data'].schema);
    assert.deepEqual(form.required, ['prompt']);
    assert.equal(form.properties.input_reference.format, 'binary');
    assert.equal(form.properties.input_reference.maxLength, S.IMAGE_BYTES_MAX);
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
      CreateApiKeyBody: S.CreateApiKeyBody,
      CreateWebhookBody: S.CreateWebhookBody,
      CreateVoiceForm, // documentation of the multipart form (multipart is not parsed by zod)
      OpenAiCreateVideoBody,
      OpenAiCreateVideoForm,
      OpenAiSpeechBody,
      CreateVoiceConsentForm,
      UpdateVoiceConsentBody,
      CreateOpenAiVoiceForm,
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
    // Construction only captures its dependencies; `files` set: /v2/files is mounted with local storage;
    // `storage` and `voiceConsents` set: /v1 is mounted, with its voice routes.
    const deps = { adminToken: 'x'.repeat(32), rateLimitPerMinute: 60, simulator: true, voiceProvider: 'simulator', files: {}, storage: {}, voiceConsents: {}, ffmpeg: {} } as unknown as AppDeps;
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
    for (const route of V1_NOT_OFFERED) assert.ok(v1.some((r) => `${r.method} ${r.path}` === route), `${route} is not registered`);
    // Path patterns (RegExp routes, e.g. /v2/files/...) are always in scope.
    const inScope = routes.filter(
      (r) =>
        typeof r.path !== 'string' ||
        ((r.path.startsWith('/v2/') || r.path.startsWith('/v1/') || r.path.startsWith('/admin/') || ['/healthz', '/livez', '/readyz', '/docs'].includes(r.path)) &&
          !V1_NOT_OFFERED.includes(`${r.method} ${r.path}`)),
    );
    assert.equal(inScope.length, operations().length, `registered: ${inScope.map((r) => `${r.method} ${r.path}`).join(', ')}`);
    for (const r of inScope) {
      if (typeof r.path === 'string') {
        const template = r.path.replace(/:(\w+)/g, '{$1}');
        assert.ok(doc.paths[template]?.[r.method], `${r.method.toUpperCase()} ${r.path} is registered but not documented`);
      } else {
        const hits = operations().filter((o) => o.method === r.method && r.layer.match(instance(o.path)));
        assert.equal(hits.length, 1, `${r.method.toUpperCase()} ${r.path} is registered; documented as: ${hits.map((h) => h.path).join(', ')}`);
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

  test('each /v1 route left out of the document answers 400 unsupported_feature in OpenAI\'s error shape', async () => {
    for (const route of V1_NOT_OFFERED) {
      const [method, path] = route.split(' ') as [string, string];
      const r = await http(stack.baseUrl, method.toUpperCase(), path.replace(/:\w+/g, 'x'), { token: customer.key, ...(method === 'post' ? { json: {} } : {}) });
      assert.equal(r.status, 400, `${route}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, 'unsupported_feature', route);
      assert.ok(OS.OpenAiErrorResponse.safeParse(r.body).success, `${route}: ${JSON.stringify(r.body)}`);
    }
  });
});

/** Half a second of a 330 Hz tone, as a WAV file: what a voice upload takes. */
function voiceSample(): Blob {
  const samples = new Int16Array(11_025);
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 22_050));
  return new Blob([new Uint8Array(encodeWav(samples, 22_050))], { type: 'audio/wav' });
}

/** A multipart POST, as the openai SDKs send their uploads. */
async function postForm(path: string, token: string, parts: Record<string, string | [Blob, string]>): Promise<HttpResult> {
  const fd = new FormData();
  for (const [name, v] of Object.entries(parts)) {
    if (typeof v === 'string') fd.append(name, v);
    else fd.append(name, v[0], v[1]);
  }
  const res = await fetch(`${stack.baseUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: fd });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** A binary answer: documented for its operation, status and media type; its bytes read. */
async function assertBinaryDocumented(method: string, path: string, url: string, init: RequestInit): Promise<Buffer> {
  const res = await fetch(`${stack.baseUrl}${url}`, init);
  assert.equal(res.status, 200, `${method.toUpperCase()} ${url}: ${res.status}`);
  documented(method, path, 200, res.headers.get('content-type'));
  return Buffer.from(await res.arrayBuffer());
}

describe('real responses parse with the documented schemas', () => {
  test('video jobs: create (202), status while pending, succeeded with videos, failed with an error', async () => {
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: customer.key,
      json: simJob(),
      headers: { 'Idempotency-Key': 'openapi-sample-1' },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assertDocumented('post', '/v2/videos/generations', created);
    assert.equal(created.headers.get('location'), `/v2/videos/generations/${created.body.id}`);

    const pending = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: customer.key });
    assertDocumented('get', '/v2/videos/generations/{id}', pending);

    await waitForJob(stack, customer.key, created.body.id);
    const done = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: customer.key });
    assert.equal(done.body.status, 'succeeded');
    assert.ok(done.body.videos.length > 0);
    assertDocumented('get', '/v2/videos/generations/{id}', done);

    const file = await fetch(done.body.videos[0].url);
    assert.equal(file.status, 200);
    documented('get', '/v2/files/{key}', file.status, file.headers.get('content-type'));
    await file.arrayBuffer();
    const tampered = await http(stack.baseUrl, 'GET', new URL(done.body.videos[0].url).pathname + '?expires=1&signature=x');
    assertDocumented('get', '/v2/files/{key}', tampered);

    const failing = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, json: simJob({ outcome: 'fail' }) });
    assert.equal(failing.status, 202);
    const failed = await waitForJob(stack, customer.key, failing.body.id);
    assert.equal(failed.status, 'failed');
    assertDocumented('get', '/v2/videos/generations/{id}', { status: 200, headers: done.headers, body: failed });
  });

  test('models: lists and single models, video and speech', async () => {
    for (const p of ['/v2/models', '/v2/models/all']) assertDocumented('get', p, await http(stack.baseUrl, 'GET', p, { token: customer.key }));
    for (const id of ['sim-video-1', 'veo-3.1-generate-001', 'veo-3.0-generate-001', 'sim-speech-1']) {
      const r = await http(stack.baseUrl, 'GET', `/v2/models/${id}`, { token: customer.key });
      assert.equal(r.status, 200);
      assertDocumented('get', '/v2/models/{id}', r);
    }
  });

  test('voices and speech: clone, list, get, speak (wav and pcm), delete', async () => {
    const fd = new FormData();
    fd.append('name', 'documented voice');
    fd.append('file', voiceSample(), 'sample.wav');
    const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${customer.key}` }, body: fd });
    const created: HttpResult = { status: res.status, headers: res.headers, body: await res.json() };
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assertDocumented('post', '/v2/audio/voices', created);
    const voice = created.body;

    assertDocumented('get', '/v2/audio/voices', await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: customer.key }));
    assertDocumented('get', '/v2/audio/voices/{id}', await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: customer.key }));

    const documentedHeaders = Object.keys(doc.paths['/v2/audio/speech'].post.responses['200'].headers).map((h) => h.toLowerCase());
    for (const response_format of ['wav', 'pcm']) {
      const r = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${customer.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'Hello there.', voice: voice.voice_id, response_format }),
      });
      assert.equal(r.status, 200);
      documented('post', '/v2/audio/speech', 200, r.headers.get('content-type'));
      assert.ok((await r.arrayBuffer()).byteLength > 0);
      for (const h of r.headers.keys()) if (h.startsWith('x-') && h !== 'x-request-id') assert.ok(documentedHeaders.includes(h), `undocumented header ${h}`);
    }

    const deleted = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: customer.key });
    assertDocumented('delete', '/v2/audio/voices/{id}', deleted);
    assertDocumented('get', '/v2/audio/voices/{id}', await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: customer.key }));
  });

  test('errors: 400, 401, 402, 403, 404, 409, 413, 415 answer the documented error schema', async () => {
    const post = (json: unknown, opts: { token?: string; headers?: Record<string, string> } = {}) =>
      http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, json, ...opts });
    const seen = new Set<number>();
    const check = (r: HttpResult, method = 'post', path = '/v2/videos/generations') => {
      seen.add(r.status);
      assertDocumented(method, path, r);
    };
    check(await post({ ...simJob(), n: 0 }));
    check(await post(simJob(), { token: 'vva_sk_nope' }));
    const poor = await newCustomer(stack, 0);
    check(await post(simJob(), { token: poor.key }));
    const limited = await newCustomer(stack, 10, ['veo-3.1-fast-generate-001']);
    check(await post(simJob(), { token: limited.key }));
    check(await post({ ...simJob(), model: 'no-such-model' }));
    await post(simJob(), { headers: { 'Idempotency-Key': 'openapi-409' } });
    check(await post({ ...simJob(), n: 1 }, { headers: { 'Idempotency-Key': 'openapi-409' } }));
    check(await post({ ...simJob(), image: { bytesBase64Encoded: pngOfSize(S.IMAGE_BYTES_MAX + 1).toString('base64'), mimeType: 'image/png' } }));
    check(await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, rawBody: 'x', headers: { 'content-type': 'text/plain' } }));
    check(await http(stack.baseUrl, 'GET', `/v2/videos/generations/${SAMPLE_ID}`, { token: customer.key }), 'get', '/v2/videos/generations/{id}');
    check(await http(stack.baseUrl, 'GET', '/v2/models/nope', { token: customer.key }), 'get', '/v2/models/{id}');
    check(await http(stack.baseUrl, 'GET', '/admin/v1/ledger/audit', { token: customer.key }), 'get', '/admin/v1/ledger/audit');
    assert.deepEqual([...seen].sort(), [400, 401, 402, 403, 404, 409, 413, 415]);
  });

  test('OpenAI-compatible (/v1): videos (JSON and multipart), content, list, delete, models, speech, consents, voices, errors', async () => {
    const c = await newCustomer(stack, 10);
    const v1 = (method: string, p: string, json?: unknown) => http(stack.baseUrl, method, p, { token: c.key, ...(json !== undefined ? { json } : {}) });
    const auth = { authorization: `Bearer ${c.key}` };
    const answered = (status: number, r: HttpResult) => {
      assert.equal(r.status, status, JSON.stringify(r.body));
      return r;
    };

    const created = await v1('POST', '/v1/videos', { prompt: 'a lighthouse', model: 'sim-video-1', seconds: '4', size: '1280x720' });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assertDocumented('post', '/v1/videos', created);
    const uploaded = await postForm('/v1/videos', c.key, { prompt: 'from a frame', model: 'sim-video-1', seconds: '4', input_reference: [new Blob([new Uint8Array(pngImage())], { type: 'image/png' }), 'frame.png'] });
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    assertDocumented('post', '/v1/videos', uploaded);
    for (const id of [created.body.id, uploaded.body.id]) {
      await waitForJob(stack, c.key, id);
      assertDocumented('get', '/v1/videos/{id}', await v1('GET', `/v1/videos/${id}`));
    }
    const page = await v1('GET', '/v1/videos?limit=1');
    assert.equal(page.body.has_more, true);
    assertDocumented('get', '/v1/videos', page);
    assertDocumented('get', '/v1/videos', answered(400, await v1('GET', '/v1/videos?order=sideways')));
    const mp4 = await assertBinaryDocumented('get', '/v1/videos/{id}/content', `/v1/videos/${created.body.id}/content`, { headers: auth });
    assert.equal(mp4.subarray(4, 8).toString('latin1'), 'ftyp');
    const jpeg = await assertBinaryDocumented('get', '/v1/videos/{id}/content', `/v1/videos/${created.body.id}/content?variant=thumbnail`, { headers: auth });
    assert.deepEqual([...jpeg.subarray(0, 2)], [0xff, 0xd8]);
    assertDocumented('get', '/v1/videos/{id}/content', answered(400, await v1('GET', `/v1/videos/${created.body.id}/content?variant=spritesheet`)));
    assertDocumented('delete', '/v1/videos/{id}', await v1('DELETE', `/v1/videos/${created.body.id}`));
    assertDocumented('get', '/v1/videos/{id}', answered(404, await v1('GET', `/v1/videos/${created.body.id}`)));

    assertDocumented('get', '/v1/models', await v1('GET', '/v1/models'));
    assertDocumented('get', '/v1/models/{id}', await v1('GET', '/v1/models/sim-speech-1'));

    const speech = { model: 'sim-speech-1', voice: 'sim-narrator', input: 'Hello there.' };
    for (const extra of [{}, { response_format: 'opus' }, { response_format: 'pcm', stream_format: 'sse' }]) {
      const init = { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ ...speech, ...extra }) };
      assert.ok((await assertBinaryDocumented('post', '/v1/audio/speech', '/v1/audio/speech', init)).length > 0);
    }
    assertDocumented('post', '/v1/audio/speech', answered(404, await v1('POST', '/v1/audio/speech', { ...speech, voice: 'nobody' })));

    const consent = await postForm('/v1/audio/voice_consents', c.key, { name: 'Ada', language: 'en-GB', recording: [voiceSample(), 'consent.wav'] });
    assert.equal(consent.status, 200, JSON.stringify(consent.body));
    assertDocumented('post', '/v1/audio/voice_consents', consent);
    assertDocumented('get', '/v1/audio/voice_consents', await v1('GET', '/v1/audio/voice_consents'));
    assertDocumented('get', '/v1/audio/voice_consents/{id}', await v1('GET', `/v1/audio/voice_consents/${consent.body.id}`));
    assertDocumented('post', '/v1/audio/voice_consents/{id}', await v1('POST', `/v1/audio/voice_consents/${consent.body.id}`, { name: 'Ada Lovelace' }));
    const voice = await postForm('/v1/audio/voices', c.key, { name: 'ada', consent: consent.body.id, audio_sample: [voiceSample(), 'sample.wav'] });
    assert.equal(voice.status, 200, JSON.stringify(voice.body));
    assertDocumented('post', '/v1/audio/voices', voice);
    assertDocumented('post', '/v1/audio/voices', answered(400, await postForm('/v1/audio/voices', c.key, { name: 'ada', audio_sample: [voiceSample(), 'sample.wav'] })));
    assertDocumented('delete', '/v1/audio/voices/{id}', await v1('DELETE', `/v1/audio/voices/${voice.body.id}`));
    assertDocumented('delete', '/v1/audio/voices/{id}', answered(404, await v1('DELETE', `/v1/audio/voices/${voice.body.id}`)));
    assertDocumented('delete', '/v1/audio/voice_consents/{id}', await v1('DELETE', `/v1/audio/voice_consents/${consent.body.id}`));

    assertDocumented('get', '/v1/videos', answered(401, await http(stack.baseUrl, 'GET', '/v1/videos', { token: 'vva_sk_nope' })));
    const poor = await newCustomer(stack, 0);
    assertDocumented('post', '/v1/videos', answered(402, await http(stack.baseUrl, 'POST', '/v1/videos', { token: poor.key, json: { prompt: 'x', model: 'sim-video-1', seconds: '4' } })));
  });

  test('admin API, health and readiness', async () => {
    const admin = (method: string, p: string, json?: unknown, headers?: Record<string, string>) =>
      http(stack.baseUrl, method, p, { token: ADMIN_TOKEN, ...(json !== undefined ? { json } : {}), ...(headers ? { headers } : {}) });
    const ws = await admin('POST', '/admin/v1/workspaces', { name: 'documented', credits_in_euro: 1.5 });
    assert.equal(ws.status, 201);
    assertDocumented('post', '/admin/v1/workspaces', ws);
    assertDocumented('get', '/admin/v1/workspaces/{id}', await admin('GET', `/admin/v1/workspaces/${ws.body.id}`));
    assertDocumented('post', '/admin/v1/workspaces/{id}/credits', await admin('POST', `/admin/v1/workspaces/${ws.body.id}/credits`, { amount_in_euro: 2 }, { 'Idempotency-Key': 'k1' }));
    for (const body of [{}, { models: ['sim-video-1'] }]) {
      const key = await admin('POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, body);
      assert.equal(key.status, 201);
      assertDocumented('post', '/admin/v1/workspaces/{id}/api-keys', key);
    }
    assertDocumented('post', '/admin/v1/workspaces', await admin('POST', '/admin/v1/workspaces', { name: '' }));
    const audit = await admin('GET', '/admin/v1/ledger/audit');
    assert.equal(audit.body.ok, true);
    assertDocumented('get', '/admin/v1/ledger/audit', audit);
    assertDocumented('get', '/healthz', await http(stack.baseUrl, 'GET', '/healthz'));
    assertDocumented('get', '/readyz', await http(stack.baseUrl, 'GET', '/readyz'));
  });
});

describe('webhooks, balance, ledger and key revocation', () => {
  test('webhook endpoints: create (201, with secret), list, get, deliveries, delete; the event body is the documented WebhookEvent', async () => {
    const receiver = await startReceiver({ script: [{ status: 500 }] });
    try {
      const c = await newCustomer(stack, 10);
      const created = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: receiver.url } });
      assert.equal(created.status, 201);
      assertDocumented('post', '/v2/webhooks', created);
      assertDocumented('post', '/v2/webhooks', await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: 'http://10.0.0.1/' } }));
      assertDocumented('get', '/v2/webhooks', await http(stack.baseUrl, 'GET', '/v2/webhooks', { token: c.key }));
      assertDocumented('get', '/v2/webhooks/{id}', await http(stack.baseUrl, 'GET', `/v2/webhooks/${created.body.id}`, { token: c.key }));

      const job = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) });
      await waitForJob(stack, c.key, job.body.id);
      const [event] = await receiver.waitFor(1);
      const parsed = S.WebhookEvent.safeParse(JSON.parse(event!.body));
      assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
      for (const type of ['video.generation.succeeded', 'video.generation.failed']) {
        const op = doc.webhooks[type].post;
        assert.equal(op.requestBody.content['application/json'].schema.$ref, '#/components/schemas/WebhookEvent');
        assert.deepEqual(op.parameters.map((p: Json) => p.name), ['webhook-id', 'webhook-timestamp', 'webhook-signature']);
        for (const p of op.parameters) assert.ok(event!.headers[p.name], `header ${p.name} sent`);
      }
      let list: HttpResult;
      for (let i = 0; ; i++) {
        list = await http(stack.baseUrl, 'GET', `/v2/webhooks/${created.body.id}/deliveries?limit=1`, { token: c.key });
        if (list.body.data[0]?.delivery_status === 'succeeded') break;
        assert.ok(i < 200, 'delivered');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(list.body.has_more, true);
      assertDocumented('get', '/v2/webhooks/{id}/deliveries', list);
      assertDocumented('get', '/v2/webhooks/{id}/deliveries', await http(stack.baseUrl, 'GET', `/v2/webhooks/${created.body.id}/deliveries?limit=500`, { token: c.key }));
      assertDocumented('delete', '/v2/webhooks/{id}', await http(stack.baseUrl, 'DELETE', `/v2/webhooks/${created.body.id}`, { token: c.key }));
      assertDocumented('delete', '/v2/webhooks/{id}', await http(stack.baseUrl, 'DELETE', `/v2/webhooks/${created.body.id}`, { token: c.key }));
    } finally {
      await receiver.close();
    }
  });

  test('balance, ledger (with a 400), and revoking a key (then 404 for an unknown one)', async () => {
    const c = await newCustomer(stack, 2);
    assertDocumented('get', '/v2/balance', await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key }));
    const ledger = await http(stack.baseUrl, 'GET', '/v2/ledger?limit=5', { token: c.key });
    assert.equal(ledger.body.data.length, 1);
    assertDocumented('get', '/v2/ledger', ledger);
    assertDocumented('get', '/v2/ledger', await http(stack.baseUrl, 'GET', '/v2/ledger?after=nope', { token: c.key }));
    const key = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
    assertDocumented('delete', '/admin/v1/api-keys/{id}', await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${key.body.id}`, { token: ADMIN_TOKEN }));
    assertDocumented('delete', '/admin/v1/api-keys/{id}', await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${SAMPLE_ID}`, { token: ADMIN_TOKEN }));
  });
});

describe('GET /docs', () => {
  test('Swagger UI from the swagger-ui-dist package, everything from this origin, on the served document', async () => {
    const r = await http(stack.baseUrl, 'GET', '/docs');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    const html: string = r.body;
    assert.doesNotMatch(html, /https?:\/\//i, 'no absolute URLs: nothing is loaded from another host');
    const csp = r.headers.get('content-security-policy') ?? '';
    for (const d of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"]) assert.ok(csp.includes(d), csp);
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.deepEqual(refs.sort(), ['/docs/favicon-32x32.png', '/docs/init.js', '/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css']);
    const packageDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    for (const [name, type] of Object.entries(DOCS_ASSETS)) {
      const asset = await fetch(`${stack.baseUrl}/docs/${name}`);
      assert.equal(asset.status, 200, name);
      assert.equal(asset.headers.get('content-type'), type, name);
      assert.ok(Buffer.from(await asset.arrayBuffer()).equals(fs.readFileSync(path.join(packageDir, name))), `${name} is the package's file`);
    }
    const init = await fetch(`${stack.baseUrl}/docs/init.js`);
    assert.match(init.headers.get('content-type') ?? '', /^text\/javascript/);
    const script = await init.text();
    assert.equal(script, DOCS_INIT_SCRIPT);
    assert.doesNotThrow(() => new Function(script), 'the init script parses');
    assert.match(script, /url: '\/v2\/openapi\.json'/);
    assert.match(script, /tryItOutEnabled: true/);
    assert.match(script, /validatorUrl: null/, 'no call to the public validator');
    // The bundle renders OpenAPI 3.1 (Swagger UI 5).
    const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
    assert.ok(Number(pkg.version.split('.')[0]) >= 5, pkg.version);
  });
});
