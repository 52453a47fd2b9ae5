// Every validation rule of a create and of the ledger statement, authentication, permissions and malformed input:
// each answers the contract's error shape with the right status, never a 500, and charges nothing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, assertAuditHolds, balanceMicro, http, newCustomer, simJob, startStack, type Stack } from '../helpers/stack.js';
import { VIDEO_CREATE_BODY_BYTES_MAX } from '../../src/video-jobs/schemas.js';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { errorHandler } from '../../src/http/errors.js';
import { createLogger } from '../../src/logger.js';

let stack: Stack;
let customer: { workspaceId: string; key: string };
before(async () => {
  stack = await startStack();
  customer = await newCustomer(stack, 100);
});
after(async () => {
  await stack.stop();
});

function assertErrorShape(body: any, status: number, actual: number) {
  assert.equal(actual, status, JSON.stringify(body));
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
}

async function create(json: unknown, opts: { token?: string; headers?: Record<string, string> } = {}) {
  return http(stack.baseUrl, 'POST', '/v2/videos/generations', {
    token: opts.token ?? customer.key,
    json,
    ...(opts.headers ? { headers: opts.headers } : {}),
  });
}

describe('create video: 400 naming the parameter', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['duration not supported', { durationSeconds: 5 }, 'durationSeconds'],
    ['duration not an integer', { durationSeconds: 4.5 }, 'durationSeconds'],
    ['duration a string', { durationSeconds: '8' }, 'durationSeconds'],
    ['resolution not supported', { resolution: '4k' }, 'resolution'], // sim-video-1 has no 4k
    ['aspect ratio not supported', { aspectRatio: '1:1' }, 'aspectRatio'],
    ['n above the model cap', { n: 5 }, 'n'],
    ['n zero', { n: 0 }, 'n'],
    ['n negative', { n: -1 }, 'n'],
    ['seed negative', { seed: -3 }, 'seed'],
    ['seed not an integer', { seed: 1.5 }, 'seed'],
    ['empty prompt', { prompt: '   ' }, 'prompt'],
    ['prompt too long', { prompt: 'x'.repeat(4001) }, 'prompt'],
    ['prompt not a string', { prompt: 42 }, 'prompt'],
    ['unknown field', { colour: 'red' }, 'colour'],
    ['parameters not an object', { parameters: [1, 2] }, 'parameters'],
    ['simulate outcome unknown', { parameters: { simulate: { outcome: 'explode' } } }, 'parameters.simulate.outcome'],
    ['simulate videos above n', { n: 2, parameters: { simulate: { videos: 3 } } }, 'parameters.simulate.videos'],
    ['simulate delay too long', { parameters: { simulate: { delay_ms: 10 ** 9 } } }, 'parameters.simulate.delay_ms'],
    ['simulate unknown knob', { parameters: { simulate: { crash: true } } }, 'parameters.simulate.crash'],
  ];
  for (const [name, override, param] of cases) {
    test(name, async () => {
      const r = await create({ ...simJob(), ...override });
      assertErrorShape(r.body, 400, r.status);
      assert.equal(r.body.error.type, 'invalid_request_error');
      assert.equal(r.body.error.param, param);
    });
  }

  test('missing prompt names prompt', async () => {
    const { prompt: _omit, ...rest } = simJob();
    const r = await create(rest);
    assertErrorShape(r.body, 400, r.status);
    assert.equal(r.body.error.param, 'prompt');
    assert.equal(r.body.error.code, 'missing_parameter');
  });

  test('a value of the wrong type is invalid, not missing', async () => {
    const r = await create({ ...simJob(), durationSeconds: '8' });
    assertErrorShape(r.body, 400, r.status);
    assert.equal(r.body.error.code, 'invalid_parameter');
    assert.doesNotMatch(r.body.error.message, /missing/);
  });

  test('the reference family validates against its own limits too', async () => {
    const r = await create({ prompt: 'p', model: 'veo-3.1-generate-001', durationSeconds: 10 });
    assertErrorShape(r.body, 400, r.status);
    assert.equal(r.body.error.param, 'durationSeconds');
    assert.match(r.body.error.message, /4, 6, 8/);
  });

  test('invalid Idempotency-Key header names it', async () => {
    const r = await create(simJob(), { headers: { 'Idempotency-Key': 'x'.repeat(300) } });
    assertErrorShape(r.body, 400, r.status);
    assert.equal(r.body.error.param, 'Idempotency-Key');
  });
});

