// 405 Method Not Allowed (with `Allow`) for a path some route answers, asked with a method none of its
// routes has; OPTIONS on such a path answers 204 with `Allow` (ahead of the routers, which would each
// list only their own methods). The methods are read from the app's own router (every route layer
// whose path matches, in the routers mounted in it), never from a list.
import type { Express, RequestHandler } from 'express';
import { ApiError } from '../errors.js';

interface RouterLayer {
  route?: { methods: Record<string, boolean> };
  handle?: { stack?: RouterLayer[] };
  match(path: string): boolean;
}

/** The methods the app's routes answer on `path` (HEAD with GET, and OPTIONS); empty when none matches. */
export function allowedMethods(app: Express, path: string): string[] {
  const methods = new Set<string>();
  const walk = (stack: RouterLayer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        if (layer.match(path)) for (const m of Object.keys(layer.route.methods)) if (m !== '_all') methods.add(m.toUpperCase());
      } else if (Array.isArray(layer.handle?.stack)) {
        walk(layer.handle.stack); // a Router mounted at '/' (every router of this app is)
      }
    }
  };
  walk((app as unknown as { router: { stack: RouterLayer[] } }).router.stack);
  if (methods.size === 0) return [];
  if (methods.has('GET')) methods.add('HEAD');
  methods.add('OPTIONS');
  return [...methods].sort();
}

/** Mounted before the routes: OPTIONS on a known path answers 204 with every method its routes have. */
export function optionsAllow(app: Express): RequestHandler {
  return (req, res, next) => {
    if (req.method !== 'OPTIONS') return next();
    const allowed = allowedMethods(app, req.path);
    if (allowed.length === 0) return next();
    res.status(204).set('Allow', allowed.join(', ')).end();
  };
}

/**
 * Mounted after every route, before the 404 (the app's, and the one of /v1, whose errors have their own
 * shape): answers what no route of a known path did.
 */
export function methodNotAllowed(app: Express): RequestHandler {
  return (req, _res, next) => {
    const path = req.baseUrl + req.path;
    const allowed = allowedMethods(app, path);
    if (allowed.length === 0 || allowed.includes(req.method)) return next();
    const allow = allowed.join(', ');
    throw new ApiError(
      405,
      'invalid_request_error',
      'method_not_allowed',
      `${req.method} is not allowed on ${path}; allowed: ${allow}`,
      null,
      { Allow: allow },
    );
  };
}
