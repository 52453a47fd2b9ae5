// The OpenAPI 3.1 document of the API, served at GET /v2/openapi.json and rendered by GET /docs.
//
// Each route's contract lives beside its handler. A route file declares every operation's contract as
// plain data (`const getThing = { ... } satisfies RouteContract`: method, path, summary, description,
// parameters, request body, responses and the errors it can answer, security) and mounts it with
// `api.route(contract, ...middleware, handler)`. `api.route` mounts the middleware (authentication, rate
// limit, body parser) on exactly that method and path, then validates the request against the
// contract's schemas (path parameters, query, declared headers, the body, the Idempotency-Key) and
// calls the handler with the values they give, typed from the contract: a refusal is the 400 of
// fromZodError (or the contract's own `invalid` answer) and the handler never runs. What no schema can
// say (a model's limits, which ids exist) the handler's services check. createApp (../runtime/app.ts) mounts the
// routers and builds this document from the contracts of what it mounted, so the document lists
// exactly the operations served (a handler mounted on `api.router` directly, like the docs page's
// assets, is not an operation of the API).
//
//   const getThing = {
//     method: 'get', path: '/v2/things/{id}', operationId: 'getThing', tag: 'Things', summary: 'Get a thing',
//     security: 'apiKey', requestParams: { path: z.object({ id: z.string().describe('The thing id.') }) },
//     responses: { '200': json(S.Thing, 'The thing.') }, errors: { 404: 'No such thing.' },
//   } satisfies RouteContract;
//   api.route(getThing, deps.auth, async ({ params }, req, res) => { ... params.id ... });
//
// A route behind an API key or the admin token (`security`) documents its 401, and a read with an API
// key its 429, without saying so.
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
import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z, type ZodError } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponseObject } from 'zod-openapi';
import * as S from './schemas.js';
import * as OpenAi from './openai/schemas.js';
import { JSON_BODY_BYTES_MAX } from './json-body.js';
import { JSON_VALUE_COMPONENT, JSON_VALUE_SCHEMA, refuseControl, refuseNul } from './openapi-no-nul.js';
import { projectPath } from '../paths.js';
import { fromZodError, invalidParam, type ApiError } from '../errors.js';

/** The property of a RegExp route that holds its documented path (read, by the same registered symbol, by ../metrics.ts). */
const ROUTE_LABEL = Symbol.for('video-voice-api.routeLabel');
import { multipartOf, type MultipartForm } from './multipart.js';

type JsonSchema = Record<string, unknown>;
type Obj = Record<string, unknown>;
export type ObjectSchema = JsonSchema & { properties: Record<string, JsonSchema>; required?: string[] };

const MiB = 1024 * 1024;
export const bytesText = (n: number) => (n % MiB === 0 ? `${n / MiB} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} bytes`);

/** What serves the models here: the video backends this process serves (the catalog's ConfiguredBackends), and the voice provider. */
export interface ModelAvailability {
  backends: { simulator: boolean } & { readonly [backend: string]: boolean | undefined };
  /** The configured voice providers' names, in their order (the first is a clone's default). */
  voiceProviders: readonly string[];
  /** A preset voice of the first provider the examples name (its descriptor's), if it has one. */
  exampleVoice?: string | undefined;
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
      'Events `video.generation.succeeded` and `video.generation.failed` (cancelled jobs too), and the budget alerts `balance.low` and ' +
      '`api_key.spend_threshold`, are POSTed to every endpoint of the workspace subscribed to them, ' +
      'with the body of their type (WebhookEvent for a job) and the Standard Webhooks headers `webhook-id` (the event id), ' +
      '`webhook-timestamp` (Unix seconds of the attempt) and ' +
      '`webhook-signature` = `v1,` + base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), ' +
      'key = the base64-decoded part of the secret after `whsec_`. ' +
      'Answer 2xx within 10 s; anything else (redirects included) is retried with the same webhook-id, ' +
      'backing off from 5 s (WEBHOOK_RETRY_INITIAL_MS) up to an hour between attempts, for 24 hours.',
  },
  { name: 'Billing', description: "The workspace's balance and ledger statement." },
  { name: 'Files', description: 'Generated files behind signed, expiring URLs.' },
  {
    name: 'Batches',
    description:
      'Many video and speech requests as one: uploaded batch files, batches (one reservation of their estimates, run durably ' +
      'with bounded concurrency), and their output and error files.',
  },
  { name: 'Admin', description: 'Operators only: workspaces, credits, API keys, ledger audit. Bearer ADMIN_TOKEN.' },
  { name: 'Service', description: 'Health, readiness and this documentation.' },
  {
    name: 'OpenAI-compatible',
    description:
      "OpenAI's Videos, Audio (speech, voices, voice consents) and Models APIs under /v1, for the official " +
      'openai SDKs with their base URL set to <service>/v1 ' +
      "and an API key of this service: the same workspaces, jobs, voices and money as /v2. Errors have OpenAI's shape (OpenAiErrorResponse). " +
      'Remix, edits, extensions and characters of videos are not offered: they answer 400 `unsupported_feature` and are not listed here.',
  },
] as const;
type Tag = (typeof TAGS)[number]['name'];

