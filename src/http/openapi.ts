// The OpenAPI 3.1 document of the API, served at GET /v2/openapi.json and rendered by GET /docs.
//
// Each route's contract lives beside its handler. A route file builds an ApiRouter and declares every
// operation with `api.route(contract, ...handlers)`: the contract (method, path, summary, description,
// parameters, request body, responses and the errors it can answer, security) is plain data right
// above the Express handlers that implement it, and `api.route` mounts those handlers on exactly that
// method and path. createApp (./app.ts) mounts the routers and builds this document from the
// contracts of what it mounted, so the document lists exactly the operations served (a handler
// mounted on `api.router` directly, like the docs page's assets, is not an operation of the API).
//
//   api.route(
//     { method: 'get', path: '/v2/things/{id}', operationId: 'getThing', tag: 'Things', summary: 'Get a thing',
//       security: 'apiKey', requestParams: { path: z.object({ id: z.string().describe('The thing id.') }) },
//       responses: { '200': json(S.Thing, 'The thing.') }, errors: { 401: undefined, 404: 'No such thing.' } },
//     deps.auth,
//     async (req, res) => { ... },
//   );
//
// Schemas are zod: request bodies, parameters and responses are the very zod schemas the routes
// validate with (each feature's schemas.ts), turned into JSON Schema by zod-openapi (which calls zod's own
// z.toJSONSchema: io 'input' for requests, 'output' for responses). A request body is a component
// named by its contract (`body.component`); a response schema the features list (DocumentParts below) is a
// component named after its key there, any other is inlined. A contract's tag must be one of TAGS.
// A body taken in several media types (JSON or multipart) is a list of bodies, one component each.
// Errors have one shape per surface: ErrorResponse, or OpenAI's (OpenAiErrorResponse) for a contract
// of the OpenAI-compatible /v1 routes (`errorShape: 'openai'`).
// Request bodies whose limits depend on the model (src/models/openapi-bodies.ts) or on the mode are given by
// the contract's `body.override`, which the builder applies to the generated schema; every JSON body
// then refuses NUL (./openapi-no-nul.ts), and its 413 and 415 answers are documented by the builder.
//
// Library: zod-openapi rather than @asteasolutions/zod-to-openapi. zod-openapi renders schemas with
// z.toJSONSchema itself, so a component is exactly what zod says of the schema that validates (the
// NUL rule, per-model variants and test/http/openapi.document.test.ts build on that output); it reads zod 4's own
// .meta() without patching zod (no extendZodWithOpenApi), and takes operations as plain OpenAPI
// objects whose schemas may be zod, which is what a contract is. zod-to-openapi converts each zod
// type with its own transformers (its output differs from z.toJSONSchema's) and needs zod extended
// (extendZodWithOpenApi) for parameter metadata.
import fs from 'node:fs';
import { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponseObject } from 'zod-openapi';
import * as S from './schemas.js';
import * as OpenAi from './openai/schemas.js';
import { JSON_BODY_BYTES_MAX } from './json-body.js';
import { JSON_VALUE_COMPONENT, JSON_VALUE_SCHEMA, refuseNul } from './openapi-no-nul.js';
import { projectPath } from '../paths.js';

type JsonSchema = Record<string, unknown>;
type Obj = Record<string, unknown>;
export type ObjectSchema = JsonSchema & { properties: Record<string, JsonSchema>; required?: string[] };

const MiB = 1024 * 1024;
export const bytesText = (n: number) => (n % MiB === 0 ? `${n / MiB} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`);

/** What serves the models here: the simulator, Vertex AI, the configured voice provider. */
export interface ModelAvailability {
  simulator: boolean;
  vertex: boolean;
  voiceProvider: string;
}

/** What the document depends on in this process: which models are served, and production mode (webhook targets). */
export type DocumentContext = ModelAvailability & { production?: boolean };

/**
 * The parts of the document the features give: the response components (component name -> response
 * schema, io 'output'; each feature lists its own in RESPONSE_COMPONENTS) and what this service POSTs to
 * webhook endpoints (the document's `webhooks`, by event type).
 */
export interface DocumentParts {
  responses: Record<string, z.ZodType>;
  webhooks: Record<string, { post: ZodOpenApiOperationObject }>;
}