describe('create video: malformed requests', () => {
  test('a NUL character anywhere in a JSON body is a 400 naming where, never a hang or a 500', async () => {
    const r = await create({ ...simJob(), prompt: 'a cat\u0000' });
    assertErrorShape(r.body, 400, r.status);
    assert.equal(r.body.error.param, 'prompt');
    const speech = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: customer.key,
      json: { input: 'hi', voice: 'sim-narrator\u0000' },
    });
    assertErrorShape(speech.body, 400, speech.status);
    assert.equal(speech.body.error.param, 'voice');
    const ws = await http(stack.baseUrl, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: { name: 'x\u0000' } });
    assertErrorShape(ws.body, 400, ws.status);
    assert.equal(ws.body.error.param, 'name');
    const nested = await create({ ...simJob(), parameters: { simulate: { message: 'm\u0000' } } });
    assert.equal(nested.body.error.param, 'parameters.simulate.message');
  });

  test('invalid JSON is 400 invalid_json', async () => {
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: customer.key,
      rawBody: '{"prompt": "a cat",',
      headers: { 'content-type': 'application/json' },
    });
    assertErrorShape(r.body, 400, r.status);
    assert.equal(r.body.error.code, 'invalid_json');
  });

  test('a JSON array body is 400', async () => {
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, json: [1, 2] });
    assertErrorShape(r.body, 400, r.status);
  });

  test('a non-JSON content type is 415', async () => {
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: customer.key,
      rawBody: 'prompt=a+cat',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assertErrorShape(r.body, 415, r.status);
  });

  test('a body over the route limit (room for two images) is 413; other routes keep 64 KiB', async () => {
    const r = await create({ prompt: 'p', parameters: { blob: 'x'.repeat(VIDEO_CREATE_BODY_BYTES_MAX) } });
    assertErrorShape(r.body, 413, r.status);
    assert.equal(r.body.error.code, 'request_too_large');
    const speech = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: customer.key,
      json: { input: 'x'.repeat(70 * 1024), voice: 'sim-narrator' },
    });
    assertErrorShape(speech.body, 413, speech.status);
  });
});