// ---------------------------------------------------------------------------------------------
// Contracts

/** Error statuses a route may document; each answers its surface's error shape. */
export type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 409 | 413 | 415 | 422 | 426 | 429 | 502 | 503;

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
  /** multipart (required there): how the parsed form (./multipart.ts) is validated; `schema` then only documents the form. */
  parts?: MultipartParts;
}

/** The validation of a multipart body: the value `input` builds from the parsed form (text parts and files), checked with `schema`. */
export interface MultipartParts<S extends z.ZodType = z.ZodType> {
  schema: S;
  input: (form: MultipartForm) => Record<string, unknown>;
  /** The answer to a value `schema` refuses; default fromZodError. */
  invalid?: (err: ZodError, input: Record<string, unknown>) => ApiError;
}

/** One operation of the API: what the document says of it, and where Express mounts its handlers. */
export interface RouteContract extends Omit<ZodOpenApiOperationObject, 'tags' | 'security' | 'requestBody'> {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** The OpenAPI path template, e.g. /v2/videos/generations/{id} (mounted as /v2/videos/generations/:id). */
  path: string;
  /**
   * Mounted on this pattern instead, for a parameter that spans slashes: its capture groups are the
   * path template's parameters, in order.
   */
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
  /** The answer to a path parameter, query or header its schema refuses; default fromZodError (a 400 naming it). */
  invalid?: (err: ZodError, where: 'path' | 'query' | 'header', input: unknown) => ApiError;
}

// ---------------------------------------------------------------------------------------------
// Validation: what a handler receives

type Out<S> = S extends z.core.$ZodType ? z.output<S> : undefined;
type RequestParamOf<C, K extends 'path' | 'query' | 'header'> = C extends { requestParams: infer P }
  ? P extends { [k in K]: infer S }
    ? Out<S>
    : undefined
  : undefined;
type BodyValue<B> = B extends { parts: { schema: infer S } } ? Out<S> : B extends { schema: infer S } ? Out<S> : never;
type BodyOf<C> = C extends { body: infer B } ? (B extends readonly (infer E)[] ? BodyValue<E> : BodyValue<B>) : undefined;

/** What a contract's handler receives: the request's path parameters, query, declared headers and body, validated by the contract's schemas. */
export interface RouteInput<C extends RouteContract> {
  params: RequestParamOf<C, 'path'>;
  query: RequestParamOf<C, 'query'>;
  headers: RequestParamOf<C, 'header'>;
  body: BodyOf<C>;
  /** The Idempotency-Key header of an `idempotent` operation, if sent. */
  idempotencyKey: string | undefined;
}

/** The handler of an operation: its validated input first, then Express's request and response. */
export type ContractHandler<C extends RouteContract> = (input: RouteInput<C>, req: Request, res: Response) => unknown;

const mediaTypeOf = (body: BodyContract) => body.mediaType ?? 'application/json';
const bodiesOf = (c: RouteContract): BodyContract[] => (c.body === undefined ? [] : Array.isArray(c.body) ? c.body : [c.body]);

function check<S extends z.core.$ZodType>(schema: S, value: unknown, refuse: (err: ZodError) => ApiError): z.output<S> {
  const parsed = z.safeParse(schema, value);
  if (!parsed.success) throw refuse(parsed.error);
  return parsed.data;
}

/** The body of the request, validated by the contract's body of its media type (the body parser has refused any other). */
function validBody(bodies: BodyContract[], req: Request, res: Response): unknown {
  if (bodies.length === 0) return undefined;
  const body = bodies.find((b) => req.is(mediaTypeOf(b))) ?? bodies[0]!;
  if (!body.parts) return check(body.schema, req.body, (err) => fromZodError(err));
  const { schema, input, invalid } = body.parts;
  const value = input(multipartOf(res));
  return check(schema, value, (err) => (invalid ? invalid(err, value) : fromZodError(err)));
}

