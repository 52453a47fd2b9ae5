// The served OpenAPI document and the server agree where the contracts cannot make them agree by
// construction. A contract's body schema is what the route validates with (src/http/openapi.ts runs it
// before the handler) and what the document states, so a field the schema takes or refuses is the same
// on both sides; what is written or checked apart is tested here, a body the document's schema accepts
// (checked with Ajv, a JSON Schema 2020-12 validator) being accepted by the server and one it refuses
// refused with a 4xx: the per-model variants of the video and speech bodies (durations, resolutions,
// aspect ratios, n, seed, formats, the simulator's parameters), an override written beside the schema
// while the service checks the catalog; text limits counted in code points (zod counts UTF-16 units,
// the limits are refinements the document states as maxLength); NUL, which the JSON body parser
// refuses and the document states apart; euro amounts rounded to micro-euros and the model ids of API
// keys, checked against the catalog; the hand-written examples. Which operations exist, and their
// methods, cannot drift either: each route is mounted from its own contract, so Allow (built from the
// mounted routes) lists the documented methods; an undeclared method is still checked to be a 405.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeHttp from 'node:http';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { speechModels, videoModelAliases, videoModels, videoBackendFor } from '../../src/models/catalog.js';
import { imageField, jpegImage, pngImage, WEBP_IMAGE } from '../helpers/images.js';
import { encodeWav } from '../../src/media/wav.js';
import { configuredBackends, createVideoProviders } from '../../src/runtime/providers.js';
import { ADMIN_TOKEN, assertAuditHolds, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';

type Json = any;
let stack: Stack;
let doc: Json;
let customer: { workspaceId: string; key: string };
let voiceId: string;
let consentId: string;
let batchFileId: string;
const ajv = new Ajv2020({ strict: false, validateFormats: false, validateSchema: false });

before(async () => {
  stack = await startStack();
  doc = (await http(stack.baseUrl, 'GET', '/v2/openapi.json')).body;
  ajv.addSchema({ ...doc, $id: 'https://openapi.local/document.json' });
  customer = await newCustomer(stack, 10_000);
  const form = new FormData();
  form.append('name', 'agreement');
  form.append('file', new Blob([new Uint8Array(encodeWav(new Int16Array(8000), 8000))], { type: 'audio/wav' }), 'a.wav');
  const voice = await fetch(`${stack.baseUrl}/v2/audio/voices`, {
    method: 'POST',
    headers: { authorization: `Bearer ${customer.key}` },
    body: form,
  });
  assert.equal(voice.status, 200);
  voiceId = ((await voice.json()) as { voice_id: string }).voice_id;
  const consentForm = new FormData();
  consentForm.append('name', 'agreement');
  consentForm.append('language', 'en');
  consentForm.append('recording', new Blob([new Uint8Array(encodeWav(new Int16Array(8000), 8000))], { type: 'audio/wav' }), 'consent.wav');
  const consent = await fetch(`${stack.baseUrl}/v1/audio/voice_consents`, {
    method: 'POST',
    headers: { authorization: `Bearer ${customer.key}` },
    body: consentForm,
  });
  assert.equal(consent.status, 200);
  consentId = ((await consent.json()) as { id: string }).id;
  // A batch input file, for the example of POST /v1/batches (its input_file_id).
  const line = {
    custom_id: 'x',
    method: 'POST',
    url: '/v1/videos',
    body: { model: 'sim-video-1', prompt: 'a lighthouse', seconds: '4', size: '1280x720' },
  };
  const fileForm = new FormData();
  fileForm.append('purpose', 'batch');
  fileForm.append('file', new Blob([JSON.stringify(line) + '\n']), 'batch.jsonl');
  const file = await fetch(`${stack.baseUrl}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${customer.key}` },
    body: fileForm,
  });
  assert.equal(file.status, 200);
  batchFileId = ((await file.json()) as { id: string }).id;
});
after(async () => {
  await assertAuditHolds(stack);
  await stack.stop();
});

/** The JSON body schema the document gives an operation, as Ajv compiles it ($refs into components). */
function bodyValidator(method: string, path: string) {
  const ref: string = doc.paths[path][method].requestBody.content['application/json'].schema.$ref;
  return ajv.getSchema(`https://openapi.local/document.json${ref}`)!;
}

/** Sends each body; the document and the server must agree on every one. */
async function agree(method: string, path: string, token: string, cases: [string, unknown][]): Promise<void> {
  const validate = bodyValidator(method, path);
  for (const [label, body] of cases) {
    const valid = validate(body) as boolean;
    const r = await http(stack.baseUrl, method.toUpperCase(), path, { token, json: body });
    const where = `${label}: the document says ${valid ? 'valid' : `invalid (${ajv.errorsText(validate.errors)})`}, the server answered ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`;
    if (valid) assert.ok(r.status >= 200 && r.status < 300, where);
    else assert.ok(r.status >= 400 && r.status < 500, where);
  }
}

