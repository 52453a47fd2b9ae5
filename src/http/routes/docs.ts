// GET /v2/openapi.json (the OpenAPI document, built once here at startup) and GET /docs: one
// self-contained HTML page that fetches the document and renders it. No CDN, no external script,
// style or font: the page works offline, and its Content-Security-Policy allows nothing else.
import { createHash } from 'node:crypto';
import { Router } from 'express';
import { buildOpenApiDocument, type OpenApiDocument } from '../openapi.js';

const STYLE = `
:root { --fg: #1d2330; --muted: #5b6577; --line: #dde2ea; --bg: #f6f8fb; --card: #fff; --accent: #2d5bd7; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { padding: 20px 28px; background: var(--card); border-bottom: 1px solid var(--line); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .version { color: var(--muted); font-size: 13px; margin-left: 8px; font-weight: normal; }
header p { margin: 6px 0 0; max-width: 960px; }
.layout { display: flex; align-items: flex-start; }
nav { position: sticky; top: 0; width: 270px; flex: none; max-height: 100vh; overflow: auto; padding: 16px; border-right: 1px solid var(--line); background: var(--card); min-height: 100vh; }
nav input { width: 100%; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; margin-bottom: 10px; font: inherit; }
nav h3 { font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); margin: 14px 0 4px; }
nav a { display: block; padding: 2px 0; color: var(--fg); text-decoration: none; font-size: 13px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
nav a:hover { color: var(--accent); }
main { flex: 1; min-width: 0; padding: 20px 28px 60px; }
section.tag > h2 { margin: 28px 0 4px; font-size: 20px; }
section.tag > p { margin: 0 0 12px; color: var(--muted); }
.op { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 18px; margin: 12px 0; }
.op h3 { margin: 0; font-size: 15px; display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
.op h3 .path { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.op h3 .summary { font-weight: normal; color: var(--muted); }
.method { display: inline-block; min-width: 58px; text-align: center; border-radius: 4px; padding: 1px 6px; color: #fff; font-size: 12px; font-weight: 700; text-transform: uppercase; }
.m-get { background: #2f855a; } .m-post { background: #2d5bd7; } .m-delete { background: #c53030; } .m-put, .m-patch { background: #b7791f; }
.auth { font-size: 12px; color: var(--muted); margin: 6px 0 0; }
h4 { margin: 14px 0 6px; font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px; border-bottom: 1px solid var(--line); }
th { font-weight: 600; color: var(--muted); font-size: 12px; }
td.name { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: nowrap; }
td.type { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: #6b46c1; }
.req { color: #c53030; font-size: 12px; }
.cons { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; color: var(--muted); }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #eef1f6; padding: 0 3px; border-radius: 3px; font-size: 12.5px; }
.resp { margin: 6px 0; }
.resp summary { cursor: pointer; }
.status { display: inline-block; min-width: 56px; font-weight: 700; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.s2 { color: #2f855a; } .s4 { color: #b7791f; } .s5, .sd { color: #c53030; }
.ctype { color: var(--muted); font-size: 12px; margin-left: 6px; }
.resp .inner { margin: 6px 0 10px 22px; }
.schema-name { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: #6b46c1; }
.hidden { display: none; }
.error { color: #c53030; padding: 20px 28px; }
@media (max-width: 800px) { .layout { display: block; } nav { position: static; width: auto; min-height: 0; max-height: none; } }
`;