const TAGS = [
  { name: 'Videos', description: 'Video generation jobs.' },
  { name: 'Models', description: 'The model catalog: limits and prices.' },
  { name: 'Voices', description: 'Cloned voices, per workspace.' },
  { name: 'Speech', description: 'Text to speech.' },
  {
    name: 'Webhooks',
    description:
      'Events `video.generation.succeeded` and `video.generation.failed` (cancelled jobs too) are POSTed to every endpoint of the workspace subscribed to them, ' +
      'with body WebhookEvent and the Standard Webhooks headers `webhook-id` (the event id), `webhook-timestamp` (Unix seconds of the attempt) and ' +
      '`webhook-signature` = `v1,` + base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), key = the base64-decoded part of the secret after `whsec_`. ' +
      'Answer 2xx within 10 s; anything else (redirects included) is retried with the same webhook-id, backing off from 5 s (WEBHOOK_RETRY_INITIAL_MS) up to an hour between attempts, for 24 hours.',
  },
  { name: 'Billing', description: "The workspace's balance and ledger statement." },
  { name: 'Files', description: 'Generated files behind signed, expiring URLs.' },
  { name: 'Admin', description: 'Operators only: workspaces, credits, API keys, ledger audit. Bearer ADMIN_TOKEN.' },
  { name: 'Service', description: 'Health, readiness and this documentation.' },
  {
    name: 'OpenAI-compatible',
    description:
      "OpenAI's Videos, Audio (speech, voices, voice consents) and Models APIs under /v1, for the official openai SDKs with their base URL set to <service>/v1 " +
      'and an API key of this service: the same workspaces, jobs, voices and money as /v2. Errors have OpenAI\'s shape (OpenAiErrorResponse). ' +
      'Remix, edits, extensions and characters of videos are not offered: they answer 400 `unsupported_feature` and are not listed here.',
  },
] as const;
type Tag = (typeof TAGS)[number]['name'];

// ---------------------------------------------------------------------------------------------
// Contracts

/** Error statuses a route may document; each answers its surface's error shape. */
export type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 409 | 413 | 415 | 422 | 429 | 502 | 503;

/** The request body of an operation: the zod schema its handler validates with, as a named component. */
export interface BodyContract {
  /** Its name under components/schemas. */
  component: string;
  schema: z.ZodType;
  /** Default application/json (the body's description then states the size limit and unknown fields); each media type once per operation. */
  mediaType?: 'application/json' | 'multipart/form-data';
  description?: string;
  bytes_max?: number;
  example?: Obj | ((ctx: DocumentContext) => Obj | undefined);
  /** multipart: how each part is encoded. */
  encoding?: Record<string, { contentType: string }>;
  /** Replaces the generated schema where the document states more than zod can (e.g. per-model limits). */
  override?: (generated: ObjectSchema, ctx: DocumentContext) => JsonSchema;
}

/** One operation of the API: what the document says of it, and where Express mounts its handlers. */
export interface RouteContract extends Omit<ZodOpenApiOperationObject, 'tags' | 'security' | 'requestBody'> {
  method: 'get' | 'post' | 'delete';
  /** The OpenAPI path template, e.g. /v2/videos/generations/{id} (mounted as /v2/videos/generations/:id). */
  path: string;
  /** Mounted on this pattern instead, for a parameter that spans slashes. */
  expressPath?: RegExp;
  operationId: string;
  tag: Tag;
  summary: string;
  security: 'apiKey' | 'admin' | 'none';
  /** Takes the optional Idempotency-Key header. */
  idempotent?: true;
  /** The request body; a list when the route takes it in several media types. */
  body?: BodyContract | BodyContract[];
  /** Error statuses the route can answer, with an optional note replacing the generic text. */
  errors?: Partial<Record<ErrorStatus, string | undefined>>;
  /** 'openai': the errors have OpenAI's shape (OpenAiErrorResponse), as every answer under /v1; absent, ErrorResponse. */
  errorShape?: 'openai';
}

/** An Express router whose every route is mounted from its contract: `api.route(contract, ...handlers)`. */
export class ApiRouter {
  readonly router = Router();
  readonly contracts: RouteContract[] = [];

  route(contract: RouteContract, ...handlers: RequestHandler[]): void {
    this.contracts.push(contract);
    this.router[contract.method](contract.expressPath ?? contract.path.replace(/\{(\w+)\}/g, ':$1'), ...handlers);
  }

