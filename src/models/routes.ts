// GET /v2/models (the models this key may use, where a backend serves them) and GET /v2/models/all
// (the whole catalog, saying which backend serves each model and which backends can, in order, and the
// retired ids still accepted).
import type { RequestHandler } from 'express';
import { z } from 'zod';
import {
  findVideoModel,
  speechModels,
  videoBackendsFor,
  videoModelAliases,
  videoModels,
  type ConfiguredBackends,
  type VideoModel,
} from './catalog.js';
import { keyAllowsModel } from './key-models.js';
import { principalOf } from '../http/auth.js';
import { notFound } from '../errors.js';
import { presentSpeechModel, presentVideoModel, presentVideoModelAlias, type ConfiguredVoiceProvider } from './present.js';
import { ApiRouter, json, type RouteContract } from '../http/openapi.js';
import { Model, ModelList } from './schemas.js';

const listModels = {
  method: 'get',
  path: '/v2/models',
  operationId: 'listModels',
  tag: 'Models',
  summary: 'List the models this key may use',
  description: 'The models this API key is permitted to use and that are available here.',
  security: 'apiKey',
  responses: { '200': json(ModelList, 'The models.') },
} satisfies RouteContract;

const listAllModels = {
  method: 'get',
  path: '/v2/models/all',
  operationId: 'listAllModels',
  tag: 'Models',
  summary: 'List every model of the catalog',
  description: 'The whole catalog, each model saying which backend serves it (null: not available here).',
  security: 'apiKey',
  responses: { '200': json(ModelList, 'The models.') },
} satisfies RouteContract;

const getModel = {
  method: 'get',
  path: '/v2/models/{id}',
  operationId: 'getModel',
  tag: 'Models',
  summary: 'Get a model',
  security: 'apiKey',
  requestParams: { path: z.object({ id: z.string().describe('The model id, e.g. sim-video-1.') }) },
  responses: { '200': json(Model, 'The model.') },
  errors: { 404: 'Unknown model (model_not_found).' },
} satisfies RouteContract;

/** `backends`: the process's one set of configured video backends, the one GET /v1/models and the create read. */
export function modelRoutes(deps: {
  auth: RequestHandler;
  backends: ConfiguredBackends;
  /** The configured voice providers, with their preset voices. */
  voiceProviders: readonly ConfiguredVoiceProvider[];
}): ApiRouter {
  const api = new ApiRouter();
  const usableOf = (m: VideoModel) => videoBackendsFor(m, deps.backends);
  const all = () => [
    ...videoModels().map((m) => {
      const usable = usableOf(m);
      return presentVideoModel(m, usable[0] ?? null, usable);
    }),
    ...videoModelAliases().map((a) => {
      const replacement = findVideoModel(a.replaced_by)!;
      const usable = usableOf(replacement);
      return presentVideoModelAlias(a, replacement, usable[0] ?? null, usable);
    }),
    ...speechModels().map((m) => presentSpeechModel(m, deps.voiceProviders)),
  ];

  api.route(listModels, deps.auth, (_input, _req, res) => {
    const principal = principalOf(res);
    // Retired ids are not offered: they are listed (deprecated) in /v2/models/all only.
    const usable = all().filter((m) => m.available && !('deprecated' in m && m.deprecated) && keyAllowsModel(principal, m.id));
    res.json({ object: 'list', data: usable });
  });

  api.route(listAllModels, deps.auth, (_input, _req, res) => {
    res.json({ object: 'list', data: all() });
  });

  api.route(getModel, deps.auth, (input, _req, res) => {
    const m = all().find((x) => x.id === input.params.id);
    if (!m) throw notFound('model_not_found', `model "${input.params.id}" does not exist`, 'id');
    res.json(m);
  });

  return api;
}
