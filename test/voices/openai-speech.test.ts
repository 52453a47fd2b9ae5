// Speech through the official `openai` npm package: every response_format gives bytes of that format
// (checked by their headers and decoded back by FFmpeg), a stream whose first bytes arrive while the
// synthesis is still running (the hold not yet captured), OpenAI's SSE events, a client that leaves
// mid-stream charged for the whole synthesis, a provider failing before anything is released; the
// ledger audit after each. /v2/audio/speech takes the same formats and streaming.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { assertAuditHolds, balanceMicro, http, newCustomer, startStack, type Stack } from '../helpers/stack.js';
import { SIM_SAMPLE_RATE_HZ, SIM_SAMPLES_PER_CHAR, SimulatedVoiceProvider } from '../../src/providers/voice/simulator.js';
import { FfmpegWasm } from '../../src/media/ffmpeg-wasm.js';

let stack: Stack;
let sim: SimulatedVoiceProvider;
const ffmpeg = new FfmpegWasm();
before(async () => {
  stack = await startStack();
  sim = new SimulatedVoiceProvider(stack.db);
});
after(async () => {
  await ffmpeg.close();
  await stack.stop();
});

const client = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${stack.baseUrl}/v1`, maxRetries: 0 });
// sim-speech-1: 0.15 EUR per 1,000 characters = 150 micro-euros per character.
const PER_CHAR = 150;

/** Seconds of audio in `bytes` (any format FFmpeg reads), decoded to 16-bit mono PCM. */
async function decodedSeconds(bytes: Buffer, name: string): Promise<number> {
  const pcm = await ffmpeg.run(bytes, name, ['-f', 's16le', '-ac', '1', '-ar', String(SIM_SAMPLE_RATE_HZ)], 'out.pcm');
  assert.ok(pcm, `FFmpeg decodes ${name}`);
  return pcm.length / 2 / SIM_SAMPLE_RATE_HZ;
}

const MAGIC: Record<string, (b: Buffer) => boolean> = {
  mp3: (b) => b.subarray(0, 3).toString('latin1') === 'ID3' || (b[0] === 0xff && (b[1]! & 0xe0) === 0xe0),
  opus: (b) => b.subarray(0, 4).toString('latin1') === 'OggS' && b.subarray(28, 36).toString('latin1') === 'OpusHead',
  aac: (b) => b[0] === 0xff && (b[1]! & 0xf6) === 0xf0,
  flac: (b) => b.subarray(0, 4).toString('latin1') === 'fLaC',
  wav: (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WAVE',
  pcm: () => true,
};

describe('speech through the openai SDK', () => {
  test('each response_format gives bytes of that format, the right length of speech, charged per character', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    const input = 'Hello from the compatible API.';
    const expectedSeconds = (input.length * SIM_SAMPLES_PER_CHAR) / SIM_SAMPLE_RATE_HZ;
    let spent = 0;
    for (const format of ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const) {
      const res = await openai.audio.speech.create({ model: 'sim-speech-1', voice: 'sim-narrator', input, response_format: format });
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.ok(MAGIC[format]!(bytes), `${format}: ${bytes.subarray(0, 12).toString('hex')}`);
      if (format === 'pcm') assert.equal(bytes.length, input.length * SIM_SAMPLES_PER_CHAR * 2);
      else {
        const seconds = await decodedSeconds(bytes, `in.${format}`);
        assert.ok(Math.abs(seconds - expectedSeconds) < 0.15, `${format}: ${seconds} s of speech, not ${expectedSeconds}`);
      }
      spent += input.length * PER_CHAR;
      assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - spent);
    }
    // mp3 is the default, as OpenAI's; a voice may be given as {id}.
    const dflt = Buffer.from(
      await (await openai.audio.speech.create({ model: 'sim-speech-1', voice: { id: 'sim-deep' }, input: 'hi' })).arrayBuffer(),
    );
    assert.ok(MAGIC['mp3']!(dflt));
    // speed 2 speaks in half the time.
    const fast = Buffer.from(
      await (
        await openai.audio.speech.create({ model: 'sim-speech-1', voice: 'sim-deep', input, response_format: 'pcm', speed: 2 })
      ).arrayBuffer(),
    );
    assert.equal(fast.length, input.length * Math.round(SIM_SAMPLES_PER_CHAR / 2) * 2);
    await assertAuditHolds(stack);
  });

  test('stream_format audio: the first bytes arrive while the provider is still speaking; charged by the time the stream ends', async () => {
    const c = await newCustomer(stack, 10);
    const input = 'Streaming speech arrives while it is made. '.repeat(20); // 860 characters: ~43 chunks, ~1 s
    const res = await client(c.key).audio.speech.create({
      model: 'sim-speech-1',
      voice: 'sim-bright',
      input,
      response_format: 'mp3',
      stream_format: 'audio',
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    assert.ok(!first.done && first.value.length > 0);
    // The synthesis is not over: the money is still held, not yet charged.
    const held = await stack.db.query<{ status: string }>('SELECT status FROM speech_requests WHERE workspace_id = $1', [c.workspaceId]);
    assert.deepEqual(
      held.rows.map((r) => r.status),
      ['held'],
    );
    const parts = [Buffer.from(first.value)];
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(Buffer.from(r.value));
    assert.ok(parts.length > 2, `streamed in ${parts.length} parts`);
    const mp3 = Buffer.concat(parts);
    const seconds = await decodedSeconds(mp3, 'in.mp3');
    assert.ok(Math.abs(seconds - (input.length * SIM_SAMPLES_PER_CHAR) / SIM_SAMPLE_RATE_HZ) < 0.2, String(seconds));
    // Charged before the stream ended: the balance read right after shows it.
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - input.length * PER_CHAR);
    await assertAuditHolds(stack);
  });

  test('stream_format sse: speech.audio.delta events then speech.audio.done, charged by the time the stream ends', async () => {
    const c = await newCustomer(stack, 10);
    const input = 'Events carry the audio. '.repeat(5);
    const res = await client(c.key).audio.speech.create({
      model: 'sim-speech-1',
      voice: 'sim-bright',
      input,
      response_format: 'pcm',
      stream_format: 'sse',
    });
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await res.text())
      .split('\n\n')
      .filter(Boolean)
      .map((e) => JSON.parse(e.replace(/^data: /, '')));
    const deltas = events.filter((e) => e.type === 'speech.audio.delta');
    assert.ok(deltas.length > 1);
    assert.equal(events.at(-1).type, 'speech.audio.done');
    assert.equal(events.at(-1).usage.input_tokens, input.length);
    const pcm = Buffer.concat(deltas.map((d) => Buffer.from(d.audio, 'base64')));
    assert.equal(pcm.length, input.length * SIM_SAMPLES_PER_CHAR * 2);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - input.length * PER_CHAR);
    await assertAuditHolds(stack);
  });

  test('a client that leaves mid-stream is charged for the synthesis the provider finished; a provider failing first releases', async () => {
    const c = await newCustomer(stack, 10);
    const input = 'The client hangs up early. '.repeat(30);
    const controller = new AbortController();
    const res = await client(c.key).audio.speech.create(
      { model: 'sim-speech-1', voice: 'sim-bright', input, response_format: 'wav', stream_format: 'audio' },
      { signal: controller.signal },
    );
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await waitFor(
      async () =>
        (await stack.db.query("SELECT 1 FROM speech_requests WHERE workspace_id = $1 AND status = 'delivered'", [c.workspaceId]))
          .rowCount === 1,
    );
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - input.length * PER_CHAR);

    await sim.injectFaults('speech', { kind: 'unavailable', count: 1 });
    const err = await client(c.key)
      .audio.speech.create({ model: 'sim-speech-1', voice: 'sim-bright', input: 'fails', stream_format: 'audio' })
      .catch((e) => e);
    assert.ok(err instanceof OpenAI.InternalServerError, String(err));
    assert.equal(err.status, 503);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - input.length * PER_CHAR, 'released: nothing charged');
    await assertAuditHolds(stack);
  });

  test('errors: unknown voice 404, bad format 400, no credits 402, a model the key may not use 403', async () => {
    const c = await newCustomer(stack, 10);
    const openai = client(c.key);
    await assert.rejects(openai.audio.speech.create({ model: 'sim-speech-1', voice: 'nobody', input: 'x' }), OpenAI.NotFoundError);
    await assert.rejects(
      openai.audio.speech.create({ model: 'sim-speech-1', voice: 'sim-deep', input: 'x', response_format: 'ogg' as any }),
      (e: any) => e instanceof OpenAI.BadRequestError && e.param === 'response_format',
    );
    await assert.rejects(
      openai.audio.speech.create({ model: 'sim-speech-1', voice: 'sim-deep', input: 'x', speed: 5 }),
      OpenAI.BadRequestError,
    );
    await assert.rejects(openai.audio.speech.create({ model: 'tts-1', voice: 'sim-deep', input: 'x' }), OpenAI.NotFoundError);
    const poor = await newCustomer(stack, 0);
    const e402 = await client(poor.key)
      .audio.speech.create({ model: 'sim-speech-1', voice: 'sim-deep', input: 'x', stream_format: 'audio' })
      .catch((e) => e);
    assert.equal(e402.status, 402);
    const limited = await newCustomer(stack, 1, ['sim-video-1']);
    await assert.rejects(
      client(limited.key).audio.speech.create({ model: 'sim-speech-1', voice: 'sim-deep', input: 'x' }),
      OpenAI.PermissionDeniedError,
    );
    await assertAuditHolds(stack);
  });

  test('/v2/audio/speech takes the same formats and streams', async () => {
    const c = await newCustomer(stack, 10);
    const res = await fetch(`${stack.baseUrl}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'version two', voice: 'sim-deep', response_format: 'flac', stream_format: 'audio' }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-characters'), '11');
    assert.ok(MAGIC['flac']!(Buffer.from(await res.arrayBuffer())));
    const whole = await http(stack.baseUrl, 'POST', '/v2/audio/speech', {
      token: c.key,
      json: { input: 'version two', voice: 'sim-deep', response_format: 'opus' },
    });
    assert.equal(whole.status, 200);
    assert.equal(whole.headers.get('content-type'), 'audio/ogg; codecs=opus');
    await waitFor(async () => (await balanceMicro(stack, c.workspaceId)) === 10_000_000 - 22 * PER_CHAR);
    await assertAuditHolds(stack);
  });
});

async function waitFor(check: () => Promise<boolean>, timeout_ms = 10_000) {
  const until = Date.now() + timeout_ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}