const emoji = (n: number) => '\u{1F3AC}'.repeat(n); // one code point, two UTF-16 units

describe('request bodies: the document and the server agree', () => {
  test('POST /v2/videos/generations, per model and around every limit', async () => {
    const cases: [string, unknown][] = [
      ['minimal, default model', { prompt: 'p' }],
      ['blank prompt', { prompt: ' \n\t' }],
      ['prompt of a byte order mark only (trim removes it)', { prompt: '\ufeff' }],
      ['prompt with surrounding space', { prompt: '  p  ' }],
      ['prompt at the limit in astral characters', { prompt: emoji(4000) }],
      ['prompt over the limit', { prompt: 'x'.repeat(4001) }],
      ['unknown model', { prompt: 'p', model: 'no-such-model' }],
      ['NUL in the prompt', { prompt: 'a\u0000b' }],
      ['NUL in a key of parameters', { prompt: 'p', parameters: { 'k\u0000': 1 } }],
      ['NUL deep in parameters', { prompt: 'p', parameters: { k: [{ v: ['\u0000'] }] } }],
      ['control characters but no NUL in parameters', { prompt: 'p\u0007', parameters: { k: [{ v: ['\u0001'] }] } }],
    ];
    const backends = configuredBackends(createVideoProviders(stack.db, stack.config));
    for (const m of videoModels().filter((x) => videoBackendFor(x, backends))) {
      const base = { prompt: 'p', model: m.id, ...(m.accepts_parameters ? { parameters: { simulate: { delay_ms: 0 } } } : {}) };
      for (const d of m.durations_seconds) cases.push([`${m.id} durationSeconds ${d}`, { ...base, durationSeconds: d }]);
      cases.push([`${m.id} durationSeconds 5`, { ...base, durationSeconds: 5 }]);
      cases.push([`${m.id} durationSeconds 8.5`, { ...base, durationSeconds: 8.5 }]);
      for (const res of m.resolutions) cases.push([`${m.id} resolution ${res}`, { ...base, resolution: res }]);
      cases.push([`${m.id} resolution 480p`, { ...base, resolution: '480p' }]);
      for (const ar of m.aspect_ratios) cases.push([`${m.id} aspectRatio ${ar}`, { ...base, aspectRatio: ar }]);
      cases.push([`${m.id} aspectRatio 1:1`, { ...base, aspectRatio: '1:1' }]);
      cases.push([`${m.id} n max`, { ...base, n: m.max_n }]);
      cases.push([`${m.id} n max+1`, { ...base, n: m.max_n + 1 }]);
      cases.push([`${m.id} n 0`, { ...base, n: 0 }]);
      cases.push([`${m.id} seed 0`, { ...base, seed: 0 }]);
      cases.push([`${m.id} seed 2^32`, { ...base, seed: 4_294_967_296 }]);
      cases.push([`${m.id} parameters not an object`, { ...base, parameters: [1] }]);
      // Image inputs: recognised by content, of a type the model takes; lastFrame only with image.
      const png = imageField(pngImage(8, 8), 'image/png');
      const jpeg = imageField(jpegImage(), 'image/jpeg');
      const webp = imageField(WEBP_IMAGE, 'image/webp');
      cases.push([`${m.id} image png`, { ...base, image: png }]);
      cases.push([`${m.id} image jpeg`, { ...base, image: jpeg }]);
      cases.push([`${m.id} image webp`, { ...base, image: webp }]);
      cases.push([`${m.id} image and lastFrame`, { ...base, image: png, lastFrame: jpeg }]);
      cases.push([`${m.id} lastFrame alone`, { ...base, lastFrame: png }]);
      cases.push([`${m.id} image declared as another type`, { ...base, image: { ...png, mimeType: 'image/jpeg' } }]);
      cases.push([
        `${m.id} image that is not an image`,
        { ...base, image: imageField(Buffer.from('GIF89a not what we take here'), 'image/png') },
      ]);
      cases.push([
        `${m.id} image with a broken signature`,
        {
          ...base,
          image: imageField(
            Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0b]), pngImage(8, 8).subarray(8)]),
            'image/png',
          ),
        },
      ]);
      cases.push([
        `${m.id} JPEG whose marker byte is FF`,
        { ...base, image: imageField(Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xff]), jpegImage().subarray(4)]), 'image/jpeg') },
      ]);
      cases.push([`${m.id} image not base64`, { ...base, image: { bytesBase64Encoded: 'iVBORw0KGgo%%%', mimeType: 'image/png' } }]);
      cases.push([`${m.id} generateAudio false`, { ...base, generateAudio: false }]);
      cases.push([`${m.id} negativePrompt`, { ...base, negativePrompt: 'blur' }]);
      cases.push([`${m.id} blank negativePrompt`, { ...base, negativePrompt: '  ' }]);
    }
    for (const alias of videoModelAliases()) cases.push([`retired ${alias.id}`, { prompt: 'p', model: alias.id }]);
    // The simulator's parameters.simulate: videos at most n (whose default is 1).
    const sim = (simulate: unknown, extra: object = {}) => ({
      prompt: 'p',
      model: 'sim-video-1',
      parameters: { simulate: { delay_ms: 0, ...(simulate as object) } },
      ...extra,
    });
    cases.push(['simulate videos = n', sim({ videos: 3 }, { n: 3 })]);
    cases.push(['simulate videos > n', sim({ videos: 3 }, { n: 2 })]);
    cases.push(['simulate videos > default n', sim({ videos: 2 })]);
    cases.push(['simulate unknown outcome', sim({ outcome: 'explode' })]);
    cases.push(['simulate unknown field', sim({ colour: 'red' })]);
    cases.push(['simulate message at the limit in astral characters', sim({ outcome: 'fail', message: emoji(500) })]);
    cases.push([
      'other parameters beside simulate',
      { prompt: 'p', model: 'sim-video-1', parameters: { simulate: { delay_ms: 0 }, style: 'noir' } },
    ]);
    cases.push(['a model that ignores parameters', { prompt: 'p', model: 'veo-3.0-fast-generate-001', parameters: { anything: [1, 2] } }]);
    await agree('post', '/v2/videos/generations', customer.key, cases);
  });

  // /v1 takes the same speech body, with voice also as {"id"} and instructions.
  for (const path of ['/v2/audio/speech', '/v1/audio/speech']) {
    test(`POST ${path}: blank and over-long input (code points), per-model formats`, async () => {
      const model = speechModels().find((m) => m.provider === stack.config.providers.voices[0]!.descriptor.name)!;
      const base = { voice: voiceId };
      const openAiOnly: [string, unknown][] = [
        ['voice as {id}', { voice: { id: voiceId }, input: 'Hello.' }],
        ['instructions', { ...base, input: 'Hello.', instructions: 'cheerful' }],
        ['instructions over the limit', { ...base, input: 'Hello.', instructions: 'x'.repeat(4097) }],
      ];
      await agree('post', path, customer.key, [
        ...(path.startsWith('/v1/') ? openAiOnly : []),
        ['minimal', { ...base, input: 'Hello.' }],
        ['empty input', { ...base, input: '' }],
        ['blank input', { ...base, input: ' \u3000\n' }],
        ['input at the model limit in astral characters', { ...base, model: model.id, input: emoji(model.max_input_chars) }],
        ['input over the model limit', { ...base, model: model.id, input: 'x'.repeat(model.max_input_chars + 1) }],
        ['unknown format', { ...base, input: 'Hello.', response_format: 'mp3' }],
        ['every format of the model', { ...base, model: model.id, input: 'Hello.', response_format: model.response_formats.at(-1) }],
        ['empty voice', { voice: '', input: 'Hello.' }],
        ['NUL in the voice', { voice: `${voiceId}\u0000`, input: 'Hello.' }],
        ...(path.startsWith('/v2/')
          ? ([
              ['word timestamps in an SSE stream', { ...base, input: 'Hello there.', stream_format: 'sse', timestamps: 'word' }],
              ['timestamps without a stream', { ...base, input: 'Hello.', timestamps: 'word' }],
              ['timestamps in an audio stream', { ...base, input: 'Hello.', stream_format: 'audio', timestamps: 'word' }],
              ['unknown timestamps', { ...base, input: 'Hello.', stream_format: 'sse', timestamps: 'character' }],
            ] as [string, unknown][])
          : [['timestamps (not on /v1)', { ...base, input: 'Hello.', stream_format: 'sse', timestamps: 'word' }] as [string, unknown]]),
      ]);
    });
  }

  test('POST /v2/audio/speech with word timestamps: every server-sent event is one the document describes', async () => {
    const media = doc.paths['/v2/audio/speech'].post.responses['200'].content['text/event-stream'];
    const validate = ajv.compile(media.schema.properties.data.contentSchema);
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${customer.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ voice: voiceId, input: 'Every word is timed here.', stream_format: 'sse', timestamps: 'word' }),
    });
    assert.equal(res.status, 200);
    const events = (await res.text())
      .split('\n\n')
      .filter((b) => b.startsWith('data: '))
      .map((b) => JSON.parse(b.slice(6)) as { type: string });
    const types = new Set<string>();
    for (const e of events) {
      assert.ok(validate(e), `${JSON.stringify(e).slice(0, 200)}: ${ajv.errorsText(validate.errors)}`);
      types.add(e.type);
    }
    assert.deepEqual([...types].sort(), ['speech.audio.delta', 'speech.audio.done', 'speech.word_timestamps']);
    const bogus = { type: 'speech.word_timestamps', words: ['a'], start_s: [-1], end_s: [0.1] };
    assert.equal(validate(bogus), false, 'the document states what a timing is');
  });

  test('admin: workspace names, euro amounts (rounded to micro-euros), API key models', async () => {
    await agree('post', '/admin/v1/workspaces', ADMIN_TOKEN, [
      ['name', { name: 'w' }],
      ['blank name', { name: '  ' }],
      ['name at the limit in astral characters', { name: emoji(200) }],
      ['name over the limit', { name: 'x'.repeat(201) }],
      ['credits 0.3', { name: 'w', credits_in_euro: 0.3 }],
      ['credits with 7 decimals (rounded)', { name: 'w', credits_in_euro: 0.1234567 }],
      ['credits 1000000', { name: 'w', credits_in_euro: 1_000_000 }],
      ['credits over 1000000', { name: 'w', credits_in_euro: 1_000_000.01 }],
      ['negative credits', { name: 'w', credits_in_euro: -1 }],
    ]);
    const ws = await http(stack.baseUrl, 'POST', '/admin/v1/workspaces', {
      token: ADMIN_TOKEN,
      json: { name: 'rounding', credits_in_euro: 0.1234567 },
    });
    assert.equal(ws.body.balance_in_euro, 0.123457, 'rounded to the nearest micro-euro');
    const credits = bodyValidator('post', '/admin/v1/workspaces/{id}/credits');
    for (const [amount, ok] of [
      [0.000001, true],
      [0.0000001, false],
      [0, false],
      [0.1, true],
      [2.0000004, true],
      [1_000_001, false],
    ] as const) {
      assert.equal(credits({ amount_in_euro: amount }), ok, `schema, amount ${amount}`);
      const r = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${ws.body.id}/credits`, {
        token: ADMIN_TOKEN,
        json: { amount_in_euro: amount },
      });
      assert.equal(r.status, ok ? 200 : 400, `server, amount ${amount}: ${JSON.stringify(r.body)}`);
    }
    const after = await http(stack.baseUrl, 'GET', `/admin/v1/workspaces/${ws.body.id}`, { token: ADMIN_TOKEN });
    assert.equal(after.body.balance_in_euro, 2.223458, '0.123457 + 0.000001 + 0.1 + 2.0');
    const keys = bodyValidator('post', '/admin/v1/workspaces/{id}/api-keys');
    const allIds = [...videoModels(), ...speechModels()].map((m) => m.id);
    for (const [body, ok] of [
      [{}, true],
      [{ models: allIds }, true],
      [{ models: ['no-such-model'] }, false],
      [{ models: [] }, false],
    ] as const) {
      assert.equal(keys(body), ok, `schema, ${JSON.stringify(body)}`);
      const r = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, { token: ADMIN_TOKEN, json: body });
      assert.equal(r.status, ok ? 201 : 400, `server, ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
    }
  });
});