describe('authentication, permission, existence', () => {
  test('missing key is 401', async () => {
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { json: simJob() });
    assertErrorShape(r.body, 401, r.status);
    assert.equal(r.body.error.type, 'authentication_error');
    assert.equal(r.headers.get('www-authenticate'), 'Bearer');
  });

  test('invalid key is 401, also on status and model routes', async () => {
    for (const [method, p] of [
      ['POST', '/v2/videos/generations'],
      ['GET', '/v2/videos/generations/00000000-0000-4000-8000-000000000000'],
      ['GET', '/v2/models'],
      ['GET', '/v2/models/all'],
    ] as const) {
      const r = await http(stack.baseUrl, method, p, { token: 'vva_sk_not-a-real-key', ...(method === 'POST' ? { json: simJob() } : {}) });
      assertErrorShape(r.body, 401, r.status);
    }
  });

  test('a malformed Authorization header is 401', async () => {
    const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { json: simJob(), headers: { authorization: 'Basic abc' } });
    assertErrorShape(r.body, 401, r.status);
  });

  test('a key not permitted for the model is 403 and charges nothing', async () => {
    const limited = await newCustomer(stack, 10, ['veo-3.1-fast-generate-001']);
    const r = await create(simJob(), { token: limited.key });
    assertErrorShape(r.body, 403, r.status);
    assert.equal(r.body.error.type, 'permission_error');
    assert.equal(r.body.error.code, 'model_not_permitted');
    assert.equal(r.body.error.param, 'model');
    assert.equal(await balanceMicro(stack, limited.workspaceId), 10_000_000);
    const models = await http(stack.baseUrl, 'GET', '/v2/models', { token: limited.key });
    assert.deepEqual(
      models.body.data.map((m: any) => m.id),
      ['veo-3.1-fast-generate-001'],
    );
  });

  test('an unknown model is 404 naming model', async () => {
    const r = await create({ ...simJob(), model: 'no-such-model' });
    assertErrorShape(r.body, 404, r.status);
    assert.equal(r.body.error.code, 'model_not_found');
    assert.equal(r.body.error.param, 'model');
  });

  test('an unknown or malformed job id is 404', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', '%27%20OR%201%3D1']) {
      const r = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${id}`, { token: customer.key });
      assertErrorShape(r.body, 404, r.status);
    }
  });

  test('an unknown route is 404 in the same shape', async () => {
    const r = await http(stack.baseUrl, 'GET', '/v2/nothing-here', { token: customer.key });
    assertErrorShape(r.body, 404, r.status);
  });

  test('nothing above charged anything', async () => {
    assert.equal(await balanceMicro(stack, customer.workspaceId), 100_000_000);
    const jobs = await stack.db.query('SELECT count(*)::int AS n FROM video_jobs');
    assert.equal(jobs.rows[0].n, 0);
    await assertAuditHolds(stack);
  });
});

describe('control characters in path and query parameters', () => {
  test('a NUL or control character in any query or path parameter is a 400 naming it, never a 500', async () => {
    const cases: [string, string | null, 'v2' | 'openai' | 'admin'][] = [
      ['/v2/videos/generations?model=%00', 'model', 'v2'],
      ['/v2/videos/generations?model=veo%00x', 'model', 'v2'],
      ['/v2/videos/generations?model=veo%1Bx', 'model', 'v2'],
      ['/v2/videos/generations?model=veo%C2%85x', 'model', 'v2'],
      ['/v2/videos/generations?after=%00', 'after', 'v2'],
      ['/v2/videos/generations?%00=1', null, 'v2'],
      ['/v2/videos/generations/%00', 'id', 'v2'],
      ['/v2/videos/generations/veo%7F', 'id', 'v2'],
      ['/v2/models/%00', 'id', 'v2'],
      ['/v2/models/sim-video-1%0A', 'id', 'v2'],
      ['/v2/audio/voices/%00', 'id', 'v2'],
      ['/v2/ledger?after=%00', 'after', 'v2'],
      ['/v1/videos?after=%00', 'after', 'openai'],
      ['/v1/videos/%00', 'id', 'openai'],
      ['/v1/models/%00', 'id', 'openai'],
      ['/admin/v1/video-jobs/%00', 'id', 'admin'],
    ];
    for (const [p, param, surface] of cases) {
      const r = await http(stack.baseUrl, 'GET', p, { token: surface === 'admin' ? ADMIN_TOKEN : customer.key });
      assert.equal(r.status, 400, `${p}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, param, p);
      assert.equal(r.body.error.code, 'invalid_parameter', p);
      if (surface === 'openai') assert.deepEqual(Object.keys(r.body.error).sort(), ['code', 'message', 'param', 'type'], p);
      else assertErrorShape(r.body, 400, r.status);
    }
  });

  test('PostgreSQL refusing a character (22021) is a 400 in the error shape', async () => {
    const app = express();
    app.get('/nul', async () => {
      await stack.db.query('SELECT $1::text AS t', ['a\u0000b']);
    });
    app.use(errorHandler(createLogger('silent', 'test')));
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const r = await http(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'GET', '/nul');
      assertErrorShape(r.body, 400, r.status);
      assert.equal(r.body.error.type, 'invalid_request_error');
    } finally {
      server.close();
    }
  });
});

describe('models', () => {
  test('/v2/models/all lists every model with its limits, price and backend', async () => {
    const r = await http(stack.baseUrl, 'GET', '/v2/models/all', { token: customer.key });
    assert.equal(r.status, 200);
    assert.equal(r.body.object, 'list');
    const ids = r.body.data.map((m: any) => m.id);
    assert.deepEqual(ids.sort(), [
      'eleven-multilingual-v2',
      'hailuo-02-pro',
      'kling-v2.5-turbo-pro',
      'seedance-1-pro',
      'sim-speech-1',
      'sim-video-1',
      'sonic-3',
      'sonic-3.5',
      'veo-3.0-fast-generate-001',
      'veo-3.0-generate-001',
      'veo-3.1-fast-generate-001',
      'veo-3.1-generate-001',
      'wan-2.5',
    ]);
    const speech = r.body.data.find((m: any) => m.id === 'sim-speech-1');
    assert.equal(speech.kind, 'speech');
    assert.equal(speech.pricing.per_1000_characters_in_euro, 0.15);
    const fast = r.body.data.find((m: any) => m.id === 'veo-3.1-fast-generate-001');
    assert.equal(fast.kind, 'video');
    assert.equal(fast.region, 'europe-west4');
    assert.deepEqual(fast.durations_seconds, [4, 6, 8]);
    assert.deepEqual(fast.resolutions, ['720p', '1080p', '4k']);
    assert.deepEqual(fast.aspect_ratios, ['16:9', '9:16']);
    assert.equal(fast.max_n, 4);
    assert.equal(fast.backend, 'simulator'); // no real provider configured: the simulator serves it
    assert.equal(fast.simulated, true);
    assert.equal(fast.deprecated, false);
    assert.equal(fast.supports_image, true);
    assert.equal(fast.supports_last_frame, true);
    assert.deepEqual(fast.image_mime_types, ['image/jpeg', 'image/png']);
    assert.equal(fast.supports_audio, true);
    assert.equal(fast.generate_audio_default, true);
    assert.equal(fast.pricing.per_second_in_euro['720p'], 0.2, 'at the default audio setting (on)');
    assert.equal(fast.pricing.per_second_with_audio_in_euro['4k'], 0.45);
    assert.equal(fast.pricing.per_second_without_audio_in_euro['720p'], 0.15);
    const retired = r.body.data.find((m: any) => m.id === 'veo-3.0-fast-generate-001');
    assert.equal(retired.deprecated, true);
    assert.equal(retired.replaced_by, 'veo-3.1-fast-generate-001');
  });
});

