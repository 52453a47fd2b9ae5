// Voice providers side by side (VOICE_PROVIDERS): ElevenLabs and Cartesia voices cloned, spoken (whole, and
// streamed as server-sent events with word timestamps) and deleted under one key and one balance, each at
// its own provider (the fakes count the calls, the ledger the charges); a model of another provider than the
// voice's is a 400 naming `model`; voices cloned before (under the old single VOICE_PROVIDER) keep working.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startElevenLabsFake, type ElevenLabsFake } from '../fakes/elevenlabs-fake.js';
import { startCartesiaFake, type CartesiaFake } from '../fakes/cartesia-fake.js';
import { assertAuditHolds, balanceMicro, http, newCustomer, speakRequest, startStack, type Stack } from '../helpers/stack.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/config-error.js';
import { wavBytes } from '../providers/elevenlabs.setup.js';
import { connect, wsUrl } from './speech-ws-setup.js';

async function clone(stack: Stack, key: string, name: string, provider?: string) {
  const fd = new FormData();
  fd.append('name', name);
  fd.append('file', new Blob([new Uint8Array(wavBytes(1))], { type: 'audio/wav' }), 'sample.wav');
  if (provider !== undefined) fd.append('provider', provider);
  const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: fd });
  return { status: res.status, body: (await res.json()) as any };
}

const speak = (stack: Stack, key: string, json: Record<string, unknown>) => speakRequest(stack.baseUrl, key, json);

/** The JSON of each `data:` event of a server-sent event stream. */
const sseEvents = (bytes: Buffer): any[] =>
  bytes
    .toString('utf8')
    .split('\n\n')
    .filter((b) => b.startsWith('data: '))
    .map((b) => JSON.parse(b.slice(6)));

/** Checks a timed stream's events: deltas with word timings between them, the words of `text` in order, monotonic, within the audio. */
function checkTimedStream(events: any[], text: string, pcm_rate_hz: number): void {
  assert.equal(events[0].type, 'speech.audio.delta', 'audio comes first');
  assert.equal(events.at(-1).type, 'speech.audio.done');
  const timed = events.filter((e) => e.type === 'speech.word_timestamps');
  assert.ok(timed.length >= 1, 'word timestamps were sent');
  const lastDelta = events.map((e) => e.type).lastIndexOf('speech.audio.delta');
  assert.ok(events.findIndex((e) => e.type === 'speech.word_timestamps') < lastDelta, 'some timings come between the audio deltas');
  for (const e of timed) assert.deepEqual(Object.keys(e).sort(), ['end_s', 'start_s', 'type', 'words']);
  const words = timed.flatMap((e) => e.words);
  const start = timed.flatMap((e) => e.start_s);
  const end = timed.flatMap((e) => e.end_s);
  assert.deepEqual(words, text.split(/\s+/));
  const pcmBytes = events.filter((e) => e.type === 'speech.audio.delta').reduce((n, e) => n + Buffer.from(e.audio, 'base64').length, 0);
  const duration_s = pcmBytes / 2 / pcm_rate_hz;
  start.forEach((s: number, i: number) => {
    assert.ok(s >= (end[i - 1] ?? 0) - 1e-9 && s <= end[i], `word ${i} in order: ${s} .. ${end[i]}`);
    assert.ok(end[i] <= duration_s + 1e-6, `word ${i} within the audio: ${end[i]} <= ${duration_s}`);
  });
}

const eur = (h: Headers) => Math.round(Number(h.get('x-cost-in-euro')) * 1_000_000);