describe('examples', () => {
  test('every request body example of the document is valid there and accepted by the server', async () => {
    const ws = await http(stack.baseUrl, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: { name: 'examples' } });
    let seen = 0;
    for (const [path, item] of Object.entries(doc.paths) as [string, Json][]) {
      for (const [method, op] of Object.entries(item) as [string, Json][]) {
        const media = op.requestBody?.content?.['application/json'];
        if (!media) continue;
        assert.ok(media.example, `${method.toUpperCase()} ${path} has an example`);
        seen++;
        const validate = bodyValidator(method, path);
        assert.ok(validate(media.example), `${method.toUpperCase()} ${path}: ${ajv.errorsText(validate.errors)}`);
        const token = path.startsWith('/admin/') ? ADMIN_TOKEN : customer.key;
        const id = path.startsWith('/v1/audio/voice_consents/') ? consentId : ws.body.id;
        const example = path === '/v1/batches' ? { ...media.example, input_file_id: batchFileId } : media.example;
        const r = await http(stack.baseUrl, method.toUpperCase(), path.replace('{id}', id), { token, json: example });
        // This stack has no Stripe: buying credits answers its documented 503 (test/payments/credits.test.ts
        // has a Checkout Session created at stripe-mock).
        if (path === '/v2/billing/checkout' && r.status === 503 && r.body.error.code === 'billing_not_configured') continue;
        assert.ok(
          r.status >= 200 && r.status < 300,
          `${method.toUpperCase()} ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`,
        );
      }
    }
    assert.equal(seen, 15);
  });
});