describe('admin API', () => {
  test('requires the admin token', async () => {
    for (const token of [undefined, 'wrong-token', customer.key]) {
      const r = await http(stack.baseUrl, 'GET', '/admin/v1/ledger/audit', token ? { token } : {});
      assertErrorShape(r.body, 401, r.status);
    }
  });

  test('validates its input', async () => {
    const bad = await http(stack.baseUrl, 'POST', '/admin/v1/workspaces', { token: ADMIN_TOKEN, json: { name: '' } });
    assertErrorShape(bad.body, 400, bad.status);
    assert.equal(bad.body.error.param, 'name');
    const neg = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${customer.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: -1 },
    });
    assertErrorShape(neg.body, 400, neg.status);
    assert.equal(neg.body.error.param, 'amount_in_euro');
    const fractional = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${customer.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: 0.0000001 },
    });
    assertErrorShape(fractional.body, 400, fractional.status);
    const unknownModel = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${customer.workspaceId}/api-keys`, {
      token: ADMIN_TOKEN,
      json: { models: ['nope'] },
    });
    assertErrorShape(unknownModel.body, 400, unknownModel.status);
    assert.equal(unknownModel.body.error.param, 'models.0');
    const missing = await http(stack.baseUrl, 'GET', '/admin/v1/workspaces/00000000-0000-4000-8000-000000000000', { token: ADMIN_TOKEN });
    assertErrorShape(missing.body, 404, missing.status);
  });

  test('a workspace id that is not a UUID names no workspace: 404, before the body is looked at', async () => {
    for (const [method, path, json] of [
      ['GET', '/admin/v1/workspaces/nope', undefined],
      ['POST', '/admin/v1/workspaces/nope/credits', { amount_in_euro: -1 }],
      ['POST', '/admin/v1/workspaces/nope/limits', { colour: 'red' }],
      ['POST', '/admin/v1/workspaces/nope/api-keys', { models: [] }],
    ] as const) {
      const r = await http(stack.baseUrl, method, path, { token: ADMIN_TOKEN, ...(json ? { json } : {}) });
      assertErrorShape(r.body, 404, r.status);
      assert.equal(r.body.error.code, 'workspace_not_found', path);
      assert.equal(r.body.error.param, 'id', path);
      assert.equal(r.body.error.message, 'no workspace nope', path);
    }
  });

  test('top-ups are exact and idempotent per Idempotency-Key', async () => {
    const c = await newCustomer(stack, 0);
    const headers = { 'Idempotency-Key': 'topup-1' };
    const a = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: 0.1 },
      headers,
    });
    const b = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: 0.1 },
      headers,
    });
    assert.equal(a.status, 200);
    assert.equal(b.body.topup_id, a.body.topup_id);
    const c3 = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/credits`, {
      token: ADMIN_TOKEN,
      json: { amount_in_euro: 0.2 },
    });
    assert.equal(c3.body.balance_in_euro, 0.3); // exact: 100_000 + 200_000 micro-euros, no float drift
    assert.equal(await balanceMicro(stack, c.workspaceId), 300_000);
    await assertAuditHolds(stack);
  });
});
