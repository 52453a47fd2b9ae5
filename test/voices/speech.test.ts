// Text to speech end to end: real audio out, voices resolved within the workspace only, and every
// money path of a speech charge (delivered, refused for credits, provider failure, idempotent retry,
// concurrent requests on a small balance), with the ledger audit checked after each.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { SIM_SAMPLES_PER_CHAR, SimulatedVoiceProvider } from '../../src/providers/voice/simulator.js';
import { encodeWav } from '../../src/media/wav.js';
import { auditLedger } from '../../src/billing/audit.js';
import { holdSpeech } from '../../src/voices/speech-billing.js';
import { providerCalls } from '../../src/providers/simulator-usage.js';
import { voiceDeletionWorkflowId } from '../../workflows/voice-deletion.js';

let stack: Stack;
let sim: SimulatedVoiceProvider;
before(async () => {
  stack = await startStack();
  sim = new SimulatedVoiceProvider(stack.db);
});
after(async () => {
  await stack.stop();
});

// sim-speech-1 costs 0.15 EUR per 1,000 characters: 150 micro-euros per character.
const PER_CHAR = 150;

function wavSample(): Buffer {
  const samples = new Int16Array(11_025);
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 330 * i) / 22_050));
  return encodeWav(samples, 22_050);
}

async function cloneVoice(key: string, name = 'my voice') {
  const fd = new FormData();
  fd.append('name', name);
  fd.append('file', new Blob([new Uint8Array(wavSample())], { type: 'audio/wav' }), 'sample.wav');
  const res = await fetch(`${stack.baseUrl}/v2/audio/voices`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: fd });
  const body = (await res.json()) as any;
  assert.equal(res.status, 200, JSON.stringify(body));
  return body as { id: string; voice_id: string };
}

async function speak(key: string, json: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(json),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const isJson = (res.headers.get('content-type') ?? '').includes('application/json');
  return { status: res.status, headers: res.headers, bytes, body: isJson ? JSON.parse(bytes.toString()) : null };
}

/** The fields of a canonical 44-byte-header PCM WAV. */
function parseWav(b: Buffer) {
  assert.equal(b.toString('ascii', 0, 4), 'RIFF');
  assert.equal(b.readUInt32LE(4), b.length - 8);
  assert.equal(b.toString('ascii', 8, 12), 'WAVE');
  assert.equal(b.toString('ascii', 12, 16), 'fmt ');
  assert.equal(b.toString('ascii', 36, 40), 'data');
  return {
    format: b.readUInt16LE(20),
    channels: b.readUInt16LE(22),
    sample_rate: b.readUInt32LE(24),
    bits: b.readUInt16LE(34),
    data_bytes: b.readUInt32LE(40),
  };
}

/** A hold of `characters` characters of sim-speech-1 with the preset voice, straight on the ledger. */
const hold = (workspaceId: string, speechRequestId: string, idempotencyKey: string, characters: number, requestFingerprint = 'f') =>
  holdSpeech(stack.db, {
    speechRequestId,
    workspaceId,
    idempotencyKey,
    requestFingerprint,
    model: 'sim-speech-1',
    voice: 'sim-narrator',
    voiceRegistryId: null,
    characters,
    responseFormat: 'wav',
    cost_micro_eur: characters * PER_CHAR,
  });

async function speechRows(workspaceId: string): Promise<number> {
  const r = await stack.db.query("SELECT 1 FROM speech_requests WHERE workspace_id = $1 AND status = 'delivered'", [workspaceId]);
  return r.rowCount ?? 0;
}