test('VOICE_PROVIDERS: a comma list of providers, each once; a listed provider needs its key', () => {
  const c = loadConfig({ VOICE_PROVIDERS: 'cartesia, simulator', CARTESIA_API_KEY: 'sk_car_x' });
  assert.deepEqual(
    c.providers.voices.map((v) => v.descriptor.name),
    ['cartesia', 'simulator'],
  );
  assert.throws(() => loadConfig({ VOICE_PROVIDERS: 'cartesia' }), /CARTESIA_API_KEY must be set when VOICE_PROVIDERS lists cartesia/);
  assert.throws(
    () => loadConfig({ VOICE_PROVIDERS: 'simulator,polly' }),
    (e: unknown) => e instanceof ConfigError && /VOICE_PROVIDERS/.test(e.message),
  );
  assert.throws(() => loadConfig({ VOICE_PROVIDERS: 'simulator,simulator' }), /VOICE_PROVIDERS/);
  assert.deepEqual(
    loadConfig({ VOICE_PROVIDER: 'simulator' }).providers.voices.map((v) => v.descriptor.name),
    ['simulator'],
  );
  assert.deepEqual(loadConfig({ VOICE_PROVIDERS: 'none' }).providers.voices, []);
  assert.throws(() => loadConfig({ CARTESIA_API_KEY: 'k', CARTESIA_VERSION: 'latest' }), /CARTESIA_VERSION/);
});