/** The path parameters by name: on an `expressPath`, its capture groups named by the path template's parameters. */
function pathParams(c: RouteContract, req: Request): Record<string, unknown> {
  if (!c.expressPath) return req.params;
  const groups: Record<string, unknown> = req.params;
  return Object.fromEntries([...c.path.matchAll(/\{(\w+)\}/g)].map(([, name], i) => [name, groups[i]]));
}

/** Unicode control characters (general category Cc, NUL included): no path or query parameter holds one (NO_CONTROL_PATTERN). */
// eslint-disable-next-line no-control-regex -- the very characters refused
const CONTROL_CHARACTER = /[\x00-\x1f\x7f-\x9f]/;

/**
 * Refuses a path or query parameter (its name or its value) holding a control character, whatever the
 * route's schema says: no id, name or cursor has one, and PostgreSQL cannot store NUL in text.
 */
function refuseControlCharacters(values: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(values)) {
    const texts = Array.isArray(value) ? value : [value];
    if (CONTROL_CHARACTER.test(name)) throw invalidParam(null, 'a parameter name must not contain control characters');
    if (texts.some((v) => typeof v === 'string' && CONTROL_CHARACTER.test(v)))
      throw invalidParam(name, `invalid ${name}: must not contain control characters`);
  }
}

/**
 * The input of an operation, validated in this order: path, query, declared headers (a header schema
 * names them in lower case, as Node gives them), body, then the Idempotency-Key. A refusal is thrown,
 * for the surface's error handler.
 */
function validInput<C extends RouteContract>(c: C, req: Request, res: Response): RouteInput<C> {
  const p = c.requestParams;
  const refuse = (where: 'path' | 'query' | 'header', input: unknown) => (err: ZodError) =>
    c.invalid ? c.invalid(err, where, input) : fromZodError(err);
  const key = req.get('idempotency-key');
  const params = pathParams(c, req);
  refuseControlCharacters(params);
  refuseControlCharacters(req.query as Record<string, unknown>);
  return {
    params: p?.path ? check(p.path, params, refuse('path', params)) : undefined,
    query: p?.query ? check(p.query, req.query, refuse('query', req.query)) : undefined,
    headers: p?.header ? check(p.header, req.headers, refuse('header', req.headers)) : undefined,
    body: validBody(bodiesOf(c), req, res),
    idempotencyKey:
      c.idempotent && key !== undefined ? check(S.IdempotencyKey, key, (err) => fromZodError(err, 'Idempotency-Key')) : undefined,
  } as RouteInput<C>;
}

/** An Express router whose every route is mounted from its contract: `api.route(contract, ...handlers)`. */
export class ApiRouter {
  readonly router = Router();
  readonly contracts: RouteContract[] = [];