  /** Mounts another ApiRouter's routes on this one's router, its contracts with them. */
  include(other: ApiRouter): void {
    this.contracts.push(...other.contracts);
    this.router.use(other.router);
  }
}

/** A JSON response of `schema` (a component when it is one of DocumentParts' responses). */
export const json = (schema: z.ZodType, description: string, headers?: Record<string, Obj>): ZodOpenApiResponseObject => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema } },
});
/** A response header. */
export const header = (description: string, schema: JsonSchema = { type: 'string' }) => ({ description, schema });

/** The 400 of a paginated list (`limit`, `after`). */
export const PAGE_400 = "Invalid `limit` (1 to 100) or `after` (not an id of this list's form); `error.param` names it.";

// ---------------------------------------------------------------------------------------------
// The builder

const ERROR_TEXT: Record<ErrorStatus, string> = {
  400: 'Invalid request; `error.param` names the parameter, header or part at fault.',
  401: 'Missing or invalid bearer token.',
  402: 'Insufficient credits: the balance does not cover the cost. Nothing was charged.',
  403: 'This API key is not permitted to use the model (`param: model`).',
  404: 'Not found.',
  409: 'This Idempotency-Key was already used with a different request.',
  413: 'Request too large.',
  415: 'Wrong media type.',
  422: 'The request is valid but what it names cannot be processed.',
  429: 'Rate limited (per API key); retry after `Retry-After` seconds.',
  502: 'The provider answered unusably. Nothing was charged.',
  503: 'The provider is not configured (`provider_not_configured`) or is unavailable.',
};
const RETRY_AFTER = header('Seconds to wait before retrying.', { type: 'integer', minimum: 0 });

function errorResponse(status: ErrorStatus, note: string | undefined, errorSchema: z.ZodType): ZodOpenApiResponseObject {
  const headers: Record<string, Obj> = {};
  if (status === 401) headers['WWW-Authenticate'] = header('`Bearer`');
  if (status === 429) headers['Retry-After'] = RETRY_AFTER;
  if (status === 503) headers['Retry-After'] = { ...RETRY_AFTER, description: 'When retrying later may succeed: seconds to wait.' };
  return json(errorSchema, note ?? ERROR_TEXT[status], Object.keys(headers).length ? headers : undefined);
}

const SECURITY = { apiKey: [{ ApiKeyAuth: [] }], admin: [{ AdminToken: [] }], none: [] };
const IDEMPOTENCY_REF = { $ref: '#/components/parameters/IdempotencyKey' };

const mediaTypeOf = (body: BodyContract) => body.mediaType ?? 'application/json';
const bodiesOf = (c: RouteContract): BodyContract[] => (c.body === undefined ? [] : Array.isArray(c.body) ? c.body : [c.body]);

function requestBody(bodies: BodyContract[], ctx: DocumentContext): NonNullable<ZodOpenApiOperationObject['requestBody']> {
  const content = bodies.map((body) => {
    const example = typeof body.example === 'function' ? body.example(ctx) : body.example;
    return [mediaTypeOf(body), { schema: body.schema, ...(example ? { example } : {}), ...(body.encoding ? { encoding: body.encoding } : {}) }] as const;
  });
  return {
    required: true,
    description: bodies
      .map((body) => body.description ?? `application/json, at most ${bytesText(body.bytes_max ?? JSON_BODY_BYTES_MAX)}; unknown fields are refused (400).`)
      .join(' Or: '),
    content: Object.fromEntries(content),
  };
}

