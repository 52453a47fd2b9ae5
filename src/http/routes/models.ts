// GET /v2/models (the models this key may use, where a backend serves them) and GET /v2/models/all
// (the whole catalog, saying which backend serves each model, and the retired ids still accepted).
import { Router, type RequestHandler } from 'express';
import { findVideoModel, speechModels, videoBackendFor, videoModelAliases, videoModels, type VideoModel } from '../../catalog.js';
import { keyAllowsModel } from '../../services/workspaces.js';
import { principalOf } from '../auth.js';
import { notFound } from '../errors.js';
import { presentSpeechModel, presentVideoModel, presentVideoModelAlias } from '../presenters.js';

export function modelRoutes(deps: { auth: RequestHandler; simulator: boolean; vertex?: boolean; voiceProvider: string }): Router {
  const r = Router();
  const backendOf = (m: VideoModel) => videoBackendFor(m, { simulator: deps.simulator, vertex: deps.vertex ?? false });
  const all = () => [
    ...videoModels().map((m) => presentVideoModel(m, backendOf(m))),
    ...videoModelAliases().map((a) => {
      const replacement = findVideoModel(a.replaced_by)!;
      return presentVideoModelAlias(a, replacement, backendOf(replacement));
    }),
    ...speechModels().map((m) => presentSpeechModel(m, deps.voiceProvider)),
  ];

  r.get('/v2/models', deps.auth, (_req, res) => {
    const principal = principalOf(res);
    // Retired ids are not offered: they are listed (deprecated) in /v2/models/all only.
    const usable = all().filter((m) => m.available && !('deprecated' in m && m.deprecated) && keyAllowsModel(principal, m.id));
    res.json({ object: 'list', data: usable });
  });
  r.get('/v2/models/all', deps.auth, (_req, res) => {
    res.json({ object: 'list', data: all() });
  });
  r.get('/v2/models/:id', deps.auth, (req, res) => {
    const m = all().find((x) => x.id === req.params['id']);
    if (!m) throw notFound('model_not_found', `model "${req.params['id']}" does not exist`, 'id');
    res.json(m);
  });
  return r;
}