const SCRIPT = `
(function () {
  'use strict';
  var app = document.getElementById('app');
  var navList = document.getElementById('nav-list');
  var doc;

  function el(tag, cls, children) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    (children || []).forEach(function (c) {
      if (c === null || c === undefined || c === false) return;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    });
    return e;
  }
  // Prose with \`code\` spans, as text nodes only (never HTML).
  function prose(tag, cls, text) {
    var e = el(tag, cls);
    String(text || '').split('\`').forEach(function (part, i) {
      e.appendChild(i % 2 ? el('code', null, [part]) : document.createTextNode(part));
    });
    return e;
  }
  function pointer(ref) {
    if (typeof ref !== 'string' || ref.indexOf('#/') !== 0) return undefined;
    return ref.slice(2).split('/').reduce(function (o, k) {
      return o === undefined || o === null ? undefined : o[k.replace(/~1/g, '/').replace(/~0/g, '~')];
    }, doc);
  }
  function resolve(o) {
    for (var i = 0; o && o.$ref && i < 32; i++) o = pointer(o.$ref);
    return o || {};
  }
  function refName(s) { return s && s.$ref ? s.$ref.split('/').pop() : null; }

  function typeText(s) {
    if (!s) return 'any';
    if (s.$ref) return refName(s);
    if (s.const !== undefined) return JSON.stringify(s.const);
    var alts = s.oneOf || s.anyOf;
    if (alts) return alts.map(typeText).join(' | ');
    if (s.enum) return s.enum.map(function (v) { return JSON.stringify(v); }).join(' | ');
    var t = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
    if (t.length === 0) return s.properties ? 'object' : 'any';
    return t.map(function (x) {
      if (x === 'array') {
        var item = typeText(s.items);
        return (item.indexOf(' | ') >= 0 ? '(' + item + ')' : item) + '[]';
      }
      if (x === 'string' && s.format) return 'string (' + s.format + ')';
      if (x === 'object' && s.additionalProperties && typeof s.additionalProperties === 'object' && !s.properties) {
        var keys = s.propertyNames && s.propertyNames.enum ? s.propertyNames.enum.join(' | ') : 'string';
        return 'map<' + keys + ', ' + typeText(s.additionalProperties) + '>';
      }
      return x;
    }).join(' | ');
  }
  var CONSTRAINTS = [
    ['minLength', 'min length'], ['maxLength', 'max length'], ['minimum', 'min'], ['maximum', 'max'],
    ['exclusiveMinimum', '>'], ['exclusiveMaximum', '<'], ['minItems', 'min items'], ['maxItems', 'max items'],
    ['pattern', 'pattern'], ['default', 'default'], ['contentMediaType', 'media type']
  ];
  function constraintText(s) {
    var out = [];
    function add(x, prefix) {
      if (!x) return;
      CONSTRAINTS.forEach(function (c) {
        var v = x[c[0]];
        if (v === undefined) return;
        if (c[0] === 'pattern' && x.format) return; // the format says it
        if ((c[0] === 'maximum' || c[0] === 'minimum') && Math.abs(v) >= 9007199254740991) return; // "any integer"
        out.push(prefix + c[1] + ' ' + (typeof v === 'string' ? v : JSON.stringify(v)));
      });
    }
    add(s, '');
    if (s && s.items) add(resolve(s.items), 'each: '); // per item (e.g. each file's size)
    if (s && s.additionalProperties === false && s.properties) out.push('no other fields');
    return out.join(', ');
  }
  function isObject(s) { return s && (s.properties || s.type === 'object' || (Array.isArray(s.type) && s.type.indexOf('object') >= 0)); }

  // Rows of a field table: nested objects (also through arrays, refs and nullable) are flattened to dotted names.
  function fieldRows(schema, prefix, rows, seen) {
    var s = resolve(schema);
    var alts = s.oneOf || s.anyOf;
    if (alts && !s.properties) {
      alts.forEach(function (alt) {
        var name = refName(alt);
        if (name) rows.push({ variant: 'one of: ' + name });
        fieldRows(alt, prefix, rows, seen);
      });
      return rows;
    }
    var props = s.properties || {};
    var required = s.required || [];
    Object.keys(props).forEach(function (k) {
      var p = props[k];
      var name = prefix + k;
      var target = resolve(p);
      var inner = target.anyOf ? target.anyOf.filter(function (x) { return resolve(x).type !== 'null'; })[0] : null;
      rows.push({ name: name, type: typeText(p), required: required.indexOf(k) >= 0, cons: constraintText(target), desc: p.description || target.description || '' });
      var ref = refName(p) || (target.items && refName(target.items)) || (inner && refName(inner));
      if (ref && seen.indexOf(ref) >= 0) return;
      var nextSeen = ref ? seen.concat([ref]) : seen;
      if (inner && isObject(resolve(inner))) fieldRows(inner, name + '.', rows, nextSeen);
      else if (isObject(target) && target.properties) fieldRows(target, name + '.', rows, nextSeen);
      else if (target.items && (isObject(resolve(target.items)) || resolve(target.items).oneOf)) fieldRows(target.items, name + '[].', rows, nextSeen);
    });
    return rows;
  }
  function fieldTable(schema) {
    var rows = fieldRows(schema, '', [], refName(schema) ? [refName(schema)] : []);
    if (rows.length === 0) {
      var s = resolve(schema);
      return el('p', 'cons', [typeText(schema) + (constraintText(s) ? ' (' + constraintText(s) + ')' : '')]);
    }
    var body = rows.map(function (r) {
      if (r.variant) {
        var td = el('td', 'schema-name', [r.variant]);
        td.colSpan = 5;
        return el('tr', null, [td]);
      }
      return el('tr', null, [
        el('td', 'name', [r.name]),
        el('td', 'type', [r.type]),
        el('td', null, [r.required ? el('span', 'req', ['required']) : 'optional']),
        el('td', 'cons', [r.cons]),
        prose('td', null, r.desc)
      ]);
    });
    return el('table', null, [
      el('thead', null, [el('tr', null, ['Field', 'Type', 'Required', 'Constraints', 'Description'].map(function (h) { return el('th', null, [h]); }))]),
      el('tbody', null, body)
    ]);
  }

  function paramsTable(params) {
    return el('table', null, [
      el('thead', null, [el('tr', null, ['Name', 'In', 'Type', 'Required', 'Constraints', 'Description'].map(function (h) { return el('th', null, [h]); }))]),
      el('tbody', null, params.map(function (p0) {
        var p = resolve(p0);
        var s = resolve(p.schema);
        return el('tr', null, [
          el('td', 'name', [p.name]), el('td', null, [p.in]), el('td', 'type', [typeText(p.schema)]),
          el('td', null, [p.required ? el('span', 'req', ['required']) : 'optional']),
          el('td', 'cons', [constraintText(s)]), prose('td', null, p.description)
        ]);
      }))
    ]);
  }

  function schemaLink(name) {
    var a = el('a', 'schema-name', [name]);
    a.href = '#schema-' + name;
    return a;
  }
  // expand: the schema's fields in full (request bodies, successful answers); else a link to it.
  function contentBlock(content, expand) {
    var out = el('div');
    Object.keys(content || {}).forEach(function (ct) {
      var media = content[ct];
      var name = refName(media.schema);
      out.appendChild(el('p', null, [el('code', null, [ct]), name ? ' ' : '', name ? schemaLink(name) : '']));
      var s = resolve(media.schema);
      if (!expand && name) return;
      if (s.description) out.appendChild(prose('p', null, s.description));
      if (media.schema && (s.properties || s.oneOf || s.anyOf)) out.appendChild(fieldTable(media.schema));
      if (media.encoding) Object.keys(media.encoding).forEach(function (part) {
        out.appendChild(prose('p', 'cons', 'part "' + part + '": ' + (media.encoding[part].contentType || '')));
      });
    });
    return out;
  }

  function responses(op) {
    var box = el('div');
    Object.keys(op.responses || {}).forEach(function (status) {
      var r = resolve(op.responses[status]);
      var cts = Object.keys(r.content || {});
      var d = el('details', 'resp', [
        el('summary', null, [
          el('span', 'status s' + status.charAt(0), [status]),
          prose('span', null, r.description),
          el('span', 'ctype', [cts.join(', ')])
        ])
      ]);
      var inner = el('div', 'inner');
      if (r.headers) {
        inner.appendChild(el('h4', null, ['Headers']));
        inner.appendChild(el('table', null, [
          el('thead', null, [el('tr', null, ['Header', 'Type', 'Description'].map(function (h) { return el('th', null, [h]); }))]),
          el('tbody', null, Object.keys(r.headers).map(function (h) {
            var hd = resolve(r.headers[h]);
            return el('tr', null, [el('td', 'name', [h]), el('td', 'type', [typeText(hd.schema)]), prose('td', null, hd.description)]);
          }))
        ]));
      }
      inner.appendChild(contentBlock(r.content, status.charAt(0) === '2'));
      d.appendChild(inner);
      box.appendChild(d);
    });
    return box;
  }

  function authText(op) {
    var sec = op.security !== undefined ? op.security : doc.security || [];
    if (sec.length === 0) return 'No authentication';
    return 'Auth: ' + sec.map(function (req) {
      return Object.keys(req).map(function (name) {
        var scheme = (doc.components && doc.components.securitySchemes || {})[name] || {};
        return name + ' (' + [scheme.type, scheme.scheme].filter(Boolean).join(' ') + ')';
      }).join(' + ');
    }).join(' or ');
  }

  function operation(path, method, op) {
    var id = op.operationId || (method + path).replace(/[^a-zA-Z0-9]+/g, '-');
    var card = el('div', 'op', [
      el('h3', null, [el('span', 'method m-' + method, [method]), el('span', 'path', [path]), el('span', 'summary', [op.summary || ''])]),
      el('p', 'auth', [authText(op)])
    ]);
    card.id = id;
    card.setAttribute('data-search', (method + ' ' + path + ' ' + (op.summary || '')).toLowerCase());
    if (op.description) card.appendChild(prose('p', null, op.description));
    if (op.parameters && op.parameters.length) {
      card.appendChild(el('h4', null, ['Parameters']));
      card.appendChild(paramsTable(op.parameters));
    }
    if (op.requestBody) {
      var rb = resolve(op.requestBody);
      card.appendChild(el('h4', null, ['Request body' + (rb.required ? ' (required)' : '')]));
      if (rb.description) card.appendChild(prose('p', null, rb.description));
      card.appendChild(contentBlock(rb.content, true));
    }
    card.appendChild(el('h4', null, ['Responses']));
    card.appendChild(responses(op));
    return card;
  }

  function render() {
    var info = doc.info || {};
    document.title = (info.title || 'API') + ' - reference';
    document.getElementById('title').textContent = info.title || 'API';
    document.getElementById('version').textContent = (info.version ? 'v' + info.version + ' - ' : '') + 'OpenAPI ' + doc.openapi;
    document.getElementById('intro').replaceWith(prose('p', null, info.description || ''));

    var byTag = {};
    var tagOrder = (doc.tags || []).map(function (t) { return t.name; });
    Object.keys(doc.paths || {}).forEach(function (path) {
      var item = doc.paths[path];
      ['get', 'put', 'post', 'patch', 'delete', 'head', 'options'].forEach(function (m) {
        if (!item[m]) return;
        var tag = (item[m].tags && item[m].tags[0]) || 'Other';
        if (tagOrder.indexOf(tag) < 0) tagOrder.push(tag);
        (byTag[tag] = byTag[tag] || []).push([path, m, item[m]]);
      });
    });
    app.textContent = '';
    navList.textContent = '';
    tagOrder.forEach(function (tag) {
      var ops = byTag[tag];
      if (!ops) return;
      var meta = (doc.tags || []).filter(function (t) { return t.name === tag; })[0] || {};
      var section = el('section', 'tag', [el('h2', null, [tag]), meta.description ? prose('p', null, meta.description) : null]);
      navList.appendChild(el('h3', null, [tag]));
      ops.forEach(function (o) {
        var card = operation(o[0], o[1], o[2]);
        section.appendChild(card);
        var a = el('a', null, [el('span', 'method m-' + o[1], [o[1]]), ' ', o[0]]);
        a.href = '#' + card.id;
        a.setAttribute('data-search', card.getAttribute('data-search'));
        navList.appendChild(a);
      });
      app.appendChild(section);
    });

    var schemas = (doc.components && doc.components.schemas) || {};
    var names = Object.keys(schemas);
    if (names.length) {
      var section = el('section', 'tag', [el('h2', null, ['Schemas']), el('p', null, ['Every schema the operations refer to.'])]);
      section.id = 'schemas';
      names.forEach(function (name) {
        var s = schemas[name];
        var d = el('details', 'op schema', [el('summary', null, [el('span', 'schema-name', [name]), s.description ? ' ' : '', s.description ? prose('span', 'summary', s.description) : ''])]);
        d.id = 'schema-' + name;
        d.appendChild(fieldTable({ $ref: '#/components/schemas/' + name }));
        section.appendChild(d);
      });
      navList.appendChild(el('h3', null, ['Schemas']));
      var all = el('a', null, ['All schemas']);
      all.href = '#schemas';
      navList.appendChild(all);
      app.appendChild(section);
    }
  }

  document.getElementById('filter').addEventListener('input', function (e) {
    var q = e.target.value.trim().toLowerCase();
    document.querySelectorAll('[data-search]').forEach(function (n) {
      n.classList.toggle('hidden', q !== '' && n.getAttribute('data-search').indexOf(q) < 0);
    });
  });

  fetch('/v2/openapi.json', { headers: { accept: 'application/json' } })
    .then(function (r) {
      if (!r.ok) throw new Error('GET /v2/openapi.json answered ' + r.status);
      return r.json();
    })
    .then(function (d) { doc = d; render(); })
    .catch(function (err) {
      app.textContent = '';
      app.appendChild(el('p', 'error', ['Could not load /v2/openapi.json: ' + err.message]));
    });
})();
`;

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference</title>
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1><span id="title">API reference</span><span class="version" id="version"></span></h1>
  <p id="intro">Loading <a href="/v2/openapi.json">/v2/openapi.json</a>...</p>
</header>
<div class="layout">
  <nav><input id="filter" type="search" placeholder="Filter operations" aria-label="Filter operations"><div id="nav-list"></div>
    <h3>Document</h3><a href="/v2/openapi.json">/v2/openapi.json</a></nav>
  <main id="app"><p>Loading...</p></main>
</div>
<script>${SCRIPT}</script>
</body>
</html>
`;

// Only this page's own inline style and script, and requests to this origin.
const CSP = [
  "default-src 'none'",
  `script-src ${sha256(SCRIPT)}`,
  `style-src ${sha256(STYLE)}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function docsRoutes(document: OpenApiDocument = buildOpenApiDocument()): Router {
  const r = Router();
  const json = JSON.stringify(document);
  r.get('/v2/openapi.json', (_req, res) => {
    res.status(200).type('application/json').set('Access-Control-Allow-Origin', '*').send(json);
  });
  r.get('/docs', (_req, res) => {
    res.status(200).type('html').set({ 'Content-Security-Policy': CSP, 'X-Content-Type-Options': 'nosniff' }).send(HTML);
  });
  return r;
}