  /**
   * Mounts the operation: its middleware (authentication, rate limit, body parser) in order, then the
   * validation of its input against the contract, then its handler with that input.
   */
  route<C extends RouteContract>(contract: C, ...handlers: [...RequestHandler[], ContractHandler<C>]): void {
    for (const b of bodiesOf(contract))
      if (mediaTypeOf(b) === 'multipart/form-data' && !b.parts)
        throw new Error(`${contract.operationId}: a multipart body needs its parts' validation`);
    const handle = handlers[handlers.length - 1] as ContractHandler<C>;
    const middleware = handlers.slice(0, -1) as RequestHandler[];
    const validated: RequestHandler = async (req, res) => {
      await handle(validInput(contract, req, res), req, res);
    };
    this.contracts.push(contract);
    // A RegExp route carries its documented path, which the request metrics label it by (../metrics.ts).
    if (contract.expressPath) Object.assign(contract.expressPath, { [ROUTE_LABEL]: contract.path });
    this.router[contract.method](contract.expressPath ?? contract.path.replace(/\{(\w+)\}/g, ':$1'), ...middleware, validated);
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
  426: 'This path is a WebSocket: send the request as an upgrade (`Connection: Upgrade`, `Upgrade: websocket`).',
  429: 'Rate limited (per API key); retry after `Retry-After` seconds.',
  502: 'The provider answered unusably. Nothing was charged.',
  503: 'The provider is not configured (`provider_not_configured`) or is unavailable.',
};
const RETRY_AFTER = header('Seconds to wait before retrying.', { type: 'integer', minimum: 0 });

function errorResponse(status: ErrorStatus, note: string | undefined, errorSchema: z.ZodType): ZodOpenApiResponseObject {
  const headers: Record<string, Obj> = {};
  if (status === 401) headers['WWW-Authenticate'] = header('`Bearer`');
  if (status === 429) headers['Retry-After'] = RETRY_AFTER;
  if (status === 426) headers['Upgrade'] = header('`websocket`');
  if (status === 503) headers['Retry-After'] = { ...RETRY_AFTER, description: 'When retrying later may succeed: seconds to wait.' };
  return json(errorSchema, note ?? ERROR_TEXT[status], Object.keys(headers).length ? headers : undefined);
}

const SECURITY = { apiKey: [{ ApiKeyAuth: [] }], admin: [{ AdminToken: [] }], none: [] };
const IDEMPOTENCY_REF = { $ref: '#/components/parameters/IdempotencyKey' };

function requestBody(bodies: BodyContract[], ctx: DocumentContext): NonNullable<ZodOpenApiOperationObject['requestBody']> {
  const content = bodies.map((body) => {
    const example = typeof body.example === 'function' ? body.example(ctx) : body.example;
    return [
      mediaTypeOf(body),
      { schema: body.schema, ...(example ? { example } : {}), ...(body.encoding ? { encoding: body.encoding } : {}) },
    ] as const;
  });
  return {
    required: true,
    description: bodies
      .map(
        (body) =>
          body.description ??
          `application/json, at most ${bytesText(body.bytes_max ?? JSON_BODY_BYTES_MAX)}; unknown fields are refused (400).`,
      )
      .join(' Or: '),
    content: Object.fromEntries(content),
  };
}

/**
 * The requestParams the document states: a location (path, query, header) whose every parameter is
 * stated by hand (`parameters`) is documented by those, its schema then only validating.
 */
function documentedParams(
  requestParams: RouteContract['requestParams'],
  parameters: RouteContract['parameters'],
): RouteContract['requestParams'] {
  if (!requestParams) return undefined;
  const stated = new Set((parameters ?? []).map((p) => ('in' in p && 'name' in p ? `${String(p.in)} ${String(p.name)}` : '')));
  const byHand = ([where, schema]: [string, unknown]) =>
    schema instanceof z.ZodObject && Object.keys(schema.shape).every((name) => stated.has(`${where} ${name}`));
  return Object.fromEntries(Object.entries(requestParams).filter((entry) => !byHand(entry)));
}

function operation(c: RouteContract, ctx: DocumentContext): ZodOpenApiOperationObject {
  const {
    method: _m,
    path: _p,
    expressPath: _e,
    tag,
    security,
    idempotent,
    body: _b,
    errors,
    errorShape,
    responses,
    parameters,
    requestParams,
    ...rest
  } = c;
  const params = [...(parameters ?? []), ...(idempotent ? [IDEMPOTENCY_REF] : [])];
  const bodies = bodiesOf(c);
  const jsonBody = bodies.find((b) => mediaTypeOf(b) === 'application/json');
  // A JSON body can be too large (413) or not of a media type the route takes (415): said once here for every such route.
  const bodyErrors = jsonBody
    ? {
        413: `The JSON body exceeds ${bytesText(jsonBody.bytes_max ?? JSON_BODY_BYTES_MAX)} (request_too_large).`,
        415: `The body is not ${bodies.map(mediaTypeOf).join(' or ')} (unsupported_media_type).`,
      }
    : {};
  // Every read with an API key is rate limited per key (RATE_LIMIT_READS_PER_MINUTE).
  const readLimit =
    security === 'apiKey' && c.method === 'get' ? { 429: 'Too many reads (per API key); retry after `Retry-After` seconds.' } : {};
  // A route behind an API key or the admin token refuses a request without a valid one.
  const unauthorized = security === 'none' ? {} : { 401: undefined };
  const errorSchema = errorShape === 'openai' ? OpenAi.OpenAiErrorResponse : S.ErrorResponse;
  const errorResponses = Object.entries({ ...bodyErrors, ...unauthorized, ...readLimit, ...errors }).map(([status, note]) => [
    status,
    errorResponse(Number(status) as ErrorStatus, note, errorSchema),
  ]);
  return {
    ...rest,
    requestParams: documentedParams(requestParams, parameters),
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
        'Money is in euros, as JSON numbers. Every error answers `{"error": {"type", "code", "message", ' +
        '"param"}}` (under /v1 with OpenAI\'s error types: OpenAiErrorResponse), ' +
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
  // Path and query parameters: no control characters (validInput refuses them).
  for (const op of Object.values(doc.paths).flatMap((ops) => Object.values(ops)))
    for (const p of (op['parameters'] ?? []) as Obj[])
      if ((p['in'] === 'path' || p['in'] === 'query') && typeof p['schema'] === 'object')
        p['schema'] = refuseControl(p['schema'] as JsonSchema);
  return doc;
}
