// GET /v2/models (the models this key may use, where a backend serves them) and GET /v2/models/all
// (the whole catalog, saying which backend serves each model).
import { Router, type RequestHandler } from 'express';
import { SPEECH_MODELS, VIDEO_MODELS, videoBackendFor } from '../../catalog.js';
import { keyAllowsModel } from '../../services/workspaces.js';
import { principalOf } from '../auth.js';
import { notFound } from '../errors.js';
import { presentSpeechModel, presentVideoModel } from '../presenters.js';

export function modelRoutes(deps: { auth: RequestHandler; simulator: boolean; vertex?: boolean; voiceProvider: string }): Router {
  const r = Router();
  const all = () => [
    ...VIDEO_MODELS.map((m) => presentVideoModel(m, videoBackendFor(m, { simulator: deps.simulator, vertex: deps.vertex ?? false }))),
    ...SPEECH_MODELS.map((m) => presentSpeechModel(m, deps.voiceProvider)),
  ];

  r.get('/v2/models', deps.auth, (_req, res) => {
    const principal = principalOf(res);
    res.json({ object: 'list', data: all().filter((m) => m.available && keyAllowsModel(principal, m.id)) });
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
