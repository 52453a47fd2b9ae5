// What the OpenAPI tests share: one service stack per test file and the document it serves, the
// schemas of /v2 and /v1 by their exports, and lookups of what the document says an operation answers.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import * as SharedSchemas from '../../src/http/schemas.js';
import * as VideoJobSchemas from '../../src/video-jobs/schemas.js';
import * as ModelSchemas from '../../src/models/schemas.js';
import * as VoiceSchemas from '../../src/voices/schemas.js';
import * as ServiceSchemas from '../../src/service/schemas.js';
import * as AdminSchemas from '../../src/admin/schemas.js';
import * as AccountSchemas from '../../src/account/schemas.js';
import * as WebhookSchemas from '../../src/webhooks/schemas.js';
import * as UsageSchemas from '../../src/usage/schemas.js';
import * as BatchSchemas from '../../src/batches/schemas.js';
import * as PaymentSchemas from '../../src/payments/schemas.js';
import * as SharedOpenAiSchemas from '../../src/http/openai/schemas.js';
import * as VideoJobOpenAiSchemas from '../../src/video-jobs/openai-schemas.js';
import * as ModelOpenAiSchemas from '../../src/models/openai-schemas.js';
import * as VoiceOpenAiSchemas from '../../src/voices/openai-schemas.js';
import * as BatchOpenAiSchemas from '../../src/batches/openai-schemas.js';
import type { OpenApiDocument } from '../../src/http/openapi.js';
import type { ErrorType } from '../../src/errors.js';
import type { errorBody } from '../../src/http/errors.js';
import type { presentVoice } from '../../src/voices/routes.js';
import type { presentDeliveryAttempt, presentWebhookEndpoint } from '../../src/webhooks/routes.js';
import type { presentLedgerEntry } from '../../src/account/statement-routes.js';
import type { presentOpenAiVideo } from '../../src/video-jobs/openai-create.js';
import type { presentConsent } from '../../src/voices/openai-routes.js';
import type { AuditReport } from '../../src/billing/audit.js';
import type { SpeechModel } from '../../src/models/catalog.js';
import type { AspectRatio, Resolution, SpeechFormat, VideoBackend } from '../../src/models/values.js';
import { encodeWav } from '../../src/media/wav.js';
import { configuredBackends, createVideoProviders } from '../../src/runtime/providers.js';
import { http, newCustomer, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

/** The schemas of /v2 and of /v1, by their exports. */
export const S = {
  ...SharedSchemas,
  ...VideoJobSchemas,
  ...ModelSchemas,
  ...VoiceSchemas,
  ...ServiceSchemas,
  ...AdminSchemas,
  ...AccountSchemas,
  ...WebhookSchemas,
  ...UsageSchemas,
  ...BatchSchemas,
  ...PaymentSchemas,
};
export const OS = { ...SharedOpenAiSchemas, ...VideoJobOpenAiSchemas, ...ModelOpenAiSchemas, ...VoiceOpenAiSchemas, ...BatchOpenAiSchemas };

// ---------------------------------------------------------------------------------------------
// Compile-time: the documented enums are the code's own, and what the presenters return has the
// documented types (tsc -p . checks this file).
export type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export const sameType = <T extends true>(): T | undefined => undefined;
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
export const presentersMatchSchemas: PresentersMatchSchemas = [
  (x) => x,
  (x) => x,
  (x) => x,
  (x) => x,
  (x) => x,
  (x) => x,
  (x) => x,
  (x) => x,
];

// ---------------------------------------------------------------------------------------------

export type Json = any;
/** The response schemas, by the name their component has: /v2's and /v1's. */
export const SCHEMAS: Record<string, unknown> = { ...S, ...OS };
/** Request bodies that are multipart forms (documentation only: no NUL rule, which is the JSON body parser's). */
export const MULTIPART_FORMS = [
  'CreateVoiceForm',
  'OpenAiCreateVideoForm',
  'CreateVoiceConsentForm',
  'CreateOpenAiVoiceForm',
  'CreateFileForm',
];
/**
 * The /v1 routes of OpenAI's API this service does not offer: mounted only to answer 400
 * unsupported_feature (which the SDKs raise as BadRequestError), so not operations of the document.
 */
export const V1_NOT_OFFERED = [
  'post /v1/videos/edits',
  'post /v1/videos/extensions',
  'post /v1/videos/characters',
  'get /v1/videos/characters/:id',
  'post /v1/videos/:id/remix',
];
export const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'head', 'options', 'trace'] as const;
export const SAMPLE_ID = '00000000-0000-4000-8000-000000000000';

export let stack: Stack;
export let customer: { workspaceId: string; key: string };
/** The backends the stack's API serves, as it computes them (from the adapters its configuration builds). */
export const availability = () => configuredBackends(createVideoProviders(stack.db, stack.config));
export let doc: OpenApiDocument & Json;

