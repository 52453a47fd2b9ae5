// GET /console: the web console (a React single-page app from console/, bundled by esbuild) and GET /,
// a landing page linking to it and to the API reference. The console talks only to the public /v2/
// API with the user's API key (kept in the tab's sessionStorage, sent as a bearer header; no cookies).
// Its pages load nothing from anywhere but this origin, under a Content-Security-Policy that allows no
// inline script or style.
//
// The bundle is built from the sources in memory by esbuild the first time a console asset is asked
// for (so `npm ci && npm start` needs no build step, and processes that never serve the console, such
// as most tests, never pay for it), then kept for the life of the process.
import path from 'node:path';
import { Router, type Response } from 'express';
import type { Logger } from 'pino';
import { ApiError } from '../errors.js';
import { projectPath } from '../paths.js';

/** The console's sources (console/src/main.tsx is the entry point). */
export const CONSOLE_DIR = projectPath('console');

/**
 * The bundle's files, by the name they are served under /console/: `app.js` and `app.css`, and the chunks
 * `app.js` loads when a screen that needs them opens (`chunk-<hash>.js`: the Usage screen's charts).
 */
export type ConsoleBundle = ReadonlyMap<string, Buffer>;

const ASSET_NAME = /^(app|chunk-[A-Z0-9]+)\.(js|css)$/;

export const CONSOLE_ASSET_TYPES: Readonly<Record<'js' | 'css' | 'svg', string>> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

/** Bundles console/src/main.tsx and the CSS it imports, minified, in memory, split where it imports lazily. */
export async function buildConsoleBundle(): Promise<ConsoleBundle> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    entryPoints: { app: path.join(CONSOLE_DIR, 'src', 'main.tsx') },
    tsconfig: path.join(CONSOLE_DIR, 'tsconfig.json'),
    bundle: true,
    splitting: true,
    chunkNames: 'chunk-[hash]',
    write: false,
    outdir: path.join(CONSOLE_DIR, 'out'),
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    jsx: 'automatic',
    minify: true,
    legalComments: 'none',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  });
  const files = new Map(result.outputFiles.map((f) => [path.basename(f.path), Buffer.from(f.contents)]));
  for (const name of files.keys()) if (!ASSET_NAME.test(name)) throw new Error(`the console bundle has an unexpected file ${name}`);
  for (const name of ['app.js', 'app.css']) if (!files.has(name)) throw new Error(`the console bundle has no ${name}`);
  return files;
}

let bundle: Promise<ConsoleBundle> | undefined;

/** The bundle, built once per process; a failed build is retried at the next request. */
function consoleBundle(logger: Logger): Promise<ConsoleBundle> {
  bundle ??= buildConsoleBundle().catch((err: unknown) => {
    bundle = undefined;
    logger.error({ err }, 'could not build the console');
    throw new ApiError(503, 'api_error', 'console_unavailable', 'the console could not be built on this server; the API itself works');
  });
  return bundle;
}

// Everything from this origin; images also as data: URLs (Bootstrap draws its checkboxes and select
// arrows so), media also from blob: URLs (speech audio and microphone recordings, fetched with the key).
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "media-src 'self' blob:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE_HEADERS = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-cache',
};

const page = (title: string, head: string, body: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" type="image/svg+xml" href="/console/favicon.svg">
${head}
</head>
<body>
${body}
</body>
</html>
`;

const CONSOLE_HTML = page(
  'Console - video and voice API',
  '<link rel="stylesheet" href="/console/app.css">\n<script type="module" src="/console/app.js"></script>',
  '<div id="root"><noscript>The console needs JavaScript. The API itself is documented at <a href="/docs">/docs</a>.</noscript></div>',
);

const LANDING_HTML = page(
  'Video and voice API',
  '<link rel="stylesheet" href="/console/app.css">',
  `<main class="container py-5">
<h1>Video and voice API</h1>
<p>Generate videos from prompts, clone voices and synthesize speech, all under <code>/v2/</code> with an API key.</p>
<ul>
<li><a href="/console">Console</a>: sign in with an API key, make a video and watch it, clone a voice and hear it, see the balance.</li>
<li><a href="/docs">API reference</a> (OpenAPI document at <a href="/v2/openapi.json">/v2/openapi.json</a>).</li>
</ul>
</main>`,
);

// A play button: the console's tab icon (an own one, so the browser asks for no /favicon.ico).
const FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" ' +
  'fill="#0d6efd"/><path d="M12 9v14l11-7z" fill="#fff"/></svg>';

export function consoleRoutes(deps: { logger: Logger }): Router {
  const r = Router();
  const html = (res: Response, text: string) => res.status(200).type('html').set(PAGE_HEADERS).send(text);
  r.get('/', (_req, res) => html(res, LANDING_HTML));
  for (const p of ['/console', '/console/']) r.get(p, (_req, res) => html(res, CONSOLE_HTML));
  r.get('/console/favicon.svg', (_req, res) => {
    res
      .status(200)
      .set({ ...PAGE_HEADERS, 'Content-Type': CONSOLE_ASSET_TYPES.svg, 'Cache-Control': 'public, max-age=86400' })
      .send(FAVICON);
  });
  r.get('/console/:asset', async (req, res, next) => {
    const name = req.path.slice('/console/'.length);
    const match = ASSET_NAME.exec(name);
    if (!match) return next();
    const file = (await consoleBundle(deps.logger)).get(name);
    if (!file) return next();
    res
      .status(200)
      .set({ ...PAGE_HEADERS, 'Content-Type': CONSOLE_ASSET_TYPES[match[2] as 'js' | 'css'] })
      .send(file);
  });
  return r;
}