describe('POST /v2/audio/speech', () => {
  test('with an own cloned voice: a real WAV, its length proportional to the input, charged per character', async () => {
    const c = await newCustomer(stack, 1);
    const voice = await cloneVoice(c.key);
    const input = 'Hello there, this is my cloned voice.';
    const res = await speak(c.key, { input, voice: voice.voice_id });
    assert.equal(res.status, 200, res.body && JSON.stringify(res.body));
    assert.equal(res.headers.get('content-type'), 'audio/wav');
    const wav = parseWav(res.bytes);
    assert.deepEqual(wav, { format: 1, channels: 1, sample_rate: 22_050, bits: 16, data_bytes: input.length * SIM_SAMPLES_PER_CHAR * 2 });
    assert.equal(res.bytes.length, 44 + wav.data_bytes);
    // not silence
    let peak = 0;
    for (let i = 44; i < res.bytes.length; i += 2) peak = Math.max(peak, Math.abs(res.bytes.readInt16LE(i)));
    assert.ok(peak > 1000, `peak ${peak}`);
    const cost = input.length * PER_CHAR;
    assert.equal(res.headers.get('x-characters'), String(input.length));
    assert.equal(res.headers.get('x-cost-in-euro'), String(cost / 1e6));
    assert.equal(res.headers.get('x-model'), 'sim-speech-1');
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - cost);
    const row = await stack.db.query(
      'SELECT characters, cost_micro_eur, voice, voice_registry_id, audio_bytes FROM speech_requests WHERE id = $1',
      [res.headers.get('x-speech-request-id')],
    );
    assert.deepEqual(row.rows[0], {
      characters: input.length,
      cost_micro_eur: cost,
      voice: voice.voice_id,
      voice_registry_id: voice.id,
      audio_bytes: res.bytes.length,
    });
    // deterministic: the same request is the same audio (and a second charge, without an Idempotency-Key)
    const again = await speak(c.key, { input, voice: voice.voice_id });
    assert.equal(again.status, 200);
    assert.ok(again.bytes.equals(res.bytes));
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - 2 * cost);
    await assertAuditHolds(stack);
  });

  test('raw PCM, preset voices, explicit model; characters are code points, the price rounds up', async () => {
    const c = await newCustomer(stack, 1);
    const pcm = await speak(c.key, { model: 'sim-speech-1', input: 'abc', voice: 'sim-narrator', response_format: 'pcm' });
    assert.equal(pcm.status, 200, pcm.body && JSON.stringify(pcm.body));
    assert.match(pcm.headers.get('content-type')!, /^audio\/pcm;rate=22050;channels=1/);
    assert.equal(pcm.bytes.length, 3 * SIM_SAMPLES_PER_CHAR * 2);
    // another voice, another pitch: different audio for the same text
    const other = await speak(c.key, { input: 'abc', voice: 'sim-deep', response_format: 'pcm' });
    assert.equal(other.status, 200);
    assert.ok(!other.bytes.equals(pcm.bytes));
    // 🎙 is one character (two UTF-16 units)
    const emoji = await speak(c.key, { input: '🎙🎙', voice: 'sim-bright' });
    assert.equal(emoji.status, 200);
    assert.equal(emoji.headers.get('x-characters'), '2');
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - 8 * PER_CHAR);
    await assertAuditHolds(stack);
  });

  test('invalid requests are 400s naming the parameter, and charge nothing', async () => {
    const c = await newCustomer(stack, 1);
    const cases: [unknown, number, string][] = [
      [{ input: 'hi', voice: 'sim-narrator', response_format: 'ogg' }, 400, 'response_format'],
      [{ input: 'hi', voice: 'sim-narrator', response_format: 'm4a' }, 400, 'response_format'],
      [{ voice: 'sim-narrator' }, 400, 'input'],
      [{ input: '   ', voice: 'sim-narrator' }, 400, 'input'],
      [{ input: 'x'.repeat(4097), voice: 'sim-narrator' }, 400, 'input'],
      [{ input: 'hi' }, 400, 'voice'],
      [{ input: 'hi', voice: '' }, 400, 'voice'],
      [{ input: 'hi', voice: 'sim-narrator', speed: 5 }, 400, 'speed'],
      [{ input: 'hi', voice: 'sim-narrator', model: 'no-such-model' }, 404, 'model'],
      [{ input: 'hi', voice: 'no-such-voice' }, 404, 'voice'],
    ];
    for (const [json, status, param] of cases) {
      const r = await speak(c.key, json);
      assert.equal(r.status, status, `${JSON.stringify(json).slice(0, 80)} -> ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, param, JSON.stringify(r.body));
    }
    const max = await speak(c.key, { input: 'x'.repeat(4096), voice: 'sim-narrator', response_format: 'pcm' });
    assert.equal(max.status, 200, 'exactly the limit is allowed');
    const notJson = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: c.key,
      rawBody: 'input=hi',
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(notJson.status, 415);
    const anon = await http(stack.baseUrl, 'POST', '/v2/audio/speech', { json: { input: 'hi', voice: 'sim-narrator' } });
    assert.equal(anon.status, 401);
    assert.equal(await speechRows(c.workspaceId), 1);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - 4096 * PER_CHAR);
    await assertAuditHolds(stack);
  });

  test('a key restricted to other models may not speak', async () => {
    const c = await newCustomer(stack, 1, ['sim-video-1']);
    const r = await speak(c.key, { input: 'hi', voice: 'sim-narrator' });
    assert.equal(r.status, 403);
    assert.equal(r.body.error.code, 'model_not_permitted');
    assert.equal(r.body.error.param, 'model');
  });

  test("a deleted voice and another workspace's voice are 404 (param voice), like a voice that never existed; nothing charged", async () => {
    const a = await newCustomer(stack, 1);
    const b = await newCustomer(stack, 1);
    const mine = await cloneVoice(a.key, 'to be deleted');
    const theirs = await cloneVoice(b.key, "b's voice");
    assert.equal((await speak(a.key, { input: 'before', voice: mine.voice_id })).status, 200);
    const spent = 6 * PER_CHAR;

    const del = await http(stack.baseUrl, 'DELETE', `/v2/audio/voices/${mine.id}`, { token: a.key });
    assert.equal(del.status, 200);
    const deleted = await speak(a.key, { input: 'after', voice: mine.voice_id });
    const other = await speak(a.key, { input: 'after', voice: theirs.voice_id });
    const never = await speak(a.key, { input: 'after', voice: 'simvoice_00000000000000000000' });
    for (const r of [deleted, other, never]) {
      assert.equal(r.status, 404, JSON.stringify(r.body));
      assert.equal(r.body.error.code, 'voice_not_found');
      assert.equal(r.body.error.param, 'voice');
      assert.equal(r.body.error.type, 'not_found_error');
    }
    assert.equal(
      deleted.body.error.message.replace(mine.voice_id, 'X'),
      never.body.error.message.replace('simvoice_00000000000000000000', 'X'),
    );
    assert.equal(
      other.body.error.message.replace(theirs.voice_id, 'X'),
      never.body.error.message.replace('simvoice_00000000000000000000', 'X'),
    );
    // b still speaks with its voice; a was charged only for what it got
    assert.equal((await speak(b.key, { input: 'mine', voice: theirs.voice_id })).status, 200);
    assert.equal(await balanceMicro(stack, a.workspaceId), 1_000_000 - spent);
    assert.equal(await speechRows(a.workspaceId), 1);
    await stack.api.temporal.workflow.getHandle(voiceDeletionWorkflowId(mine.id)).result();
    await assertAuditHolds(stack);
  });

  test('insufficient credits: 402, no audio, nothing charged', async () => {
    const c = await newCustomer(stack, 0.001); // 1000 micro-euros: 6 characters
    const r = await speak(c.key, { input: 'seven c', voice: 'sim-narrator' });
    assert.equal(r.status, 402);
    assert.equal(r.body.error.type, 'insufficient_credits_error');
    assert.equal(r.body.error.code, 'insufficient_credits');
    assert.equal(await balanceMicro(stack, c.workspaceId), 1000);
    assert.equal(await speechRows(c.workspaceId), 0);
    const ok = await speak(c.key, { input: 'six ch', voice: 'sim-narrator' });
    assert.equal(ok.status, 200);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1000 - 6 * PER_CHAR);
    await assertAuditHolds(stack);
  });

  test('concurrent requests on a small balance: exactly as many delivered as the balance covers, each charged once', async () => {
    const c = await newCustomer(stack, 0.003); // 3000 micro-euros = 4 requests of 5 characters (750 each)
    const results = await Promise.all(Array.from({ length: 8 }, () => speak(c.key, { input: 'hello', voice: 'sim-narrator' })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 200, 200, 200, 402, 402, 402, 402]);
    for (const r of results) {
      if (r.status === 200) assert.equal(parseWav(r.bytes).data_bytes, 5 * SIM_SAMPLES_PER_CHAR * 2);
      else assert.equal(r.bytes.toString().includes('RIFF'), false, 'no audio with a 402');
    }
    assert.equal(await balanceMicro(stack, c.workspaceId), 0);
    assert.equal(await speechRows(c.workspaceId), 4);
    await assertAuditHolds(stack);
  });

  test('the hold refuses too: a balance spent before the hold means 402, nothing held, nothing written', async () => {
    const c = await newCustomer(stack, 0.001);
    const r = await hold(c.workspaceId, '11111111-1111-4111-8111-111111111111', 'late', 7);
    assert.deepEqual(r, { kind: 'insufficient_credits', available_micro_eur: 1000 });
    assert.equal(await speechRows(c.workspaceId), 0);
    assert.equal(await balanceMicro(stack, c.workspaceId), 1000);
  });

  test('20 concurrent requests on a balance covering 3: the provider is called 3 times, 3 delivered and charged, 17 refused', async () => {
    const c = await newCustomer(stack, 0.00225); // 2250 micro-euros = 3 requests of 5 characters (750 each)
    const calls_before = await providerCalls(stack.db, 'speech');
    const results = await Promise.all(Array.from({ length: 20 }, () => speak(c.key, { input: 'hello', voice: 'sim-narrator' })));
    assert.equal(results.filter((r) => r.status === 200).length, 3);
    assert.equal(results.filter((r) => r.status === 402).length, 17);
    assert.equal((await providerCalls(stack.db, 'speech')) - calls_before, 3, 'only held requests reach the provider');
    assert.equal(await balanceMicro(stack, c.workspaceId), 0);
    const held = await stack.db.query('SELECT held_micro_eur FROM workspaces WHERE id = $1', [c.workspaceId]);
    assert.equal(held.rows[0].held_micro_eur, 0);
    await assertAuditHolds(stack);
  });

  test('a held amount is not spendable: a video job cannot take money a speech request holds', async () => {
    const c = await newCustomer(stack, 0.001);
    const held = await hold(c.workspaceId, '33333333-3333-4333-8333-333333333333', 'holding', 5);
    assert.equal(held.kind, 'held');
    // 1000 - 750 held = 250 available: a second 750 hold is refused, and so is spending the balance directly.
    const second = await speak(c.key, { input: 'hello', voice: 'sim-narrator' });
    assert.equal(second.status, 402);
    await assert.rejects(
      stack.db.query('UPDATE workspaces SET balance_micro_eur = 500 WHERE id = $1', [c.workspaceId]),
      /workspaces_held_covered/,
    );
    const { releaseSpeech } = await import('../../src/voices/speech-billing.js');
    assert.equal(await releaseSpeech(stack.db, '33333333-3333-4333-8333-333333333333'), true);
    assert.equal(await releaseSpeech(stack.db, '33333333-3333-4333-8333-333333333333'), false, 'released once');
    assert.equal((await speak(c.key, { input: 'hello', voice: 'sim-narrator' })).status, 200);
    await assertAuditHolds(stack);
  });

  test('Idempotency-Key: the same request is delivered again and charged once; another body with the key is 409', async () => {
    const c = await newCustomer(stack, 1);
    const headers = { 'Idempotency-Key': 'speech-order-7' };
    const body = { input: 'charge me once', voice: 'sim-narrator' };
    const first = await speak(c.key, body, headers);
    const second = await speak(c.key, body, headers);
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    assert.ok(second.bytes.equals(first.bytes));
    assert.equal(first.headers.get('idempotent-replayed'), null);
    assert.equal(second.headers.get('idempotent-replayed'), 'true');
    assert.equal(second.headers.get('x-speech-request-id'), first.headers.get('x-speech-request-id'));
    const cost = body.input.length * PER_CHAR;
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - cost);
    const other = await speak(c.key, { ...body, input: 'something else entirely' }, headers);
    assert.equal(other.status, 409);
    assert.equal(other.body.error.type, 'idempotency_error');
    // concurrent retries with one key: one reaches the provider; the others are replays or 409 in progress
    const k2 = { 'Idempotency-Key': 'speech-order-8' };
    const calls_before = await providerCalls(stack.db, 'speech');
    const burst = await Promise.all(Array.from({ length: 5 }, () => speak(c.key, body, k2)));
    for (const r of burst) {
      assert.ok(r.status === 200 || (r.status === 409 && r.body.error.code === 'idempotency_request_in_progress'), `status ${r.status}`);
    }
    assert.ok(burst.some((r) => r.status === 200));
    assert.equal(new Set(burst.filter((r) => r.status === 200).map((r) => r.headers.get('x-speech-request-id'))).size, 1);
    const replay = await speak(c.key, body, k2);
    assert.equal(replay.status, 200);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal((await providerCalls(stack.db, 'speech')) - calls_before, 1, 'the provider spoke once for the key');
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - 2 * cost);
    // two different bodies racing with one key: one is delivered and charged, the other is a 409
    const k3 = { 'Idempotency-Key': 'speech-order-9' };
    const raced = [body, { ...body, input: 'charge me twice' }];
    const race = await Promise.all(raced.map((b) => speak(c.key, b, k3)));
    assert.deepEqual(race.map((r) => r.status).sort(), [200, 409]);
    const winner = raced[race.findIndex((r) => r.status === 200)]!;
    const spent = 2 * cost + winner.input.length * PER_CHAR;
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - spent);
    // and the ledger itself refuses the key with another fingerprint, whatever the caller checked
    const direct = await hold(c.workspaceId, '44444444-4444-4444-8444-444444444444', 'speech-order-9', 3, 'another body');
    assert.deepEqual(direct, { kind: 'idempotency_key_reused' });
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000 - spent);
    // the same key from another workspace is another request
    const d = await newCustomer(stack, 1);
    assert.equal((await speak(d.key, body, headers)).status, 200);
    assert.equal(await balanceMicro(stack, d.workspaceId), 1_000_000 - cost);
    const bad = await speak(c.key, body, { 'Idempotency-Key': 'has spaces' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'Idempotency-Key');
    await assertAuditHolds(stack);
  });

  test('a provider failure charges nothing: rejected is a 400 with its message, unreachable a 503', async () => {
    const c = await newCustomer(stack, 1);
    await sim.injectFaults('speech', { kind: 'rejected', count: 1, message: 'text contains unsupported characters' });
    const rejected = await speak(c.key, { input: 'hi', voice: 'sim-narrator' });
    assert.equal(rejected.status, 400);
    assert.deepEqual(rejected.body.error, {
      type: 'invalid_request_error',
      code: 'provider_rejected',
      message: 'text contains unsupported characters',
      param: null,
    });
    await sim.injectFaults('speech', { kind: 'unavailable', count: 1 });
    const down = await speak(c.key, { input: 'hi', voice: 'sim-narrator' });
    assert.equal(down.status, 503);
    assert.equal(down.body.error.code, 'provider_unavailable');
    assert.equal(await balanceMicro(stack, c.workspaceId), 1_000_000);
    assert.equal(await speechRows(c.workspaceId), 0);
    await assertAuditHolds(stack);
  });
});

describe('ledger audit covers speech', () => {
  test('after speech charges it holds and counts them; a speech request without its charge is reported', async () => {
    const before = await auditLedger(stack.db);
    assert.equal(before.ok, true, JSON.stringify(before));
    assert.ok(before.speech_requests_checked > 10, `checked ${before.speech_requests_checked}`);
    assert.deepEqual(before.speech_mismatches, []);
    // Tamper (last test of the file): a speech request recorded with no ledger entry.
    const c = await newCustomer(stack, 1);
    await stack.db.query(
      `INSERT INTO speech_requests (id, workspace_id, idempotency_key, request_fingerprint, model, voice, characters, response_format, audio_bytes, cost_micro_eur)
       VALUES ('22222222-2222-4222-8222-222222222222', $1, 'tampered', 'f', 'sim-speech-1', 'sim-narrator', 10, 'wav', 100, 1500)`,
      [c.workspaceId],
    );
    const afterTamper = await auditLedger(stack.db);
    assert.equal(afterTamper.ok, false);
    assert.deepEqual(afterTamper.speech_mismatches, [
      { speech_request_id: '22222222-2222-4222-8222-222222222222', cost_micro_eur: 1500, ledger_net_charge_micro_eur: 0 },
    ]);
    // and the schema refuses a speech entry that is not a charge, or one with two origins
    await assert.rejects(
      stack.db.query(
        `INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, speech_request_id, balance_after_micro_eur)
         VALUES ($1, 'refund', 1500, 'x-refund', '22222222-2222-4222-8222-222222222222', 1001500)`,
        [c.workspaceId],
      ),
      /check constraint/,
    );
  });
});
