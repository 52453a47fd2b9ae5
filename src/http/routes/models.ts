// GET /v2/models (the models this key may use) and GET /v2/models/all (the whole catalog, saying
// which backend serves each model).
import { Router, type RequestHandler } from 'express';
import { VIDEO_MODELS, videoBackendFor } from '../../catalog.js';
import { keyAllowsModel } from '../../services/workspaces.js';
import { principalOf } from '../auth.js';
import { notFound } from '../errors.js';
import { presentVideoModel } from '../presenters.js';

export function modelRoutes(deps: { auth: RequestHandler; simulator: boolean }): Router {
  const r = Router();
  const present = (m: (typeof VIDEO_MODELS)[number]) => presentVideoModel(m, videoBackendFor(m, { simulator: deps.simulator }));

  r.get('/v2/models', deps.auth, (_req, res) => {
    const principal = principalOf(res);
    const data = VIDEO_MODELS.filter((m) => keyAllowsModel(principal, m.id)).map(present).filter((m) => m.available);
    res.json({ object: 'list', data });
  });
  r.get('/v2/models/all', deps.auth, (_req, res) => {
    res.json({ object: 'list', data: VIDEO_MODELS.map(present) });
  });
  r.get('/v2/models/:id', deps.auth, (req, res) => {
    const m = VIDEO_MODELS.find((x) => x.id === req.params['id']);
    if (!m) throw notFound('model_not_found', `model "${req.params['id']}" does not exist`, 'id');
    res.json(present(m));
  });
  return r;
}