describe('ElevenLabs and Cartesia side by side', () => {
  let elevenlabs: ElevenLabsFake;
  let cartesia: CartesiaFake;
  let stack: Stack;
  before(async () => {
    [elevenlabs, cartesia] = await Promise.all([startElevenLabsFake({ apiKey: 'xi-side' }), startCartesiaFake({ apiKey: 'sk_car_side' })]);
    stack = await startStack({
      env: {
        VOICE_PROVIDERS: 'elevenlabs,cartesia',
        ELEVENLABS_API_KEY: elevenlabs.apiKey,
        ELEVENLABS_BASE_URL: elevenlabs.url,
        CARTESIA_API_KEY: cartesia.apiKey,
        CARTESIA_BASE_URL: cartesia.url,
      },
    });
  });
  after(async () => {
    await stack?.stop();
    await Promise.all([elevenlabs?.close(), cartesia?.close()]);
  });

  test('the speech models of both providers are listed, with their prices, on /v2 and /v1', async () => {
    const c = await newCustomer(stack, 1);
    const all = await http(stack.baseUrl, 'GET', '/v2/models/all', { token: c.key });
    const speech = all.body.data.filter((m: any) => m.kind === 'speech');
    assert.deepEqual(
      speech.map((m: any) => [m.id, m.backend, m.available, m.pricing.per_1000_characters_in_euro]),
      [
        ['sim-speech-1', null, false, 0.15],
        ['eleven-multilingual-v2', 'elevenlabs', true, 0.3],
        ['sonic-3', 'cartesia', true, 0.12],
        ['sonic-3.5', 'cartesia', true, 0.15],
      ],
    );
    const v1 = await http(stack.baseUrl, 'GET', '/v1/models', { token: c.key });
    const ids = v1.body.data.map((m: any) => m.id);
    for (const id of ['eleven-multilingual-v2', 'sonic-3', 'sonic-3.5']) assert.ok(ids.includes(id), id);
    assert.ok(!ids.includes('sim-speech-1'));
  });

  test('cloned, spoken and deleted each at its own provider, under one key and one balance', async () => {
    const c = await newCustomer(stack, 5);
    const before_micro = await balanceMicro(stack, c.workspaceId);
    // Cloning: the first configured by default; `provider` names another; one not configured is a 400 naming it.
    const el = await clone(stack, c.key, 'eleven voice');
    assert.equal(el.status, 200, JSON.stringify(el.body));
    assert.equal(el.body.provider, 'elevenlabs');
    const ca = await clone(stack, c.key, 'cartesia voice', 'cartesia');
    assert.equal(ca.status, 200, JSON.stringify(ca.body));
    assert.equal(ca.body.provider, 'cartesia');
    for (const provider of ['simulator', 'polly']) {
      const refused = await clone(stack, c.key, 'nowhere', provider);
      assert.equal(refused.status, 400, JSON.stringify(refused.body));
      assert.equal(refused.body.error.param, 'provider');
    }
    assert.equal(elevenlabs.requestsTo('clone').length, 1);
    assert.equal(cartesia.requestsTo('clone').length, 1);
    assert.ok(cartesia.voices.has(ca.body.voice_id) && elevenlabs.voices.has(el.body.voice_id));
    const list = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: c.key });
    assert.deepEqual(list.body.data.map((v: any) => v.provider).sort(), ['cartesia', 'elevenlabs']);

    // Speech: the voice's provider speaks, with its default model unless another of its models is named.
    let charged = 0;
    const text = 'Hello there general Kenobi';
    const e1 = await speak(stack, c.key, { voice: el.body.voice_id, input: text, response_format: 'pcm' });
    assert.equal(e1.status, 200, e1.bytes.toString());
    assert.equal(e1.headers.get('x-model'), 'eleven-multilingual-v2');
    charged += eur(e1.headers);
    const c1 = await speak(stack, c.key, { voice: ca.body.voice_id, input: text, response_format: 'wav' });
    assert.equal(c1.status, 200, c1.bytes.toString());
    assert.equal(c1.headers.get('x-model'), 'sonic-3');
    assert.equal(c1.bytes.readUInt32LE(24), 24_000, 'Cartesia PCM at its rate');
    charged += eur(c1.headers);
    const c2 = await speak(stack, c.key, { voice: ca.body.voice_id, input: text, model: 'sonic-3.5', response_format: 'mp3' });
    assert.equal(c2.status, 200);
    assert.equal(c2.headers.get('x-model'), 'sonic-3.5');
    charged += eur(c2.headers);
    assert.equal(cartesia.requestsTo('bytes').at(-1)!.json && (cartesia.requestsTo('bytes').at(-1)!.json as any).model_id, 'sonic-3.5');

    // A model of another provider than the voice's: 400 naming model, no provider called, nothing charged.
    const callsBefore = cartesia.requests.length + elevenlabs.requests.length;
    for (const [voice, model] of [
      [ca.body.voice_id, 'eleven-multilingual-v2'],
      [el.body.voice_id, 'sonic-3'],
    ]) {
      const wrong = await speak(stack, c.key, { voice, model, input: text });
      assert.equal(wrong.status, 400, wrong.bytes.toString());
      assert.equal(wrong.body.error.param, 'model');
    }
    assert.equal(cartesia.requests.length + elevenlabs.requests.length, callsBefore);
    const noSse = await speak(stack, c.key, { voice: ca.body.voice_id, input: text, timestamps: 'word', stream_format: 'audio' });
    assert.equal(noSse.status, 400);
    assert.equal(noSse.body.error.param, 'timestamps');

    // Streamed with word timestamps, from each provider's timed endpoint.
    for (const [voice, rate_hz] of [
      [el.body.voice_id, 22_050],
      [ca.body.voice_id, 24_000],
    ] as const) {
      const timed = await speak(stack, c.key, { voice, input: text, response_format: 'pcm', stream_format: 'sse', timestamps: 'word' });
      assert.equal(timed.status, 200);
      checkTimedStream(sseEvents(timed.bytes), text, rate_hz);
      charged += eur(timed.headers);
    }
    assert.equal((cartesia.requestsTo('sse')[0]!.json as any).add_timestamps, true);

    // Provider calls against charges: each provider was called once per speech charged to its voices.
    assert.equal(
      elevenlabs.requestsTo('speech').length + elevenlabs.requestsTo('stream').length + elevenlabs.requestsTo('timed').length,
      2,
    );
    assert.equal(cartesia.requestsTo('bytes').length + cartesia.requestsTo('sse').length, 3);
    // A streamed speech is captured before its last bytes go out: none is still held.
    const rows = await stack.db.query<{ backend: string; n: number }>(
      "SELECT backend, count(*)::int AS n FROM speech_requests WHERE workspace_id = $1 AND status = 'delivered' GROUP BY backend ORDER BY backend",
      [c.workspaceId],
    );
    assert.deepEqual(rows.rows, [
      { backend: 'cartesia', n: 3 },
      { backend: 'elevenlabs', n: 2 },
    ]);
    assert.equal(before_micro - (await balanceMicro(stack, c.workspaceId)), charged);

    // Deleting each deletes it at its own provider (durably).
    for (const v of [el.body, ca.body])
      assert.equal((await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${v.id}`, { token: c.key })).status, 200);
    for (let i = 0; i < 100 && (elevenlabs.voices.size > 0 || cartesia.voices.has(ca.body.voice_id)); i++)
      await new Promise((r) => setTimeout(r, 100));
    assert.equal(elevenlabs.voices.has(el.body.voice_id), false);
    assert.equal(cartesia.voices.has(ca.body.voice_id), false);
    assert.equal(elevenlabs.requestsTo('delete').length, 1);
    assert.equal(cartesia.requestsTo('delete').length, 1);
    await assertAuditHolds(stack);
  });

  test("over the speech socket: a context's model names the provider its voice is resolved for in the hold, its registry id recorded; another provider's voice is a 400 naming model, nothing held, no text sent", async () => {
    const c = await newCustomer(stack, 5);
    const el = await clone(stack, c.key, 'socket eleven');
    const ca = await clone(stack, c.key, 'socket cartesia', 'cartesia');
    const ws = await connect(wsUrl(stack), c.key);
    try {
      ws.send({ context_id: 'cartesia', voice: ca.body.voice_id, model: 'sonic-3', text: 'Resolved in the hold.' });
      ws.send({ context_id: 'eleven', voice: el.body.voice_id, model: 'eleven-multilingual-v2', text: 'Resolved in the hold.' });
      for (const id of ['cartesia', 'eleven']) assert.ok((await ws.done(id)).characters > 0, id);
      const texts = () =>
        elevenlabs.streamInput.connections.flatMap((k) => k.messages).filter((m) => typeof m['text'] === 'string' && m['text'].trim())
          .length + cartesia.ws.connections.flatMap((k) => k.messages).filter((m) => m['transcript']).length;
      const sent = texts();
      for (const [id, voice, model] of [
        ['wrong-1', ca.body.voice_id, 'eleven-multilingual-v2'],
        ['wrong-2', el.body.voice_id, 'sonic-3'],
      ] as const) {
        ws.send({ context_id: id, voice, model, text: 'Never spoken.' });
        const err = await ws.next((m) => m.type === 'error' && m.context_id === id);
        assert.match(err['message'], /model/, JSON.stringify(err));
      }
      assert.equal(texts(), sent, 'no text of a refused context reached a provider');
    } finally {
      ws.close();
    }
    const rows = await stack.db.query<{ backend: string; voice_registry_id: string; status: string }>(
      'SELECT backend, voice_registry_id, status FROM speech_requests WHERE workspace_id = $1 ORDER BY backend',
      [c.workspaceId],
    );
    assert.deepEqual(rows.rows, [
      { backend: 'cartesia', voice_registry_id: ca.body.id, status: 'delivered' },
      { backend: 'elevenlabs', voice_registry_id: el.body.id, status: 'delivered' },
    ]);
    await assertAuditHolds(stack);
  });

  test("Cartesia's refusals as the API answers them: a refused key is the operator's (503), an unknown voice the provider's 400", async () => {
    const c = await newCustomer(stack, 1);
    const ca = await clone(stack, c.key, 'refusals', 'cartesia');
    cartesia.fail('bytes', {
      status: 401,
      body: { error_code: 'unauthorized', title: 'Unauthorized', message: 'Invalid API key.', request_id: 'r' },
    });
    const refused = await speak(stack, c.key, { voice: ca.body.voice_id, input: 'Hello.' });
    assert.equal(refused.status, 503);
    assert.equal(refused.body.error.code, 'provider_unavailable');
    assert.ok(!refused.bytes.toString().includes(cartesia.apiKey));
    cartesia.fail('bytes', {
      status: 429,
      headers: { 'retry-after': '3' },
      body: { error_code: 'concurrency_limited', title: 'Too many concurrent requests', message: 'x', request_id: 'r' },
    });
    assert.equal((await speak(stack, c.key, { voice: ca.body.voice_id, input: 'Hello.' })).status, 503);
    cartesia.voices.delete(ca.body.voice_id); // gone at Cartesia
    const gone = await speak(stack, c.key, { voice: ca.body.voice_id, input: 'Hello.' });
    assert.equal(gone.status, 400);
    assert.equal(gone.body.error.code, 'provider_rejected');
    await assertAuditHolds(stack);
  });
});

describe('voices cloned under the old single VOICE_PROVIDER keep working', () => {
  let cartesia: CartesiaFake;
  let stack: Stack | undefined;
  before(async () => {
    cartesia = await startCartesiaFake();
  });
  after(async () => {
    await stack?.stop();
    await cartesia?.close();
  });

  test('a simulator voice of before is listed, spoken and deleted at the simulator once Cartesia is added first', async () => {
    const old = await startStack({ env: { VOICE_PROVIDER: 'simulator' } });
    const c = await newCustomer(old, 2);
    const v = await clone(old, c.key, 'from before');
    assert.equal(v.status, 200);
    await old.stop();
    // The same database, served with another configuration.
    const reopen = (providers: string) =>
      startStack({
        env: {
          DATABASE_URL: old.env['DATABASE_URL']!,
          VOICE_PROVIDERS: providers,
          CARTESIA_API_KEY: cartesia.apiKey,
          CARTESIA_BASE_URL: cartesia.url,
        },
      });
    stack = await reopen('cartesia,simulator');
    const listed = await http(stack.baseUrl, 'GET', '/v2/audio/voices', { token: c.key });
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.deepEqual(
      listed.body.data.map((x: any) => [x.id, x.provider]),
      [[v.body.id, 'simulator']],
    );
    const text = 'Still speaking after the upgrade';
    const s = await speak(stack, c.key, {
      voice: v.body.voice_id,
      input: text,
      stream_format: 'sse',
      timestamps: 'word',
      response_format: 'pcm',
    });
    assert.equal(s.status, 200);
    assert.equal(s.headers.get('x-model'), 'sim-speech-1');
    checkTimedStream(sseEvents(s.bytes), text, 22_050);
    assert.equal(cartesia.requests.length, 0, 'Cartesia was not asked');
    const fresh = await clone(stack, c.key, 'new default');
    assert.equal(fresh.body.provider, 'cartesia', 'a new clone goes to the first configured');
    assert.equal((await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${v.body.id}`, { token: c.key })).status, 200);
    for (let i = 0; i < 100; i++) {
      const r = await stack.db.query('SELECT provider_deleted_at FROM voices WHERE id = $1', [v.body.id]);
      if (r.rows[0].provider_deleted_at) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const sim = await stack.db.query('SELECT 1 FROM simulator.voices WHERE voice_id = $1', [v.body.voice_id]);
    assert.equal(sim.rowCount, 0, 'deleted at the simulator');
    assert.equal(cartesia.requestsTo('delete').length, 0);
    await assertAuditHolds(stack);

    // The simulator no longer listed: its voice is a 503 naming `voice` (nothing charged), a clone there a 400.
    const kept = await clone(stack, c.key, 'kept at the simulator', 'simulator');
    assert.equal(kept.body.provider, 'simulator');
    await stack.stop();
    stack = await reopen('cartesia');
    const balance = await balanceMicro(stack, c.workspaceId);
    const unserved = await speak(stack, c.key, { voice: kept.body.voice_id, input: 'Hello.' });
    assert.equal(unserved.status, 503, unserved.bytes.toString());
    assert.equal(unserved.body.error.code, 'provider_not_configured');
    assert.equal(unserved.body.error.param, 'voice');
    assert.equal(await balanceMicro(stack, c.workspaceId), balance);
    const nowhere = await clone(stack, c.key, 'nowhere', 'simulator');
    assert.equal(nowhere.status, 400);
    assert.equal(nowhere.body.error.param, 'provider');
    await assertAuditHolds(stack);
  });
});
