// The direction of imports between the folders of src/, workflows/ and activities/, read from the
// import and export declarations (and dynamic imports) of every module with TypeScript's own parser:
//   1. src/http/ is the HTTP plumbing: it imports no feature folder, but for the few imports
//      HTTP_FEATURE_IMPORTS names; the composition roots that mount the features' routers
//      (COMPOSITION_ROOTS) stand above the features, in src/runtime/;
//   2. outside src/http/, a module imports only the plumbing of src/http/ that features build on
//      (HTTP_PUBLIC); the app itself (src/runtime/app.ts) only the API process's wiring does (APP_IMPORTERS);
//   3. only a route module (or a composition root) imports a route module: a feature's service,
//      billing, records and the like do not, and activities/ and workflows/ import nothing of src/http/;
//   4. workflow code is deterministic: workflows/ imports values only from workflows/ and the Temporal
//      workflow packages; anything else it names is a type (`import type`), erased before it runs;
//   5. outside src/providers/, no module imports an adapter: providers are reached through their registry
//      (the one list of them), what a descriptor is, and the interfaces adapters implement (PROVIDERS_PUBLIC).
// And outside src/http/, no module reads a request's path parameters, query or headers by hand: a route
// takes them typed from its contract's schemas (src/http/openapi.ts) or from a zod parse of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** The feature folders of src/: each holds its routes beside its services and records. */
const FEATURES = [
  'src/account',
  'src/batches',
  'src/admin',
  'src/models',
  'src/payments',
  'src/service',
  'src/usage',
  'src/video-jobs',
  'src/voices',
  'src/webhooks',
];

/** The modules that mount the features' routers: /v2's app, and the /v1 surface it mounts. */
const COMPOSITION_ROOTS = ['src/runtime/app.ts', 'src/runtime/openai-app.ts'];

/** Who makes the app: the API process's wiring, the one module besides the roots that imports a composition root. */
const APP_IMPORTERS = ['src/runtime/api.ts'];

/** The imports of a feature by src/http/, each for the reason given. */
const HTTP_FEATURE_IMPORTS: Record<string, string[]> = {
  // The API key middleware looks the key up in the account's records.
  'src/http/auth.ts': ['src/account/workspaces.ts'],
};

/** What of src/http/ the rest of the service may import: the plumbing routes are built with. */
const HTTP_PUBLIC = [
  'src/http/auth.ts',
  'src/http/base-url.ts',
  'src/http/conditional.ts',
  'src/http/errors.ts',
  'src/http/in-flight.ts',
  'src/http/json-body.ts',
  'src/http/method-not-allowed.ts',
  'src/http/multipart.ts',
  'src/http/openapi-no-nul.ts',
  'src/http/openapi.ts',
  'src/http/rate-limit.ts',
  'src/http/read-gate.ts',
  'src/http/schemas.ts',
  'src/http/openai/errors.ts',
  'src/http/openai/page.ts',
  'src/http/openai/schemas.ts',
];

/** What of src/providers/ the rest of the service may import: no adapter by name. */
const PROVIDERS_PUBLIC = [
  'src/providers/registry.ts',
  'src/providers/descriptor.ts',
  'src/providers/video/types.ts',
  'src/providers/video/provider-errors.ts',
  'src/providers/voice/types.ts',
];

/** What workflow code may import values from, besides workflows/ itself. */
const WORKFLOW_PACKAGES = ['@temporalio/workflow', '@temporalio/common'];

const isRouteModule = (file: string) => FEATURES.some((f) => file.startsWith(`${f}/`)) && /(^|\/|-)routes\.ts$/.test(file);
const isHttp = (file: string) => file.startsWith('src/http/');
const isFeature = (file: string) => FEATURES.some((f) => file.startsWith(`${f}/`));

interface Import {
  from: string;
  /** The imported module: a repository path (src/x.ts) for a relative import, else the package name. */
  to: string;
  typeOnly: boolean;
}

function modulesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.posix.join(dir, f.split(path.sep).join('/')));
}

function importsOf(file: string): Import[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const found: Import[] = [];
  const add = (specifier: string, typeOnly: boolean) => {
    const to = specifier.startsWith('.')
      ? path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)).replace(/\.js$/, '.ts')
      : specifier;
    found.push({ from: file, to, typeOnly });
  };
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier))
      add(node.moduleSpecifier.text, node.importClause?.isTypeOnly ?? false);
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier))
      add(node.moduleSpecifier.text, node.isTypeOnly);
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    )
      add(node.arguments[0].text, false);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every import of the service's code that breaks one of the rules, with the rule it breaks. */
function violations(imports: readonly Import[]): string[] {
  const out: string[] = [];
  for (const { from, to, typeOnly } of imports) {
    const edge = `${from} -> ${to}`;
    if (isHttp(from) && (isFeature(to) || COMPOSITION_ROOTS.includes(to)) && !HTTP_FEATURE_IMPORTS[from]?.includes(to))
      out.push(`${edge}: src/http/ imports a feature`);
    if (!isHttp(from) && isHttp(to) && !HTTP_PUBLIC.includes(to))
      out.push(`${edge}: imports a file of src/http/ that is not its public plumbing`);
    if (COMPOSITION_ROOTS.includes(to) && !COMPOSITION_ROOTS.includes(from) && !APP_IMPORTERS.includes(from))
      out.push(`${edge}: only the API process's wiring builds the app`);
    if (isRouteModule(to) && !isRouteModule(from) && !COMPOSITION_ROOTS.includes(from))
      out.push(`${edge}: a module that is no route imports a route module`);
    if ((from.startsWith('activities/') || from.startsWith('workflows/')) && isHttp(to))
      out.push(`${edge}: activities and workflows import nothing of src/http/`);
    if (!from.startsWith('src/providers/') && to.startsWith('src/providers/') && !PROVIDERS_PUBLIC.includes(to))
      out.push(`${edge}: outside src/providers/, a provider is reached through its registry, not its adapter`);
    if (from.startsWith('workflows/') && !typeOnly && !to.startsWith('workflows/') && !WORKFLOW_PACKAGES.includes(to)) {
      out.push(`${edge}: workflow code imports values only from workflows/ and ${WORKFLOW_PACKAGES.join(', ')}`);
    }
  }
  return out;
}

