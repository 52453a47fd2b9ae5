// GET /v2/openapi.json (the OpenAPI document, built once per app) and GET /docs: the document
// rendered by Swagger UI, with "Try it out", served from the `swagger-ui-dist` npm package. No CDN,
// no external script, style or font: the page works offline, and its Content-Security-Policy allows
// nothing but this origin.
import { createRequire } from 'node:module';
import path from 'node:path';
import { ApiRouter, type OpenApiDocument } from '../http/openapi.js';

const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The files of the package the page loads, by the name they are served under /docs/. */
export const DOCS_ASSETS: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

/** Starts Swagger UI on the served document; "Try it out" sends requests to this origin. */
export const DOCS_INIT_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/v2/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    tryItOutEnabled: true,
    persistAuthorization: false,
    displayRequestDuration: true,
    filter: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout'
  });
});
`;

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Video and voice API - reference</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// This origin only: the page, its scripts and styles, the document and "Try it out" requests.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
const PAGE_HEADERS = { 'Content-Security-Policy': CSP, 'X-Content-Type-Options': 'nosniff' };

/** `document`: the app's document, built once its routers (this one included) are all mounted. */
export function docsRoutes(document: () => OpenApiDocument): ApiRouter {
  const api = new ApiRouter();
  let json: string | undefined;

  api.route(
    {
      method: 'get',
      path: '/v2/openapi.json',
      operationId: 'getOpenApiDocument',
      tag: 'Service',
      summary: 'This OpenAPI document',
      security: 'none',
      responses: { '200': { description: 'The OpenAPI 3.1 document.', content: { 'application/json': { schema: { type: 'object' } } } } },
    },
    (_input, _req, res) => {
      json ??= JSON.stringify(document());
      res.status(200).type('application/json').set('Access-Control-Allow-Origin', '*').send(json);
    },
  );

  api.route(
    {
      method: 'get',
      path: '/docs',
      operationId: 'getDocsPage',
      tag: 'Service',
      summary: 'API documentation page',
      description: 'This document rendered by Swagger UI, with "Try it out"; everything served from this origin.',
      security: 'none',
      responses: { '200': { description: 'The page.', content: { 'text/html': { schema: { type: 'string' } } } } },
    },
    (_input, _req, res) => {
      res.status(200).type('html').set(PAGE_HEADERS).send(HTML);
    },
  );

  // The page's script and the package's files: parts of the page, not operations of the API.
  api.router.get('/docs/init.js', (_req, res) => {
    res.status(200).type('text/javascript; charset=utf-8').set(PAGE_HEADERS).send(DOCS_INIT_SCRIPT);
  });
  for (const [name, type] of Object.entries(DOCS_ASSETS)) {
    api.router.get(`/docs/${name}`, (_req, res, next) => {
      res.sendFile(
        path.join(SWAGGER_UI_DIR, name),
        { headers: { 'Content-Type': type, 'Cache-Control': 'public, max-age=3600', ...PAGE_HEADERS } },
        (err) => {
          if (err) next(err);
        },
      );
    });
  }
  return api;
}
