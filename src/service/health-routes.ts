// GET /healthz and GET /livez (the process is up) and GET /readyz (PostgreSQL is reachable: ./readiness.ts).
import { Health } from './schemas.js';
import { ApiRouter, json } from '../http/openapi.js';

export function healthRoutes(deps: { ready: () => Promise<boolean> }): ApiRouter {
  const api = new ApiRouter();

  api.route(
    {
      method: 'get',
      path: '/healthz',
      operationId: 'healthz',
      tag: 'Service',
      summary: 'Liveness',
      security: 'none',
      responses: { '200': json(Health, 'The process is up.') },
    },
    (_input, _req, res) => {
      res.json({ ok: true });
    },
  );

  api.route(
    {
      method: 'get',
      path: '/livez',
      operationId: 'livez',
      tag: 'Service',
      summary: 'Liveness (the probe of a Kubernetes liveness check; the same answer as /healthz)',
      security: 'none',
      responses: { '200': json(Health, 'The process is up.') },
    },
    (_input, _req, res) => {
      res.json({ ok: true });
    },
  );

  api.route(
    {
      method: 'get',
      path: '/readyz',
      operationId: 'readyz',
      tag: 'Service',
      summary: 'Readiness',
      description:
        'Whether PostgreSQL is reachable (checked at most once every 1.5 s). Temporal is not part of readiness: ' +
        'without it, creates answer 503 and everything else works.',
      security: 'none',
      responses: { '200': json(Health, 'Ready (`ok: true`).'), '503': json(Health, 'Not ready (`ok: false`).') },
    },
    async (_input, _req, res) => {
      const ok = await deps.ready().catch(() => false);
      res.status(ok ? 200 : 503).json({ ok });
    },
  );

  return api;
}