const modules = ['src', 'workflows', 'activities'].flatMap(modulesUnder);
const imports = modules.flatMap(importsOf);

test('the imports of src/, workflows/ and activities/ keep their direction', () => {
  assert.deepEqual(violations(imports), []);
});

test('the rules name files that exist, and each rule catches an import that breaks it', () => {
  for (const f of [
    ...FEATURES,
    ...COMPOSITION_ROOTS,
    ...APP_IMPORTERS,
    ...HTTP_PUBLIC,
    ...PROVIDERS_PUBLIC,
    ...Object.entries(HTTP_FEATURE_IMPORTS).flat(2),
  ])
    assert.ok(fs.existsSync(f), f);
  // Imports of the service itself are read: relative ones as repository paths, with their kind.
  assert.ok(imports.some((i) => i.from === 'src/runtime/app.ts' && i.to === 'src/video-jobs/routes.ts' && !i.typeOnly));
  assert.ok(imports.some((i) => i.from === 'workflows/video-job.ts' && i.to === 'activities/video-job.ts' && i.typeOnly));
  const bad: Import[] = [
    { from: 'src/http/auth.ts', to: 'src/account/statement.ts', typeOnly: false },
    { from: 'src/http/openapi.ts', to: 'src/webhooks/openapi.ts', typeOnly: false },
    { from: 'src/runtime/worker.ts', to: 'src/runtime/app.ts', typeOnly: false },
    { from: 'src/voices/service.ts', to: 'src/runtime/app.ts', typeOnly: true },
    { from: 'src/http/read-gate.ts', to: 'src/video-jobs/records.ts', typeOnly: false },
    { from: 'src/http/errors.ts', to: 'src/runtime/openai-app.ts', typeOnly: false },
    { from: 'src/video-jobs/service.ts', to: 'src/video-jobs/routes.ts', typeOnly: false },
    { from: 'activities/video-job.ts', to: 'src/video-jobs/callback-routes.ts', typeOnly: false },
    { from: 'workflows/video-job.ts', to: 'src/http/errors.ts', typeOnly: true },
    { from: 'workflows/video-job.ts', to: 'src/video-jobs/billing.ts', typeOnly: false },
    { from: 'src/config.ts', to: 'src/providers/video/fal.ts', typeOnly: false },
    { from: 'src/models/present.ts', to: 'src/providers/voice/simulator.ts', typeOnly: true },
  ];
  for (const i of bad) assert.equal(violations([i]).length > 0, true, `${i.from} -> ${i.to} is not caught`);
});

/**
 * Where `text` reads an Express request (named `req`) by hand: `req.params[...]`, `req.query[...]`,
 * `req.headers[...]`, `req.query.x`, `String(req.params...)`, `req.get(...)`, `req.header(...)`.
 */
function handReadsOf(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const isReq = (node: ts.Node) => ts.isIdentifier(node) && node.text === 'req';
  const reqPart = (node: ts.Node, parts: string[]) =>
    ts.isPropertyAccessExpression(node) && isReq(node.expression) && parts.includes(node.name.text);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    const handRead =
      (ts.isElementAccessExpression(node) && reqPart(node.expression, ['params', 'query', 'headers'])) ||
      (ts.isPropertyAccessExpression(node) && reqPart(node.expression, ['query'])) ||
      (ts.isCallExpression(node) && reqPart(node.expression, ['get', 'header'])) ||
      (ts.isCallExpression(node) &&
        ts.isIdentifier(node.expression) &&
        node.expression.text === 'String' &&
        node.arguments.some((a) =>
          reqPart(ts.isElementAccessExpression(a) || ts.isPropertyAccessExpression(a) ? a.expression : a, ['params']),
        ));
    if (handRead) found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}: ${node.getText(source)}`);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

test("outside src/http/, no module reads a request's path parameters, query or headers by hand", () => {
  const found = modules.filter((f) => f.startsWith('src/') && !isHttp(f)).flatMap((f) => handReadsOf(f, fs.readFileSync(f, 'utf8')));
  assert.deepEqual(found, []);
  for (const read of [
    "String(req.params['backend'])",
    'String(req.params.backend)',
    'req.params[0]',
    "req.query['expires']",
    'req.query.expires',
    "req.headers['content-length']",
    "req.get('content-encoding')",
    "req.header('content-length')",
  ])
    assert.ok(handReadsOf('x.ts', `const v = ${read};`).length > 0, `${read} is not caught`);
  // What a contract hands a handler, and a video submission's parameters, are no hand reads.
  assert.deepEqual(
    handReadsOf('x.ts', 'const v = [input.params.key, input.query.expires, req.params.n, verify({ headers: req.headers })];'),
    [],
  );
});
