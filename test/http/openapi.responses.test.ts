// Real responses of the running API, looked up in the OpenAPI document by the operation and status
// that answered them, parse with the schema documented there: video jobs, models, voices and speech,
// errors, the OpenAI-compatible /v1 surface, admin and health, webhooks, balance and ledger, usage. And the
// docs page (GET /docs): Swagger UI from its npm package, everything served from this origin.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { z } from 'zod';
import path from 'node:path';
import { createRequire } from 'node:module';
import { DOCS_ASSETS, DOCS_INIT_SCRIPT } from '../../src/service/docs-routes.js';
import { ADMIN_TOKEN, http, newCustomer, simJob, waitForJob, type HttpResult } from '../helpers/stack.js';
import { pngImage, pngOfSize } from '../helpers/images.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import {
  S,
  Json,
  SAMPLE_ID,
  stack,
  customer,
  doc,
  documented,
  assertDocumented,
  voiceSample,
  postForm,
  assertBinaryDocumented,
  useDocumentedStack,
} from './openapi.setup.js';

useDocumentedStack();

describe('real responses parse with the documented schemas', () => {
  test('video jobs: create (202), status while pending, succeeded with videos, failed with an error', async () => {
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: customer.key,
      json: simJob(),
      headers: { 'Idempotency-Key': 'openapi-sample-1' },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assertDocumented('post', '/v2/videos/generations', created);
    assert.equal(created.headers.get('location'), `/v2/videos/generations/${created.body.id}`);

    const pending = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: customer.key });
    assertDocumented('get', '/v2/videos/generations/{id}', pending);

    await waitForJob(stack, customer.key, created.body.id);
    const done = await http(stack.baseUrl, 'GET', `/v2/videos/generations/${created.body.id}`, { token: customer.key });
    assert.equal(done.body.status, 'succeeded');
    assert.ok(done.body.videos.length > 0);
    assertDocumented('get', '/v2/videos/generations/{id}', done);

    const file = await fetch(done.body.videos[0].url);
    assert.equal(file.status, 200);
    documented('get', '/v2/files/{key}', file.status, file.headers.get('content-type'));
    await file.arrayBuffer();
    const tampered = await http(stack.baseUrl, 'GET', new URL(done.body.videos[0].url).pathname + '?expires=1&signature=x');
    assertDocumented('get', '/v2/files/{key}', tampered);

    const failing = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, json: simJob({ outcome: 'fail' }) });
    assert.equal(failing.status, 202);
    const failed = await waitForJob(stack, customer.key, failing.body.id);
    assert.equal(failed.status, 'failed');
    assertDocumented('get', '/v2/videos/generations/{id}', { status: 200, headers: done.headers, body: failed });
  });

  test('models: lists and single models, video and speech', async () => {
    for (const p of ['/v2/models', '/v2/models/all'])
      assertDocumented('get', p, await http(stack.baseUrl, 'GET', p, { token: customer.key }));
    for (const id of ['sim-video-1', 'veo-3.1-generate-001', 'veo-3.0-generate-001', 'sim-speech-1']) {
      const r = await http(stack.baseUrl, 'GET', `/v2/models/${id}`, { token: customer.key });
      assert.equal(r.status, 200);
      assertDocumented('get', '/v2/models/{id}', r);
    }
  });

  test('voices and speech: clone, list, get, speak (wav and pcm), delete', async () => {
    const fd = new FormData();
    fd.append('name', 'documented voice');
    fd.append('file', voiceSample(), 'sample.wav');
    const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, {
      method: 'POST',
      headers: { authorization: `Bearer ${customer.key}` },
      body: fd,
    });
    const created: HttpResult = { status: res.status, headers: res.headers, body: await res.json() };
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assertDocumented('post', '/v2/audio/voices', created);
    const voice = created.body;

    assertDocumented('get', '/v2/audio/voices', await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: customer.key }));
    assertDocumented(
      'get',
      '/v2/audio/voices/{id}',
      await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: customer.key }),
    );

    const documentedHeaders = Object.keys(doc.paths['/v2/audio/speech'].post.responses['200'].headers).map((h) => h.toLowerCase());
    for (const response_format of ['wav', 'pcm']) {
      const r = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${customer.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'Hello there.', voice: voice.voice_id, response_format }),
      });
      assert.equal(r.status, 200);
      documented('post', '/v2/audio/speech', 200, r.headers.get('content-type'));
      assert.ok((await r.arrayBuffer()).byteLength > 0);
      for (const h of r.headers.keys())
        if (h.startsWith('x-') && h !== 'x-request-id') assert.ok(documentedHeaders.includes(h), `undocumented header ${h}`);
    }

    const deleted = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: customer.key });
    assertDocumented('delete', '/v2/audio/voices/{id}', deleted);
    assertDocumented(
      'get',
      '/v2/audio/voices/{id}',
      await http(stack.baseUrl, 'GET', `/v2/audio/voices/${voice.id}`, { token: customer.key }),
    );
  });

  test('errors: 400, 401, 402, 403, 404, 409, 413, 415 answer the documented error schema', async () => {
    const post = (json: unknown, opts: { token?: string; headers?: Record<string, string> } = {}) =>
      http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: customer.key, json, ...opts });
    const seen = new Set<number>();
    const check = (r: HttpResult, method = 'post', path = '/v2/videos/generations') => {
      seen.add(r.status);
      assertDocumented(method, path, r);
    };
    check(await post({ ...simJob(), n: 0 }));
    check(await post(simJob(), { token: 'vva_sk_nope' }));
    const poor = await newCustomer(stack, 0);
    check(await post(simJob(), { token: poor.key }));
    const limited = await newCustomer(stack, 10, ['veo-3.1-fast-generate-001']);
    check(await post(simJob(), { token: limited.key }));
    check(await post({ ...simJob(), model: 'no-such-model' }));
    await post(simJob(), { headers: { 'Idempotency-Key': 'openapi-409' } });
    check(await post({ ...simJob(), n: 1 }, { headers: { 'Idempotency-Key': 'openapi-409' } }));
    check(
      await post({
        ...simJob(),
        image: { bytesBase64Encoded: pngOfSize(S.IMAGE_BYTES_MAX + 1).toString('base64'), mimeType: 'image/png' },
      }),
    );
    check(
      await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: customer.key,
        rawBody: 'x',
        headers: { 'content-type': 'text/plain' },
      }),
    );
    check(
      await http(stack.baseUrl, 'GET', `/v2/videos/generations/${SAMPLE_ID}`, { token: customer.key }),
      'get',
      '/v2/videos/generations/{id}',
    );
    check(await http(stack.baseUrl, 'GET', '/v2/models/nope', { token: customer.key }), 'get', '/v2/models/{id}');
    check(await http(stack.baseUrl, 'GET', '/admin/v1/ledger/audit', { token: customer.key }), 'get', '/admin/v1/ledger/audit');
    assert.deepEqual([...seen].sort(), [400, 401, 402, 403, 404, 409, 413, 415]);
  });

  test('OpenAI-compatible (/v1): videos (JSON and multipart), content, list, delete, models, speech, consents, voices, errors', async () => {
    const c = await newCustomer(stack, 10);
    const v1 = (method: string, p: string, json?: unknown) =>
      http(stack.baseUrl, method, p, { token: c.key, ...(json !== undefined ? { json } : {}) });
    const auth = { authorization: `Bearer ${c.key}` };
    const answered = (status: number, r: HttpResult) => {
      assert.equal(r.status, status, JSON.stringify(r.body));
      return r;
    };

    const created = await v1('POST', '/v1/videos', { prompt: 'a lighthouse', model: 'sim-video-1', seconds: '4', size: '1280x720' });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assertDocumented('post', '/v1/videos', created);
    const uploaded = await postForm('/v1/videos', c.key, {
      prompt: 'from a frame',
      model: 'sim-video-1',
      seconds: '4',
      input_reference: [new Blob([new Uint8Array(pngImage())], { type: 'image/png' }), 'frame.png'],
    });
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    assertDocumented('post', '/v1/videos', uploaded);
    for (const id of [created.body.id, uploaded.body.id]) {
      await waitForJob(stack, c.key, id);
      assertDocumented('get', '/v1/videos/{id}', await v1('GET', `/v1/videos/${id}`));
    }
    const page = await v1('GET', '/v1/videos?limit=1');
    assert.equal(page.body.has_more, true);
    assertDocumented('get', '/v1/videos', page);
    assertDocumented('get', '/v1/videos', answered(400, await v1('GET', '/v1/videos?order=sideways')));
    const mp4 = await assertBinaryDocumented('get', '/v1/videos/{id}/content', `/v1/videos/${created.body.id}/content`, { headers: auth });
    assert.equal(mp4.subarray(4, 8).toString('latin1'), 'ftyp');
    const jpeg = await assertBinaryDocumented('get', '/v1/videos/{id}/content', `/v1/videos/${created.body.id}/content?variant=thumbnail`, {
      headers: auth,
    });
    assert.deepEqual([...jpeg.subarray(0, 2)], [0xff, 0xd8]);
    assertDocumented(
      'get',
      '/v1/videos/{id}/content',
      answered(400, await v1('GET', `/v1/videos/${created.body.id}/content?variant=spritesheet`)),
    );
    assertDocumented('delete', '/v1/videos/{id}', await v1('DELETE', `/v1/videos/${created.body.id}`));
    assertDocumented('get', '/v1/videos/{id}', answered(404, await v1('GET', `/v1/videos/${created.body.id}`)));

    assertDocumented('get', '/v1/models', await v1('GET', '/v1/models'));
    assertDocumented('get', '/v1/models/{id}', await v1('GET', '/v1/models/sim-speech-1'));

    const speech = { model: 'sim-speech-1', voice: 'sim-narrator', input: 'Hello there.' };
    for (const extra of [{}, { response_format: 'opus' }, { response_format: 'pcm', stream_format: 'sse' }]) {
      const init = {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ ...speech, ...extra }),
      };
      assert.ok((await assertBinaryDocumented('post', '/v1/audio/speech', '/v1/audio/speech', init)).length > 0);
    }
    assertDocumented('post', '/v1/audio/speech', answered(404, await v1('POST', '/v1/audio/speech', { ...speech, voice: 'nobody' })));

    const consent = await postForm('/v1/audio/voice_consents', c.key, {
      name: 'Ada',
      language: 'en-GB',
      recording: [voiceSample(), 'consent.wav'],
    });
    assert.equal(consent.status, 200, JSON.stringify(consent.body));
    assertDocumented('post', '/v1/audio/voice_consents', consent);
    assertDocumented('get', '/v1/audio/voice_consents', await v1('GET', '/v1/audio/voice_consents'));
    assertDocumented('get', '/v1/audio/voice_consents/{id}', await v1('GET', `/v1/audio/voice_consents/${consent.body.id}`));
    assertDocumented(
      'post',
      '/v1/audio/voice_consents/{id}',
      await v1('POST', `/v1/audio/voice_consents/${consent.body.id}`, { name: 'Ada Lovelace' }),
    );
    const voice = await postForm('/v1/audio/voices', c.key, {
      name: 'ada',
      consent: consent.body.id,
      audio_sample: [voiceSample(), 'sample.wav'],
    });
    assert.equal(voice.status, 200, JSON.stringify(voice.body));
    assertDocumented('post', '/v1/audio/voices', voice);
    assertDocumented(
      'post',
      '/v1/audio/voices',
      answered(400, await postForm('/v1/audio/voices', c.key, { name: 'ada', audio_sample: [voiceSample(), 'sample.wav'] })),
    );
    assertDocumented('delete', '/v1/audio/voices/{id}', await v1('DELETE', `/v1/audio/voices/${voice.body.id}`));
    assertDocumented('delete', '/v1/audio/voices/{id}', answered(404, await v1('DELETE', `/v1/audio/voices/${voice.body.id}`)));
    assertDocumented('delete', '/v1/audio/voice_consents/{id}', await v1('DELETE', `/v1/audio/voice_consents/${consent.body.id}`));

    assertDocumented('get', '/v1/videos', answered(401, await http(stack.baseUrl, 'GET', '/v1/videos', { token: 'vva_sk_nope' })));
    const poor = await newCustomer(stack, 0);
    assertDocumented(
      'post',
      '/v1/videos',
      answered(
        402,
        await http(stack.baseUrl, 'POST', '/v1/videos', { token: poor.key, json: { prompt: 'x', model: 'sim-video-1', seconds: '4' } }),
      ),
    );
  });

  test('admin API, health and readiness', async () => {
    const admin = (method: string, p: string, json?: unknown, headers?: Record<string, string>) =>
      http(stack.baseUrl, method, p, { token: ADMIN_TOKEN, ...(json !== undefined ? { json } : {}), ...(headers ? { headers } : {}) });
    const ws = await admin('POST', '/admin/v1/workspaces', { name: 'documented', credits_in_euro: 1.5 });
    assert.equal(ws.status, 201);
    assertDocumented('post', '/admin/v1/workspaces', ws);
    assertDocumented('get', '/admin/v1/workspaces/{id}', await admin('GET', `/admin/v1/workspaces/${ws.body.id}`));
    assertDocumented(
      'post',
      '/admin/v1/workspaces/{id}/credits',
      await admin('POST', `/admin/v1/workspaces/${ws.body.id}/credits`, { amount_in_euro: 2 }, { 'Idempotency-Key': 'k1' }),
    );
    for (const body of [{}, { models: ['sim-video-1'] }]) {
      const key = await admin('POST', `/admin/v1/workspaces/${ws.body.id}/api-keys`, body);
      assert.equal(key.status, 201);
      assertDocumented('post', '/admin/v1/workspaces/{id}/api-keys', key);
    }
    assertDocumented('post', '/admin/v1/workspaces', await admin('POST', '/admin/v1/workspaces', { name: '' }));
    const audit = await admin('GET', '/admin/v1/ledger/audit');
    assert.equal(audit.body.ok, true);
    assertDocumented('get', '/admin/v1/ledger/audit', audit);
    assertDocumented('get', '/healthz', await http(stack.baseUrl, 'GET', '/healthz'));
    assertDocumented('get', '/readyz', await http(stack.baseUrl, 'GET', '/readyz'));
  });
});