/** A JSON Schema without its root $schema (the document declares the dialect once). */
export function bare(schema: Json): Json {
  const { $schema, ...rest } = schema;
  assert.equal($schema, 'https://json-schema.org/draft/2020-12/schema');
  return rest;
}
export const jsonSchemaOf = (schema: z.ZodType, io: 'input' | 'output') => bare(z.toJSONSchema(schema, { io }));

export function pointer(ref: string): Json {
  assert.ok(ref.startsWith('#/'), `only local $refs: ${ref}`);
  return ref
    .slice(2)
    .split('/')
    .reduce((o: Json, k) => (o === undefined ? undefined : o[k.replace(/~1/g, '/').replace(/~0/g, '~')]), doc);
}
export const deref = (o: Json): Json => (o && typeof o.$ref === 'string' ? deref(pointer(o.$ref)) : o);
/** The schema with every $ref replaced by what it points at. */
export function inlined(o: Json): Json {
  if (Array.isArray(o)) return o.map(inlined);
  if (o === null || typeof o !== 'object') return o;
  if (typeof o.$ref === 'string') return inlined(pointer(o.$ref));
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, inlined(v)]));
}

/**
 * The schema without OpenAPI's `discriminator`, which zod-openapi adds (with `type: object`) to a
 * discriminated union, after checking it names a property every variant has.
 */
export function withoutDiscriminators(o: Json): Json {
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
export function requestComponents(): string[] {
  const refs = operations().flatMap(({ op }) =>
    Object.values(op.requestBody?.content ?? {}).map((m: Json) => m.schema?.$ref as string | undefined),
  );
  return [...new Set(refs.filter((r) => r !== undefined).map((r) => r.split('/').pop()!))].sort();
}

export function operations(): { path: string; method: string; op: Json }[] {
  return Object.entries(doc.paths).flatMap(([path, item]: [string, Json]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method] })),
  );
}
/** A concrete request path for a path template. */
export const instance = (template: string) => template.replace(/\{key\}/g, 'videos/x/0.mp4').replace(/\{[^}]+\}/g, SAMPLE_ID);

/** The response schema documented for (method, path, status), as the zod schema of the same name. */
export function documented(
  method: string,
  path: string,
  status: number,
  contentType: string | null,
): { name: string; schema: z.ZodType } | null {
  const op = doc.paths[path]?.[method];
  assert.ok(op, `${method.toUpperCase()} ${path} is not documented`);
  const resp = deref(op.responses[String(status)] ?? op.responses['default']);
  assert.ok(op.responses[String(status)] || status >= 500, `${method.toUpperCase()} ${path} answered ${status}, which is not documented`);
  const base = (contentType ?? '').split(';')[0]!.trim();
  const content = resp.content ?? {};
  assert.ok(
    base in content,
    `${method.toUpperCase()} ${path} ${status} answered ${contentType}; documented: ${Object.keys(content).join(', ')}`,
  );
  const ref: string | undefined = content[base].schema?.$ref;
  if (!ref) return null;
  const name = ref.split('/').pop()!;
  const schema = SCHEMAS[name];
  assert.ok(schema instanceof z.ZodType, `${name} is not a zod schema exported by a schemas.ts or openai-schemas.ts`);
  return { name, schema };
}

/** Asserts that a real response is documented for its operation and status and parses with that schema. */
export function assertDocumented(method: string, path: string, r: HttpResult): void {
  const d = documented(method, path, r.status, r.headers.get('content-type'));
  if (!d) return;
  const parsed = d.schema.safeParse(r.body);
  assert.ok(
    parsed.success,
    `${method.toUpperCase()} ${path} ${r.status} does not match ${d.name}: ${JSON.stringify(parsed.error?.issues)}\n${JSON.stringify(r.body)}`,
  );
}

/** Half a second of a 330 Hz tone, as a WAV file: what a voice upload takes. */
export function voiceSample(): Blob {
  const samples = new Int16Array(11_025);
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 22_050));
  return new Blob([new Uint8Array(encodeWav(samples, 22_050))], { type: 'audio/wav' });
}

/** A multipart POST, as the openai SDKs send their uploads. */
export async function postForm(path: string, token: string, parts: Record<string, string | [Blob, string]>): Promise<HttpResult> {
  const fd = new FormData();
  for (const [name, v] of Object.entries(parts)) {
    if (typeof v === 'string') fd.append(name, v);
    else fd.append(name, v[0], v[1]);
  }
  const res = await fetch(`${stack.baseUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: fd });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** A binary answer: documented for its operation, status and media type; its bytes read. */
export async function assertBinaryDocumented(method: string, path: string, url: string, init: RequestInit): Promise<Buffer> {
  const res = await fetch(`${stack.baseUrl}${url}`, init);
  assert.equal(res.status, 200, `${method.toUpperCase()} ${url}: ${res.status}`);
  documented(method, path, 200, res.headers.get('content-type'));
  return Buffer.from(await res.arrayBuffer());
}

/** Registers the file's hooks: one service stack, a customer with credit, and the document it serves. */
export function useDocumentedStack(): void {
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
}