function operation(c: RouteContract, ctx: DocumentContext): ZodOpenApiOperationObject {
  const { method: _m, path: _p, expressPath: _e, tag, security, idempotent, body: _b, errors, errorShape, responses, parameters, ...rest } = c;
  const params = [...(parameters ?? []), ...(idempotent ? [IDEMPOTENCY_REF] : [])];
  const bodies = bodiesOf(c);
  const jsonBody = bodies.find((b) => mediaTypeOf(b) === 'application/json');
  // A JSON body can be too large (413) or not of a media type the route takes (415): said once here for every such route.
  const bodyErrors = jsonBody ? {
          413: `The JSON body exceeds ${bytesText(jsonBody.bytes_max ?? JSON_BODY_BYTES_MAX)} (request_too_large).`,
          415: `The body is not ${bodies.map(mediaTypeOf).join(' or ')} (unsupported_media_type).`,
        } : {};
  // Every read with an API key is rate limited per key (RATE_LIMIT_READS_PER_MINUTE).
  const readLimit = security === 'apiKey' && c.method === 'get' ? { 429: 'Too many reads (per API key); retry after `Retry-After` seconds.' } : {};
  const errorSchema = errorShape === 'openai' ? OpenAi.OpenAiErrorResponse : S.ErrorResponse;
  const errorResponses = Object.entries({ ...bodyErrors, ...readLimit, ...errors }).map(([status, note]) => [status, errorResponse(Number(status) as ErrorStatus, note, errorSchema)]);
  return {
    ...rest,
    tags: [tag],
    security: SECURITY[security],
    ...(params.length ? { parameters: params } : {}),
    ...(bodies.length ? { requestBody: requestBody(bodies, ctx) } : {}),
    responses: {
      ...responses,
      ...Object.fromEntries(errorResponses),
      default: json(errorSchema, 'An unexpected server error (500 internal_error); the same error shape.'),
    },
  };
}

function packageVersion(): string {
  try {
    return String((JSON.parse(fs.readFileSync(projectPath('package.json'), 'utf8')) as { version?: unknown }).version ?? '0.0.0');
  } catch {
    return '0.0.0';
  }
}

/** A JSON Schema without its own $schema: the document's dialect is OpenAPI 3.1's default. */
export function bareJsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io }) as JsonSchema;
  return rest;
}

export type OpenApiDocument = {
  openapi: '3.1.0';
  info: Obj;
  tags: Obj[];
  paths: Record<string, Record<string, Obj>>;
  webhooks: Record<string, { post: Obj }>;
  components: { schemas: Record<string, JsonSchema>; parameters: Obj; securitySchemes: Obj };
};

/** The document of the operations `contracts` declare, for a process whose models are served as `ctx` says, with the features' `parts`. */
export function buildOpenApiDocument(ctx: DocumentContext, contracts: readonly RouteContract[], parts: DocumentParts): OpenApiDocument {
  const paths: ZodOpenApiPathsObject = {};
  const bodies = new Map<string, BodyContract>();
  for (const c of contracts) {
    (paths[c.path] ??= {})[c.method] = operation(c, ctx);
    for (const b of bodiesOf(c)) bodies.set(b.component, b);
  }
  const doc = createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Video and voice API',
      version: packageVersion(),
      description:
        'Paid video generation and voice cloning. Authenticate with `Authorization: Bearer <API key>`. ' +
        'Money is in euros, as JSON numbers. Every error answers `{"error": {"type", "code", "message", "param"}}` (under /v1 with OpenAI\'s error types: OpenAiErrorResponse), ' +
        'and every response carries an `X-Request-Id` header. Schemas are generated from the zod schemas the API validates with.',
    },
    tags: TAGS.map((t) => ({ ...t })),
    paths,
    webhooks: parts.webhooks,
    components: {
      schemas: { ...Object.fromEntries([...bodies].map(([name, b]) => [name, b.schema])), ...parts.responses },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description: 'Makes the request safe to retry: the same key from the same workspace is the same request, charged once.',
          schema: bareJsonSchema(S.IdempotencyKey, 'input'),
        },
      },
      securitySchemes: {
        ApiKeyAuth: { type: 'http', scheme: 'bearer', description: 'A workspace API key (vva_sk_...), created by an operator.' },
        AdminToken: { type: 'http', scheme: 'bearer', description: 'The operator token (ADMIN_TOKEN). Admin API only.' },
      },
    },
  }) as unknown as OpenApiDocument;
  // Request bodies: the contract's override, then (JSON bodies: ./json-body.ts refuses it) no NUL in any string or key.
  const schemas = doc.components.schemas;
  for (const [name, b] of bodies) {
    const generated = schemas[name] as ObjectSchema;
    const stated = b.override ? b.override(generated, ctx) : generated;
    schemas[name] = mediaTypeOf(b) === 'application/json' ? refuseNul(stated) : stated;
  }
  if (bodies.size > 0) schemas[JSON_VALUE_COMPONENT] = JSON_VALUE_SCHEMA;
  return doc;
}