describe('webhooks, balance, ledger and key revocation', () => {
  test('webhook endpoints: create (201, with secret), list, get, deliveries, delete; the event body is the documented WebhookEvent', async () => {
    const receiver = await startReceiver({ script: [{ status: 500 }] });
    try {
      const c = await newCustomer(stack, 10);
      const created = await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: receiver.url } });
      assert.equal(created.status, 201);
      assertDocumented('post', '/v2/webhooks', created);
      assertDocumented(
        'post',
        '/v2/webhooks',
        await http(stack.baseUrl, 'POST', '/v2/webhooks', { token: c.key, json: { url: 'http://10.0.0.1/' } }),
      );
      assertDocumented('get', '/v2/webhooks', await http(stack.baseUrl, 'GET', '/v2/webhooks', { token: c.key }));
      assertDocumented('get', '/v2/webhooks/{id}', await http(stack.baseUrl, 'GET', `/v2/webhooks/${created.body.id}`, { token: c.key }));

      const job = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: simJob({ delay_ms: 0 }) });
      await waitForJob(stack, c.key, job.body.id);
      const [event] = await receiver.waitFor(1);
      const parsed = S.WebhookEvent.safeParse(JSON.parse(event!.body));
      assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
      for (const type of ['video.generation.succeeded', 'video.generation.failed']) {
        const op = doc.webhooks[type].post;
        assert.equal(op.requestBody.content['application/json'].schema.$ref, '#/components/schemas/WebhookEvent');
        assert.deepEqual(
          op.parameters.map((p: Json) => p.name),
          ['webhook-id', 'webhook-timestamp', 'webhook-signature'],
        );
        for (const p of op.parameters) assert.ok(event!.headers[p.name], `header ${p.name} sent`);
      }
      let list: HttpResult;
      for (let i = 0; ; i++) {
        list = await http(stack.baseUrl, 'GET', `/v2/webhooks/${created.body.id}/deliveries?limit=1`, { token: c.key });
        if (list.body.data[0]?.delivery_status === 'succeeded') break;
        assert.ok(i < 200, 'delivered');
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(list.body.has_more, true);
      assertDocumented('get', '/v2/webhooks/{id}/deliveries', list);
      assertDocumented(
        'get',
        '/v2/webhooks/{id}/deliveries',
        await http(stack.baseUrl, 'GET', `/v2/webhooks/${created.body.id}/deliveries?limit=500`, { token: c.key }),
      );
      assertDocumented(
        'delete',
        '/v2/webhooks/{id}',
        await http(stack.baseUrl, 'DELETE', `/v2/webhooks/${created.body.id}`, { token: c.key }),
      );
      assertDocumented(
        'delete',
        '/v2/webhooks/{id}',
        await http(stack.baseUrl, 'DELETE', `/v2/webhooks/${created.body.id}`, { token: c.key }),
      );
    } finally {
      await receiver.close();
    }
  });

  test("usage, the operators' usage (JSON, with 400s and a 404)", async () => {
    const all = '?group_by=model,api_key,kind,backend&bucket=hour';
    const usage = await http(stack.baseUrl, 'GET', `/v2/usage${all}`, { token: customer.key });
    assert.equal(usage.status, 200);
    assert.ok(usage.body.data.length > 0);
    assertDocumented('get', '/v2/usage', usage);
    assertDocumented('get', '/v2/usage', await http(stack.baseUrl, 'GET', '/v2/usage?bucket=week', { token: customer.key }));
    const admin = (q: string) => http(stack.baseUrl, 'GET', `/admin/v1/usage${q}`, { token: ADMIN_TOKEN });
    assertDocumented('get', '/admin/v1/usage', await admin(`?group_by=workspace,kind&workspace_id=${customer.workspaceId}`));
    assertDocumented('get', '/admin/v1/usage', await admin(`?workspace_id=${SAMPLE_ID}`));
    assertDocumented('get', '/admin/v1/usage', await admin('?bucket=hour&start=0&end=99999999'));
  });

  test("the account (GET, PATCH with a 400, the operators' PATCH with a 404); the budget alerts' bodies are their documented events", async () => {
    const receiver = await startReceiver();
    try {
      const c = await newCustomer(stack, 1);
      const hook = await http(stack.baseUrl, 'POST', '/v2/webhooks', {
        token: c.key,
        json: { url: receiver.url, events: ['balance.low', 'api_key.spend_threshold'] },
      });
      assert.equal(hook.status, 201);
      assertDocumented('get', '/v2/account', await http(stack.baseUrl, 'GET', '/v2/account', { token: c.key }));
      const set = await http(stack.baseUrl, 'PATCH', '/v2/account', { token: c.key, json: { low_balance_threshold_in_euro: 0.9 } });
      assert.equal(set.status, 200);
      assertDocumented('patch', '/v2/account', set);
      const bad = await http(stack.baseUrl, 'PATCH', '/v2/account', { token: c.key, json: { low_balance_threshold_in_euro: -1 } });
      assert.equal(bad.status, 400);
      assertDocumented('patch', '/v2/account', bad);
      const admin = (id: string) =>
        http(stack.baseUrl, 'PATCH', `/admin/v1/workspaces/${id}/account`, {
          token: ADMIN_TOKEN,
          json: { low_balance_threshold_in_euro: 0.9 },
        });
      assertDocumented('patch', '/admin/v1/workspaces/{id}/account', await admin(c.workspaceId));
      assertDocumented('patch', '/admin/v1/workspaces/{id}/account', await admin(SAMPLE_ID));

      const limited = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, {
        token: ADMIN_TOKEN,
        json: { spend_limit_in_euro: 0.3 },
      });
      const job = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
        token: limited.body.key,
        json: simJob({ delay_ms: 0 }, { n: 1 }),
      });
      assert.equal(job.status, 202, JSON.stringify(job.body));
      const received = (await receiver.waitFor(2)).map((w) => JSON.parse(w.body));
      const schemas: Record<string, z.ZodType> = {
        'balance.low': S.BalanceLowEvent,
        'api_key.spend_threshold': S.ApiKeySpendThresholdEvent,
      };
      assert.deepEqual(received.map((e) => e.type).sort(), ['api_key.spend_threshold', 'balance.low']);
      for (const event of received) {
        const parsed = schemas[event.type]!.safeParse(event);
        assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
        const component = event.type === 'balance.low' ? 'BalanceLowEvent' : 'ApiKeySpendThresholdEvent';
        assert.equal(
          doc.webhooks[event.type].post.requestBody.content['application/json'].schema.$ref,
          `#/components/schemas/${component}`,
        );
      }
      await waitForJob(stack, limited.body.key, job.body.id);
    } finally {
      await receiver.close();
    }
  });

  test('balance, ledger (with a 400), and revoking a key (then 404 for an unknown one)', async () => {
    const c = await newCustomer(stack, 2);
    assertDocumented('get', '/v2/balance', await http(stack.baseUrl, 'GET', '/v2/balance', { token: c.key }));
    const ledger = await http(stack.baseUrl, 'GET', '/v2/ledger?limit=5', { token: c.key });
    assert.equal(ledger.body.data.length, 1);
    assertDocumented('get', '/v2/ledger', ledger);
    assertDocumented('get', '/v2/ledger', await http(stack.baseUrl, 'GET', '/v2/ledger?after=nope', { token: c.key }));
    const key = await http(stack.baseUrl, 'POST', `/admin/v1/workspaces/${c.workspaceId}/api-keys`, { token: ADMIN_TOKEN, json: {} });
    assertDocumented(
      'delete',
      '/admin/v1/api-keys/{id}',
      await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${key.body.id}`, { token: ADMIN_TOKEN }),
    );
    assertDocumented(
      'delete',
      '/admin/v1/api-keys/{id}',
      await http(stack.baseUrl, 'DELETE', `/admin/v1/api-keys/${SAMPLE_ID}`, { token: ADMIN_TOKEN }),
    );
  });
});

describe('GET /docs', () => {
  test('Swagger UI from the swagger-ui-dist package, everything from this origin, on the served document', async () => {
    const r = await http(stack.baseUrl, 'GET', '/docs');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    const html: string = r.body;
    assert.doesNotMatch(html, /https?:\/\//i, 'no absolute URLs: nothing is loaded from another host');
    const csp = r.headers.get('content-security-policy') ?? '';
    for (const d of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"]) assert.ok(csp.includes(d), csp);
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.deepEqual(refs.sort(), ['/docs/favicon-32x32.png', '/docs/init.js', '/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css']);
    const packageDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    for (const [name, type] of Object.entries(DOCS_ASSETS)) {
      const asset = await fetch(`${stack.baseUrl}/docs/${name}`);
      assert.equal(asset.status, 200, name);
      assert.equal(asset.headers.get('content-type'), type, name);
      assert.ok(
        Buffer.from(await asset.arrayBuffer()).equals(fs.readFileSync(path.join(packageDir, name))),
        `${name} is the package's file`,
      );
    }
    const init = await fetch(`${stack.baseUrl}/docs/init.js`);
    assert.match(init.headers.get('content-type') ?? '', /^text\/javascript/);
    const script = await init.text();
    assert.equal(script, DOCS_INIT_SCRIPT);
    assert.doesNotThrow(() => new Function(script), 'the init script parses');
    assert.match(script, /url: '\/v2\/openapi\.json'/);
    assert.match(script, /tryItOutEnabled: true/);
    assert.match(script, /validatorUrl: null/, 'no call to the public validator');
    // The bundle renders OpenAPI 3.1 (Swagger UI 5).
    const pkg = JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8'));
    assert.ok(Number(pkg.version.split('.')[0]) >= 5, pkg.version);
  });
});
