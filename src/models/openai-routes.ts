// GET /v1/models and GET /v1/models/{id} in OpenAI's shape ({id, object: "model", created, owned_by}):
// the video and speech models this API key may use and something here serves (what GET /v2/models
// lists). Any other id, including one the key may not use, is a 404 as OpenAI answers it.
import type { RequestHandler } from 'express';
import { z } from 'zod';
import { speechModels, videoBackendFor, videoModels, type ConfiguredBackends } from './catalog.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { keyAllowsModel } from './key-models.js';
import { principalOf } from '../http/auth.js';
import { notFound } from '../errors.js';
import { ApiRouter, json, type RouteContract } from '../http/openapi.js';
import { OpenAiModel, OpenAiModelList } from './openai-schemas.js';
import type { ConfiguredVoiceProvider } from './present.js';
import { OPENAI_OPERATION } from '../http/openai/errors.js';

/** The catalog has no dates: every model is reported as created at this service's first release. */
const CATALOG_CREATED_S = 1_735_689_600; // 2025-01-01T00:00:00Z

const openaiListModels = {
  method: 'get',
  path: '/v1/models',
  operationId: 'openaiListModels',
  summary: 'List models (client.models.list)',
  description: 'The video and speech models this API key may use and that are served here, as GET /v2/models lists them.',
  ...OPENAI_OPERATION,
  responses: { '200': json(OpenAiModelList, 'The models.') },
} satisfies RouteContract;

const openaiRetrieveModel = {
  method: 'get',
  path: '/v1/models/{id}',
  operationId: 'openaiRetrieveModel',
  summary: 'Retrieve a model (client.models.retrieve)',
  ...OPENAI_OPERATION,
  requestParams: { path: z.object({ id: z.string().describe('The model id, e.g. sim-video-1.') }) },
  responses: { '200': json(OpenAiModel, 'The model.') },
  errors: { 404: 'No such model, or one this API key may not use (model_not_found, `param: model`).' },
} satisfies RouteContract;

/** `backends`: the process's one set of configured video backends, the one GET /v2/models and the create read. */
export function openAiModelRoutes(deps: {
  auth: RequestHandler;
  backends: ConfiguredBackends;
  voiceProviders: readonly ConfiguredVoiceProvider[];
}): ApiRouter {
  const api = new ApiRouter();
  const usable = (principal: ApiKeyPrincipal) =>
    [
      ...videoModels().filter((m) => videoBackendFor(m, deps.backends) !== null),
      ...speechModels().filter((m) => deps.voiceProviders.some((p) => p.name === m.provider)),
    ]
      .filter((m) => keyAllowsModel(principal, m.id))
      .map((m) => ({ id: m.id, object: 'model' as const, created: CATALOG_CREATED_S, owned_by: m.owned_by }));

  api.route(openaiListModels, deps.auth, (_input, _req, res) => {
    res.json({ object: 'list', data: usable(principalOf(res)) });
  });

  api.route(openaiRetrieveModel, deps.auth, (input, _req, res) => {
    const id = input.params.id;
    const m = usable(principalOf(res)).find((x) => x.id === id);
    if (!m) throw notFound('model_not_found', `The model '${id}' does not exist or you do not have access to it.`, 'model');
    res.json(m);
  });

  return api;
}
