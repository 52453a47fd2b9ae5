// ElevenLabs end to end: a voice cloned, spoken with and deleted through the HTTP API, the ledger and
// the durable deletion workflow (which retries a failed DELETE), with the key in no log line; speech
// streamed from the stream endpoint, refused before its first byte, and cut midway, and the money of
// each; the provider's errors as the API answers them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { SIM_PCM_CONTENT_TYPE } from '../../src/providers/voice/simulator.js';
import { fakeSpeechPcm, startElevenLabsFake, STREAM_CHUNK_BYTES, type ElevenLabsFake } from '../fakes/elevenlabs-fake.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, speakRequest, startStack, type Stack } from '../helpers/stack.js';
import { voiceDeletionWorkflowId } from '../../workflows/voice-deletion.js';
import { wavBytes, parseWav } from './elevenlabs.setup.js';

describe('ElevenLabs end to end: the HTTP API, the ledger and the deletion workflow', () => {
  const E2E_KEY = 'test-key';
  let fake: ElevenLabsFake;
  let stack: Stack;
  const logLines: string[] = [];
  before(async () => {
    // The fake first: the stack reads its URL from the environment.
    fake = await startElevenLabsFake({ apiKey: E2E_KEY });
    stack = await startStack({
      env: { VOICE_PROVIDER: 'elevenlabs', ELEVENLABS_API_KEY: E2E_KEY, ELEVENLABS_BASE_URL: fake.url, LOG_LEVEL: 'debug' },
      logStream: { write: (line: string) => void logLines.push(line) },
    });
  });
  after(async () => {
    await stack?.stop();
    await fake?.close();
  });

  async function cloneThroughApi(key: string, name: string, wav: Buffer) {
    const fd = new FormData();
    fd.append('name', name);
    fd.append('file', new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), 'my recording.wav');
    const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: fd });
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  }

  const speak = (key: string, json: unknown) => speakRequest(stack.baseUrl, key, json);

  test('the ElevenLabs speech model is the one available', async () => {
    const c = await newCustomer(stack, 1);
    const models = await http(stack.baseUrl, 'GET', '/v2/models', { token: c.key });
    const speech = models.body.data.filter((m: any) => m.kind === 'speech');
    assert.deepEqual(
      speech.map((m: any) => [m.id, m.backend, m.available, m.region, m.pricing.per_1000_characters_in_euro]),
      [['eleven-multilingual-v2', 'elevenlabs', true, 'us', 0.3]],
    );
  });

  test('a voice cloned, spoken with, charged, and deleted (the first DELETE fails with 503 and is retried)', async () => {
    const c = await newCustomer(stack, 5);
    const wav = wavBytes(0.5, 220);

    // clone: our multipart in, the provider's multipart out
    const created = await cloneThroughApi(c.key, 'My voice', wav);
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const voice = created.body;
    assert.equal(voice.requires_verification, true, 'cloned without a consent');
    const held = fake.voices.get(voice.voice_id);
    assert.ok(held, 'the fake holds the cloned voice');
    assert.equal(held.name, 'My voice');
    assert.deepEqual(
      held.files.map((f) => [f.filename, f.contentType]),
      [['sample-1.wav', 'audio/wav']],
    );
    assert.ok(held.files[0]!.data.equals(wav), 'the upload reached the provider byte for byte');
    assert.equal(fake.requestsTo('clone').at(-1)!.headers['xi-api-key'], E2E_KEY);
    const row = await stack.db.query('SELECT provider, voice_id FROM voices WHERE id = $1', [voice.id]);
    assert.deepEqual(row.rows[0], { provider: 'elevenlabs', voice_id: voice.voice_id });

    // speak (default model and format): a WAV around the provider's PCM, charged per character
    const input = 'Hello from ElevenLabs, through the fake.';
    const res = await speak(c.key, { input, voice: voice.voice_id });
    assert.equal(res.status, 200, res.body && JSON.stringify(res.body));
    assert.equal(res.headers.get('content-type'), 'audio/wav');
    assert.equal(res.headers.get('x-model'), 'eleven-multilingual-v2');
    assert.deepEqual(parseWav(res.bytes), { format: 1, channels: 1, rate: 22_050, byteRate: 44_100, bits: 16 });
    assert.ok(res.bytes.subarray(44).equals(fakeSpeechPcm(voice.voice_id, input, 22_050)));
    const speechRequest = fake.requestsTo('speech').at(-1)!;
    assert.deepEqual(speechRequest.query, { output_format: 'pcm_22050' });
    assert.deepEqual(speechRequest.json, { text: input, model_id: 'eleven_multilingual_v2' });
    const cost = input.length * 300; // 0.30 EUR per 1,000 characters
    assert.equal(res.headers.get('x-cost-in-euro'), String(cost / 1e6));
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost);

    // raw PCM with a default voice
    const pcm = await speak(c.key, {
      input: 'abc',
      voice: 'JBFqnCBsd6RMkjVDRZzb',
      response_format: 'pcm',
      model: 'eleven-multilingual-v2',
    });
    assert.equal(pcm.status, 200);
    assert.equal(pcm.headers.get('content-type'), SIM_PCM_CONTENT_TYPE);
    assert.ok(pcm.bytes.equals(fakeSpeechPcm('JBFqnCBsd6RMkjVDRZzb', 'abc', 22_050)));
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost - 3 * 300);
    await assertAuditHolds(stack);

    // delete: answered at once; the provider's first DELETE fails (503) and the workflow retries it
    fake.fail('delete', { status: 503, body: { detail: { status: 'system_busy', message: 'try again' } } });
    const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${voice.id}`, { token: c.key });
    assert.equal(del.status, 200, JSON.stringify(del.body));
    const handle = stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(voice.id));
    assert.deepEqual(await handle.result(), { registry_id: voice.id, voice_id: voice.voice_id, provider_deleted: true });
    assert.equal(fake.voices.has(voice.voice_id), false, 'the fake no longer has the voice');
    assert.equal(fake.pendingFaults('delete'), 0);
    const deletes = fake.requestsTo('delete').filter((r) => r.path === `/v1/voices/${voice.voice_id}`);
    assert.equal(deletes.length, 2, 'one failed DELETE, one that succeeded');
    for (const d of deletes) assert.equal(d.headers['xi-api-key'], E2E_KEY);
    const history = await handle.fetchHistory();
    const attempts = (history.events ?? []).map((e) => e.activityTaskStartedEventAttributes?.attempt).filter((a) => a != null);
    assert.deepEqual(attempts, [2]);
    const after = await stack.db.query('SELECT provider_deleted_at IS NOT NULL AS provider_deleted FROM voices WHERE id = $1', [voice.id]);
    assert.equal(after.rows[0].provider_deleted, true);
    // and speech with it is now a 404, charging nothing
    const gone = await speak(c.key, { input: 'still there?', voice: voice.voice_id });
    assert.equal(gone.status, 404);
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost - 3 * 300);
    await assertAuditHolds(stack);
  });

  test("the provider's requires_verification is the voice record's", async () => {
    const c = await newCustomer(stack, 1);
    fake.requiresVerification = true;
    try {
      const created = await cloneThroughApi(c.key, 'needs verification', wavBytes());
      assert.equal(created.status, 200, JSON.stringify(created.body));
      assert.equal(created.body.requires_verification, true);
      const got = await http(stack.baseUrl, 'GET', `/v2/audio/voices/${created.body.id}`, { token: c.key });
      assert.equal(got.body.requires_verification, true);
    } finally {
      fake.requiresVerification = false;
    }
  });

  test("a provider 400 on clone is our 400 with the provider's message; a 401 (our key) is our 503; nothing registered", async () => {
    const c = await newCustomer(stack, 1);
    fake.fail('clone', {
      status: 400,
      body: { detail: { status: 'voice_too_short', message: 'The samples must total at least 1 second of speech.' } },
    });
    const rejected = await cloneThroughApi(c.key, 'too short', wavBytes(0.1));
    assert.equal(rejected.status, 400, JSON.stringify(rejected.body));
    assert.deepEqual(rejected.body.error, {
      type: 'invalid_request_error',
      code: 'provider_rejected',
      message: 'The samples must total at least 1 second of speech.',
      param: null,
    });
    fake.fail('clone', { status: 401, body: { detail: { status: 'invalid_api_key', message: 'Invalid API key' } } });
    const unauthorized = await cloneThroughApi(c.key, 'v', wavBytes());
    assert.equal(unauthorized.status, 503, JSON.stringify(unauthorized.body));
    assert.equal(unauthorized.body.error.code, 'provider_unavailable');
    assert.doesNotMatch(unauthorized.body.error.message, /Invalid API key/);
    assert.ok(!JSON.stringify(unauthorized.body).includes(E2E_KEY));
    const count = await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE workspace_id = $1', [c.workspaceId]);
    assert.equal(count.rows[0].n, 0);
  });

  test('a provider 429 on speech is our 503; nothing charged', async () => {
    const c = await newCustomer(stack, 1);
    fake.fail('speech', { status: 429, headers: { 'retry-after': '3' }, body: { detail: { status: 'system_busy', message: 'busy' } } });
    const r = await speak(c.key, { input: 'hello', voice: 'JBFqnCBsd6RMkjVDRZzb' });
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'provider_unavailable');
    assert.ok(r.headers.get('retry-after'));
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000);
    await assertAuditHolds(stack);
  });

  /** A streamed speech request: its bytes as they arrived, and the error that cut the body, if any. */
  async function speakStreamed(key: string, path: '/v2/audio/speech' | '/v1/audio/speech', json: unknown) {
    const res = await fetch(`${stack.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });
    const parts: Buffer[] = [];
    let cut: unknown = null;
    const reader = res.body!.getReader();
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(Buffer.from(r.value));
    } catch (err) {
      cut = err;
    }
    const bytes = Buffer.concat(parts);
    const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
    return { status: res.status, headers: res.headers, parts, bytes, cut, body: isJson ? JSON.parse(bytes.toString()) : null };
  }

  const sseEvents = (bytes: Buffer) =>
    bytes
      .toString()
      .split('\n\n')
      .filter(Boolean)
      .map((e) => JSON.parse(e.replace(/^data: /, '')));

  const speechStatuses = async (workspaceId: string) =>
    (
      await stack.db.query<{ status: string }>('SELECT status FROM speech_requests WHERE workspace_id = $1 ORDER BY created_at', [
        workspaceId,
      ])
    ).rows.map((r) => r.status);

  async function waitFor(check: () => Promise<boolean>, timeout_ms = 10_000) {
    const until = Date.now() + timeout_ms;
    while (!(await check())) {
      if (Date.now() > until) throw new Error('timed out waiting');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  test("streamed speech comes from ElevenLabs' stream endpoint chunk by chunk: the provider's audio, charged once when it finished", async () => {
    const c = await newCustomer(stack, 5);
    const voice = 'JBFqnCBsd6RMkjVDRZzb';
    const input = 'Streamed from ElevenLabs while it speaks. '.repeat(8); // 336 characters, ~185 chunks of the fake
    const pcm = fakeSpeechPcm(voice, input, 22_050);
    const speechCalls = fake.requestsTo('speech').length;

    // /v2, the audio bytes themselves: the first arrive while ElevenLabs still speaks, the money still held.
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input, voice, response_format: 'pcm', stream_format: 'audio' }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), SIM_PCM_CONTENT_TYPE);
    const cost = input.length * 300; // 0.30 EUR per 1,000 characters
    assert.equal(res.headers.get('x-cost-in-euro'), String(cost / 1e6));
    const reader = res.body!.getReader();
    const first = await reader.read();
    assert.ok(!first.done && first.value.length > 0);
    assert.deepEqual(await speechStatuses(c.workspaceId), ['held']);
    const parts = [Buffer.from(first.value)];
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(Buffer.from(r.value));
    assert.ok(parts.length > 1, `arrived in ${parts.length} parts`);
    assert.ok(Buffer.concat(parts).equals(pcm), "the fake's audio, byte for byte");
    const request = fake.requestsTo('stream').at(-1)!;
    assert.equal(request.path, `/v1/text-to-speech/${voice}/stream`);
    assert.deepEqual(request.query, { output_format: 'pcm_22050' });
    assert.deepEqual(request.json, { text: input, model_id: 'eleven_multilingual_v2' });
    assert.equal(request.headers['xi-api-key'], E2E_KEY);
    assert.equal(fake.requestsTo('speech').length, speechCalls, 'not the whole-file endpoint');
    await waitFor(async () => (await speechStatuses(c.workspaceId)).join() === 'delivered');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - cost);

    // /v1, server-sent events: the deltas are the fake's audio; charged once more, for this request.
    const sse = await speakStreamed(c.key, '/v1/audio/speech', {
      model: 'eleven-multilingual-v2',
      input,
      voice,
      response_format: 'pcm',
      stream_format: 'sse',
    });
    assert.equal(sse.status, 200);
    assert.equal(sse.cut, null);
    const events = sseEvents(sse.bytes);
    const deltas = events.filter((e) => e.type === 'speech.audio.delta');
    assert.ok(deltas.length > 1, `${deltas.length} deltas`);
    assert.ok(Buffer.concat(deltas.map((d) => Buffer.from(d.audio, 'base64'))).equals(pcm));
    assert.deepEqual(events.at(-1), {
      type: 'speech.audio.done',
      usage: { input_tokens: input.length, output_tokens: 0, total_tokens: input.length },
    });
    await waitFor(async () => (await speechStatuses(c.workspaceId)).join() === 'delivered,delivered');
    assert.equal(await balanceMicro(stack, c.workspaceId), 5_000_000 - 2 * cost);
    await assertAuditHolds(stack);
  });

  test('ElevenLabs refusing a stream before its first byte: the error in our shape, nothing charged', async () => {
    const c = await newCustomer(stack, 1);
    const body = { input: 'never spoken', voice: 'JBFqnCBsd6RMkjVDRZzb', response_format: 'pcm', stream_format: 'audio' };

    fake.fail('stream', {
      status: 429,
      headers: { 'retry-after': '3' },
      body: { detail: { status: 'too_many_concurrent_requests', message: 'Too many concurrent requests.' } },
    });
    const limited = await speakStreamed(c.key, '/v2/audio/speech', body);
    assert.equal(limited.status, 503, limited.bytes.toString());
    assert.deepEqual(limited.body, {
      error: {
        type: 'provider_error',
        code: 'provider_unavailable',
        message: 'the voice provider could not be reached; try again later',
        param: null,
      },
    });
    assert.ok(limited.headers.get('retry-after'));

    fake.fail('stream', {
      status: 422,
      body: { detail: [{ loc: ['body', 'text'], msg: 'String should have at most 5000 characters', type: 'string_too_long' }] },
    });
    const invalid = await speakStreamed(c.key, '/v1/audio/speech', { ...body, stream_format: 'sse' });
    assert.equal(invalid.status, 400, invalid.bytes.toString());
    assert.deepEqual(invalid.body, {
      error: {
        type: 'invalid_request_error',
        code: 'provider_rejected',
        message: 'body.text: String should have at most 5000 characters',
        param: null,
      },
    });

    fake.fail('stream', { status: 401, body: { detail: { status: 'invalid_api_key', message: 'Invalid API key' } } });
    const unauthorized = await speakStreamed(c.key, '/v2/audio/speech', body);
    assert.equal(unauthorized.status, 503);
    assert.equal(unauthorized.body.error.code, 'provider_unavailable');
    assert.doesNotMatch(unauthorized.body.error.message, /Invalid API key/);

    assert.equal(fake.pendingFaults('stream'), 0, 'each reached ElevenLabs');
    assert.deepEqual(await speechStatuses(c.workspaceId), ['released', 'released', 'released']);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000, 'nothing charged');
    await assertAuditHolds(stack);
  });

  test('a stream ElevenLabs cuts midway: the audio body breaks off, SSE ends with an error event; nothing charged', async () => {
    const c = await newCustomer(stack, 1);
    const voice = 'JBFqnCBsd6RMkjVDRZzb';
    const input = 'This sentence is cut off before its end. '.repeat(3);
    const pcm = fakeSpeechPcm(voice, input, 22_050);
    const cutAfterBytes = 3 * STREAM_CHUNK_BYTES + 1;

    fake.fail('stream', { cutAfterBytes });
    const audio = await speakStreamed(c.key, '/v2/audio/speech', { input, voice, response_format: 'pcm', stream_format: 'audio' });
    assert.equal(audio.status, 200);
    assert.ok(audio.cut, 'the body broke off');
    assert.ok(audio.bytes.length > 0 && audio.bytes.length <= cutAfterBytes, `${audio.bytes.length} bytes arrived`);
    assert.ok(pcm.subarray(0, audio.bytes.length).equals(audio.bytes), 'what arrived is the start of the speech');

    fake.fail('stream', { cutAfterBytes });
    const sse = await speakStreamed(c.key, '/v1/audio/speech', {
      model: 'eleven-multilingual-v2',
      input,
      voice,
      response_format: 'pcm',
      stream_format: 'sse',
    });
    assert.equal(sse.status, 200);
    const events = sseEvents(sse.bytes);
    assert.ok(events.some((e) => e.type === 'speech.audio.delta'));
    assert.equal(
      events.some((e) => e.type === 'speech.audio.done'),
      false,
    );
    assert.deepEqual(events.at(-1), {
      type: 'error',
      error: {
        type: 'server_error',
        code: 'provider_failed',
        message: 'the voice provider failed mid-stream; nothing was charged',
        param: null,
      },
    });

    await waitFor(async () => (await speechStatuses(c.workspaceId)).join() === 'released,released');
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000, 'nothing charged');
    await assertAuditHolds(stack);
  });

  /** Log lines of level error (pino: 50) since `from`. */
  const errorsLogged = (from: number) =>
    logLines
      .slice(from)
      .filter((l) => JSON.parse(l).level === 50)
      .map((l) => JSON.parse(l));

  test("a wrong ELEVENLABS_API_KEY is the operator's problem: 503 without provider text, and an error logged that names the key to check", async () => {
    const c = await newCustomer(stack, 1);
    const from = logLines.length;
    fake.fail('speech', { status: 401, body: { detail: { status: 'invalid_api_key', message: 'Invalid API key' } } });
    const r = await speak(c.key, { input: 'hello', voice: 'JBFqnCBsd6RMkjVDRZzb' });
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.body.error.code, 'provider_unavailable');
    assert.doesNotMatch(r.body.error.message, /could not be reached|Invalid API key/);
    const logged = errorsLogged(from);
    assert.equal(logged.length, 1, JSON.stringify(logged));
    assert.equal(logged[0].provider_problem, 'credentials');
    assert.match(logged[0].provider_message, /ELEVENLABS_API_KEY/);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000);
  });

  test("an exhausted ElevenLabs account (quota_exceeded) or its full voice slots (voice_limit_reached) answer 503 saying so, never the operator's plan details; logged for the operator", async () => {
    const c = await newCustomer(stack, 1);
    const from = logLines.length;
    const plan = 'This request exceeds your quota of 10000. You have 0 credits remaining, while 91 credits are required for this request.';
    fake.fail('speech', { status: 401, body: { detail: { status: 'quota_exceeded', message: plan } } });
    const quota = await speak(c.key, { input: 'hello', voice: 'JBFqnCBsd6RMkjVDRZzb' });
    assert.equal(quota.status, 503, JSON.stringify(quota.body));
    assert.equal(quota.body.error.code, 'provider_quota_exhausted');
    assert.doesNotMatch(JSON.stringify(quota.body), /10000|credits remaining/);
    assert.ok(Number(quota.headers.get('retry-after')) > 0);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000, 'nothing charged');

    const slots =
      'You have reached your maximum amount of custom voices (30 / 30). You can upgrade your subscription to increase your custom voice limit.';
    fake.fail('clone', { status: 400, body: { detail: { status: 'voice_limit_reached', message: slots } } });
    const full = await cloneThroughApi(c.key, 'v', wavBytes());
    assert.equal(full.status, 503, JSON.stringify(full.body));
    assert.equal(full.body.error.code, 'provider_voice_slots_full');
    assert.doesNotMatch(JSON.stringify(full.body), /30 \/ 30|upgrade your subscription/);
    assert.equal((await stack.db.query('SELECT count(*)::int AS n FROM voices WHERE workspace_id = $1', [c.workspaceId])).rows[0].n, 0);
    const logged = errorsLogged(from);
    assert.deepEqual(
      logged.map((l) => l.provider_problem),
      ['quota_exhausted', 'voice_slots_full'],
    );
    assert.ok(logged[0].provider_message.includes('10000'), 'the operator sees the plan figures');
    await assertAuditHolds(stack);
  });

  test('the API key appears in no log line', () => {
    assert.ok(logLines.length > 0, 'the stack logged');
    const leaked = logLines.filter((l) => l.includes(E2E_KEY));
    assert.deepEqual(leaked, []);
  });
});