/** A raw request (fetch refuses TRACE). */
function raw(
  method: string,
  path: string,
  token: string | null,
): Promise<{ status: number; headers: nodeHttp.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = nodeHttp.request(
      `${stack.baseUrl}${path}`,
      { method, headers: token ? { authorization: `Bearer ${token}` } : {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('undeclared methods on known paths', () => {
  test('TRACE /v2/models and TRACE /admin/v1/workspaces: 405, Allow, the error shape', async () => {
    const models = await raw('TRACE', '/v2/models', customer.key);
    assert.equal(models.status, 405);
    assert.equal(models.headers['allow'], 'GET, HEAD, OPTIONS');
    const body = JSON.parse(models.body);
    assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(body.error.code, 'method_not_allowed');
    const admin = await raw('TRACE', '/admin/v1/workspaces', ADMIN_TOKEN);
    assert.equal(admin.status, 405);
    assert.equal(admin.headers['allow'], 'OPTIONS, POST');
    assert.equal((await raw('TRACE', '/v2/no-such-path', customer.key)).status, 404, 'an unknown path stays a 404');
  });

  test("TRACE and PUT on /v1 paths: 405, Allow, in OpenAI's error shape; an unknown /v1 path stays a 404", async () => {
    for (const [method, path, allow] of [
      ['TRACE', '/v1/videos', 'GET, HEAD, OPTIONS, POST'],
      ['PUT', '/v1/videos/00000000-0000-0000-0000-000000000000', 'DELETE, GET, HEAD, OPTIONS'],
      ['TRACE', '/v1/audio/speech', 'OPTIONS, POST'],
    ] as const) {
      const r = await raw(method, path, customer.key);
      assert.equal(r.status, 405, `${method} ${path}`);
      assert.equal(r.headers['allow'], allow, `${method} ${path}`);
      const body = JSON.parse(r.body);
      assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
      assert.equal(body.error.code, 'method_not_allowed');
    }
    assert.equal((await raw('TRACE', '/v1/no-such-path', customer.key)).status, 404);
  });
});

describe('answers the document describes', () => {
  test('GET /v1/videos with an `after` that names no video (any string, as documented): the documented 404', async () => {
    const op = doc.paths['/v1/videos'].get;
    const afterParam = op.parameters.find((p: Json) => p.name === 'after');
    assert.equal(afterParam.schema.type, 'string');
    for (const after of ['nope', '00000000-0000-0000-0000-000000000000', 'x'.repeat(100)]) {
      const r = await http(stack.baseUrl, 'GET', `/v1/videos?after=${after}`, { token: customer.key });
      assert.equal(r.status, 404, after);
      assert.ok(op.responses['404'], 'the document lists the 404');
      assert.equal(r.body.error.param, 'after');
    }
  });

  test('each server-sent event of a streamed speech is an event the document describes, its data too', async () => {
    const schema = doc.paths['/v2/audio/speech'].post.responses['200'].content['text/event-stream'].schema;
    const validateEvent = ajv.compile(schema);
    const validateData = ajv.compile(schema.properties.data.contentSchema);
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${customer.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        input: 'Events, each described. '.repeat(3),
        voice: 'sim-bright',
        response_format: 'mp3',
        stream_format: 'sse',
      }),
    });
    assert.equal(res.status, 200);
    // Parsed as the HTML standard's event stream parses it: no `event` field is the event "message".
    const events = (await res.text())
      .split('\n\n')
      .filter(Boolean)
      .map((block) => {
        const fields: Record<string, string> = { event: 'message' };
        for (const line of block.split('\n')) {
          const i = line.indexOf(':');
          const name = line.slice(0, i);
          const value = line.slice(i + 1).replace(/^ /, '');
          fields[name] = name === 'data' && fields['data'] !== undefined ? `${fields['data']}\n${value}` : value;
        }
        return fields;
      });
    assert.ok(events.length > 2);
    for (const e of events) {
      assert.ok(validateEvent(e), JSON.stringify(validateEvent.errors));
      assert.ok(validateData(JSON.parse(e['data']!)), JSON.stringify(validateData.errors));
    }
    assert.equal(JSON.parse(events.at(-1)!['data']!).type, 'speech.audio.done');
  });
});
