// GET /v2/models (the models this key may use, where a backend serves them) and GET /v2/models/all
// (the whole catalog, saying which backend serves each model and which backends can, in order, and the
// retired ids still accepted).
import { Router, type RequestHandler } from 'express';
import { findVideoModel, speechModels, videoBackendsFor, videoModelAliases, videoModels, type ConfiguredBackends, type VideoModel } from '../../catalog.js';
import { keyAllowsModel } from '../../services/workspaces.js';
import { principalOf } from '../auth.js';
import { notFound } from '../errors.js';
import { presentSpeechModel, presentVideoModel, presentVideoModelAlias } from '../presenters.js';

export function modelRoutes(deps: { auth: RequestHandler; simulator: boolean; vertex?: boolean; fal?: boolean; replicate?: boolean; voiceProvider: string }): Router {
  const r = Router();
  const configured: ConfiguredBackends = { simulator: deps.simulator, vertex: deps.vertex, fal: deps.fal, replicate: deps.replicate };
  const usableOf = (m: VideoModel) => videoBackendsFor(m, configured);
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
