// Every provider adapter through its descriptor, as the service builds it: its settings read from the
// environment that points it at its local fake (test/fakes/*, the simulator on this test's database),
// built by the descriptor, then submit, poll, copy, cancel, callbacks where it says it calls back, and
// refusals; the voice providers likewise. What a descriptor says it can do is checked against what its
// adapter does, and the registry against the catalog's value sets and the config's variables.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { FalFake } from '../fakes/fal-fake.js';
import { ReplicateFake } from '../fakes/replicate-fake.js';
import { VertexVeoFake } from '../fakes/vertex-veo-fake.js';
import { startElevenLabsFake, type ElevenLabsFake } from '../fakes/elevenlabs-fake.js';
import { startCartesiaFake, type CartesiaFake } from '../fakes/cartesia-fake.js';
import { wavSample } from './elevenlabs.setup.js';
import { createTestDatabase } from '../helpers/stack.js';
import { createPool, type Db } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { ENV_VARS, loadConfig } from '../../src/config.js';
import { findVideoModel, speechModels, videoModelBackendFor, videoModels } from '../../src/models/catalog.js';
import { SPEECH_PROVIDERS, VIDEO_BACKENDS } from '../../src/models/values.js';
import { PROVIDERS_ENV, VIDEO_PROVIDERS, VOICE_PROVIDERS, configureProviders } from '../../src/providers/registry.js';
import type { VideoCatalogView, VideoProviderDescriptor, VoiceProviderDescriptor } from '../../src/providers/descriptor.js';
import {
  CallbackRejected,
  ProviderError,
  type VideoOperationStatus,
  type VideoProvider,
  type VideoSubmission,
} from '../../src/providers/video/types.js';
import { VoiceProviderError, type VoiceProvider } from '../../src/providers/voice/types.js';

const CATALOG: VideoCatalogView = {
  acceptsParameters: (model) => findVideoModel(model)?.accepts_parameters === true,
  backendFor: videoModelBackendFor,
};

/** A descriptor's settings from an environment, validated by its own schemas as the config does. */
function settingsFrom(d: VideoProviderDescriptor | VoiceProviderDescriptor, env: Record<string, string>, selected = true): unknown {
  const parsed = z.object(d.env).parse(env);
  return d.settings(parsed, { production: false, selected });
}

/** How one video adapter's fake is driven: its environment, a request it serves, one it refuses, how its requests end. */
interface VideoHarness {
  env(): Record<string, string>;
  /** The environment with a credential the fake refuses; null when the adapter has none. */
  wrongCredentialEnv(): Record<string, string> | null;
  request(id: string): VideoSubmission;
  /** A request the adapter refuses before anything runs. */
  refused(): VideoSubmission;
  /** Requests end at the next poll (or at once, with their callbacks sent). */
  endSoon(): Promise<void>;
  /** The callbacks the fake sent (to an unreachable URL: recorded, verified here). */
  callbacks(): { headers: Record<string, string>; body: Buffer }[];
  /** Requests of the next submit stay queued (cancel before they run). */
  holdQueued(): void;
  /** Requests of the next submit run at the first poll and go on running; a request to submit then (one asking to be billed, where that is asked). */
  holdRunning(id: string): VideoSubmission;
}

/** A request of the first catalog model served by `backend`, at its smallest settings. */
function requestFor(backend: string, id: string, extra: Partial<VideoSubmission> = {}): VideoSubmission {
  const model = videoModels().find((m) => m.backends.some((b) => b.backend === backend))!;
  const entry = model.backends.find((b) => b.backend === backend)!;
  return {
    request_id: id,
    model: model.id,
    prompt: 'a lighthouse at dusk',
    params: {
      durationSeconds: model.durations_seconds[0]!,
      resolution: entry.resolutions[0] ?? model.resolutions[0]!,
      aspectRatio: model.aspect_ratios[0]!,
      n: 1,
    },
    ...(model.audio.supported ? { generate_audio: model.audio.default } : {}),
    ...extra,
  };
}

let db: Db;
let fal: FalFake;
let replicate: ReplicateFake;
let vertex: VertexVeoFake;
let elevenlabs: ElevenLabsFake;
let cartesia: CartesiaFake;

before(async () => {
  db = createPool(await createTestDatabase(), 4);
  await migrate(db);
  [fal, replicate, vertex, elevenlabs, cartesia] = await Promise.all([
    new FalFake().start(),
    new ReplicateFake().start(),
    new VertexVeoFake().start(),
    startElevenLabsFake({ apiKey: 'xi-adapters-test-key' }),
    startCartesiaFake({ apiKey: 'sk_car_adapters_test' }),
  ]);
});
after(async () => {
  await Promise.all([fal.stop(), replicate.stop(), vertex.stop(), elevenlabs.close(), cartesia.close()]);
  await db.end();
});

const HARNESSES: Record<(typeof VIDEO_BACKENDS)[number], () => VideoHarness> = {
  simulator: () => ({
    env: () => ({ SIMULATOR: 'on' }),
    wrongCredentialEnv: () => null,
    request: (id) => requestFor('simulator', id, { model: 'sim-video-1', parameters: { simulate: { delay_ms: 0 } } }),
    refused: () => requestFor('simulator', 'refused', { model: 'sim-video-1', parameters: { simulate: { outcome: 'maybe' } } }),
    endSoon: async () => {},
    callbacks: () => [],
    holdQueued: () => {},
    holdRunning: (id) =>
      requestFor('simulator', id, { model: 'sim-video-1', parameters: { simulate: { delay_ms: 60_000, billed_on_cancel: true } } }),
  }),
  vertex: () => ({
    env: () => ({
      VERTEX_PROJECT_ID: 'test-project',
      VERTEX_API_ENDPOINT: vertex.url,
      GCS_API_ENDPOINT: vertex.url,
      VERTEX_ACCESS_TOKEN: 'test-token',
    }),
    wrongCredentialEnv: () => ({ VERTEX_PROJECT_ID: 'test-project', VERTEX_API_ENDPOINT: vertex.url, VERTEX_ACCESS_TOKEN: 'wrong-token' }),
    request: (id) => requestFor('vertex', id),
    refused: () => requestFor('vertex', 'refused', { model: 'sim-video-1' }),
    endSoon: async () => {
      vertex.scenario = { pollsUntilDone: 0 };
    },
    callbacks: () => [],
    holdQueued: () => {
      vertex.scenario = { pollsUntilDone: 100 };
    },
    holdRunning: (id) => {
      vertex.scenario = { pollsUntilDone: 100 };
      return requestFor('vertex', id);
    },
  }),
  fal: () => ({
    env: () => fal.env(),
    wrongCredentialEnv: () => ({ ...fal.env(), FAL_KEY: 'fal-wrong-key' }),
    request: (id) => requestFor('fal', id),
    refused: () => requestFor('fal', 'refused', { model: 'sim-video-1' }),
    endSoon: async () => {
      fal.defaultPlan = { queue_polls: 0, progress_polls: 0 };
      await fal.finishAll();
    },
    callbacks: () => fal.callbacks,
    holdQueued: () => {
      fal.defaultPlan = { queue_polls: 100 };
    },
    holdRunning: (id) => {
      fal.defaultPlan = { queue_polls: 0, progress_polls: 100 };
      return requestFor('fal', id);
    },
  }),
  replicate: () => ({
    env: () => replicate.env(),
    wrongCredentialEnv: () => ({ ...replicate.env(), REPLICATE_API_TOKEN: 'r8_wrong' }),
    request: (id) => requestFor('replicate', id),
    refused: () => requestFor('replicate', 'refused', { model: 'sim-video-1' }),
    endSoon: async () => {
      replicate.defaultPlan = { starting_polls: 0, processing_polls: 0 };
      await replicate.finishAll();
    },
    callbacks: () => replicate.callbacks,
    holdQueued: () => {
      replicate.defaultPlan = { starting_polls: 100 };
    },
    holdRunning: (id) => {
      replicate.defaultPlan = { starting_polls: 0, processing_polls: 100 };
      return requestFor('replicate', id);
    },
  }),
};

async function settle(p: VideoProvider, operation_id: string): Promise<VideoOperationStatus> {
  for (let i = 0; i < 40; i++) {
    const status = await p.poll(operation_id);
    if (status.state !== 'running') return status;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('still running');
}

const CALLBACK_URL = 'http://127.0.0.1:9/v2/provider-callbacks/x/7d0f2a8e-0000-4000-8000-0000000000aa';

describe('the registry', () => {
  test('names each catalog backend once, and each speech provider and none; its variables are the config’s, every one optional or defaulted', () => {
    assert.deepEqual(VIDEO_PROVIDERS.map((d) => d.name).sort(), [...VIDEO_BACKENDS].sort());
    assert.deepEqual(VOICE_PROVIDERS.map((d) => d.name).sort(), [...SPEECH_PROVIDERS, 'none'].sort());
    for (const d of [...VIDEO_PROVIDERS, ...VOICE_PROVIDERS]) {
      for (const name of Object.keys(d.env)) assert.ok(ENV_VARS.includes(name), `${name} of ${d.name} is read by the config`);
      assert.doesNotThrow(() => z.object(d.env).parse({}), `${d.name}: every variable optional or defaulted`);
    }
    for (const name of Object.keys(PROVIDERS_ENV)) assert.ok(ENV_VARS.includes(name));
  });

  test('the config reads the providers’ variables in their place: the first invalid variable reported is the one it always was', () => {
    const at = ENV_VARS.indexOf('SIMULATOR');
    assert.deepEqual(ENV_VARS.slice(at, at + 5), [
      'SIMULATOR',
      'VOICE_CONSENT_REQUIRED',
      'VOICE_PROVIDER',
      'VOICE_PROVIDERS',
      'ELEVENLABS_API_KEY',
    ]);
    assert.throws(
      () => loadConfig({ SIMULATOR: 'maybe', VOICE_CONSENT_REQUIRED: 'maybe' }),
      /^ConfigError: invalid environment variable SIMULATOR:/,
    );
    assert.throws(
      () =>
        loadConfig({
          VOICE_PROVIDER: 'elevenlabs',
          ELEVENLABS_BASE_URL: 'http://x.example',
          FAL_KEY: 'k',
          FAL_QUEUE_URL: 'http://y.example',
        }),
      /ELEVENLABS_API_KEY must be set when VOICE_PROVIDER=elevenlabs/,
    );
  });

  test('the configured set: nothing in production without settings; the simulator and its voices elsewhere; VOICE_PROVIDER selects', () => {
    const parsed = z.object(PROVIDERS_ENV).parse({});
    const prod = configureProviders(parsed, true);
    assert.deepEqual(prod.video, []);
    assert.deepEqual(prod.voices, []);
    const dev = configureProviders(parsed, false);
    assert.deepEqual(
      dev.video.map((c) => c.descriptor.name),
      ['simulator'],
    );
    assert.deepEqual(
      dev.voices.map((v) => v.descriptor.name),
      ['simulator'],
    );
    const all = loadConfig({ ...fal.env(), ...replicate.env(), ...HARNESSES.vertex().env(), SIMULATOR: 'off', VOICE_PROVIDER: 'none' });
    assert.deepEqual(
      all.providers.video.map((c) => c.descriptor.name),
      ['vertex', 'fal', 'replicate'],
    );
  });
});

for (const descriptor of VIDEO_PROVIDERS) {
  describe(`video adapter ${descriptor.name}, built by its descriptor`, () => {
    const h = HARNESSES[descriptor.name]();
    const build = (env = h.env()) => {
      const settings = settingsFrom(descriptor, env);
      assert.notEqual(settings, null, 'its environment enables it');
      return descriptor.build(settings, { db, catalog: CATALOG });
    };

    test('off without its settings (in production); its name; callbacks as its capabilities say', () => {
      assert.equal(descriptor.settings(z.object(descriptor.env).parse({}), { production: true, selected: true }), null);
      const p = build();
      assert.equal(p.name, descriptor.name);
      const callsBack = typeof p.verifyCallback === 'function';
      assert.equal(descriptor.capabilities.callbacks, callsBack);
      assert.equal(p.callbackReception !== undefined, callsBack);
      assert.equal(typeof p.callbackConcerns === 'function', callsBack);
    });

    test('submit, poll to the end, copy the video; a callback it sends verifies and concerns the operation', async () => {
      const p = build();
      await h.endSoon();
      const { operation_id } = await p.submit(h.request('7d0f2a8e-0000-4000-8000-000000000101'), { callback_url: CALLBACK_URL });
      await h.endSoon();
      const status = await settle(p, operation_id);
      assert.equal(status.state, 'succeeded', JSON.stringify(status));
      const outputs = status.state === 'succeeded' ? status.outputs : [];
      assert.equal(outputs.length, 1);
      const bytes = await p.fetchOutput(operation_id, outputs[0]!);
      assert.ok(bytes.length > 0);
      if (!descriptor.capabilities.callbacks) return;
      const sent = h.callbacks().at(-1);
      assert.ok(sent, 'the fake called back');
      p.callbackReception!.checkHeaders(sent.headers);
      const verified = await p.verifyCallback!({ headers: sent.headers, raw_body: sent.body });
      assert.equal(p.callbackConcerns!(operation_id, verified), true);
      const forged = Buffer.from(sent.body.toString('utf8').replace(/"/, '" '));
      await assert.rejects(p.verifyCallback!({ headers: sent.headers, raw_body: forged }), CallbackRejected);
    });

    test('cancel before it runs: stopped, billed as its capabilities say', async () => {
      const p = build();
      h.holdQueued();
      const req = h.request('7d0f2a8e-0000-4000-8000-000000000102');
      const held = descriptor.name === 'simulator' ? { ...req, parameters: { simulate: { delay_ms: 60_000 } } } : req;
      const { operation_id } = await p.submit(held);
      const answer = await p.cancel(operation_id);
      assert.equal(answer.billed, false, answer.answer);
      assert.ok(answer.answer.length > 0);
      assert.equal(answer.ended_units, 0);
      if (descriptor.capabilities.cancel_bills === 'nothing') assert.equal(answer.billed_units, 0);
      const after = await p.poll(operation_id).catch((err: unknown) => err);
      assert.ok(
        !(after && typeof after === 'object' && 'state' in after && after.state === 'succeeded'),
        'a cancelled operation delivers nothing',
      );
    });

    test('cancel while it runs: billed as its capabilities say', async () => {
      const p = build();
      const { operation_id } = await p.submit(h.holdRunning('7d0f2a8e-0000-4000-8000-000000000104'));
      assert.equal((await p.poll(operation_id)).state, 'running');
      const answer = await p.cancel(operation_id);
      // `as_requested`: the request asked to be billed; `started_requests`: its one request had started.
      const billed = descriptor.capabilities.cancel_bills !== 'nothing';
      assert.equal(answer.billed, billed, answer.answer);
      assert.deepEqual([answer.billed_units, answer.ended_units], [billed ? 1 : 0, 0], answer.answer);
    });

    test('refusals: a request it cannot serve, and a credential the provider refuses, are ProviderErrors that are not retried', async () => {
      const p = build();
      await assert.rejects(p.submit(h.refused()), (err: unknown) => err instanceof ProviderError && err.opts.retryable === false);
      const wrong = h.wrongCredentialEnv();
      if (!wrong) return;
      await assert.rejects(build(wrong).submit(h.request('7d0f2a8e-0000-4000-8000-000000000103')), (err: unknown) => {
        assert.ok(err instanceof ProviderError, String(err));
        assert.equal(err.opts.retryable, false, err.message);
        for (const secret of Object.values(wrong)) if (/wrong/.test(secret)) assert.ok(!err.message.includes(secret));
        return true;
      });
    });
  });
}

const VOICE_ENVS: Record<string, () => Record<string, string>> = {
  simulator: () => ({}),
  none: () => ({}),
  elevenlabs: () => ({ ELEVENLABS_API_KEY: elevenlabs.apiKey, ELEVENLABS_BASE_URL: elevenlabs.url }),
  cartesia: () => ({ CARTESIA_API_KEY: cartesia.apiKey, CARTESIA_BASE_URL: cartesia.url }),
};

for (const descriptor of VOICE_PROVIDERS) {
  describe(`voice adapter ${descriptor.name}, built by its descriptor`, () => {
    const build = (): VoiceProvider => descriptor.build(settingsFrom(descriptor, VOICE_ENVS[descriptor.name]!()), { db });

    test('its name, preset voices and PCM rate are its descriptor’s', () => {
      const p = build();
      assert.equal(p.name, descriptor.name);
      assert.deepEqual([...p.presetVoices()], [...descriptor.capabilities.preset_voices]);
      assert.equal(p.pcm_rate_hz, descriptor.capabilities.pcm_rate_hz);
      assert.equal(p.configured, descriptor.name !== 'none');
    });

    if (descriptor.name === 'none') {
      test('every operation is unavailable', async () => {
        const p = build();
        const unavailable = (err: unknown) => err instanceof VoiceProviderError && err.kind === 'unavailable';
        await assert.rejects(p.cloneVoice({ name: 'v', samples: [wavSample()] }), unavailable);
        await assert.rejects(p.synthesize({ model: 'm', voice_id: 'v', text: 'hi', format: 'pcm' }), unavailable);
        await assert.rejects(p.deleteVoice('v'), unavailable);
      });
      return;
    }

    test('clone, speak in each of its formats at its PCM rate, delete; an unknown voice is refused', async () => {
      const p = build();
      const model = speechModels().find((m) => m.provider === descriptor.name)!.id;
      const { voice_id } = await p.cloneVoice({ name: 'adapters voice', samples: [wavSample()] });
      for (const format of descriptor.capabilities.formats) {
        const speech = await p.synthesize({ model, voice_id, text: 'Hello there.', format });
        assert.ok(speech.audio.length > 0, format);
        if (format === 'pcm') assert.match(speech.content_type, new RegExp(`rate=${descriptor.capabilities.pcm_rate_hz}\\b`));
        if (format === 'wav') assert.equal(speech.audio.readUInt32LE(24), descriptor.capabilities.pcm_rate_hz);
      }
      const preset = descriptor.capabilities.preset_voices[0]!;
      assert.ok((await p.synthesize({ model, voice_id: preset, text: 'Hi.', format: 'wav' })).audio.length > 0, 'a preset voice speaks');
      // Streamed with word timestamps: each word once, in order, monotonic, within the audio's duration.
      const text = 'Hello there, general Kenobi.';
      let pcmBytes = 0;
      const timed = { words: [] as string[], start_s: [] as number[], end_s: [] as number[] };
      for await (const piece of p.synthesizeStreamWithTimestamps!({ model, voice_id, text })) {
        if ('pcm' in piece) pcmBytes += piece.pcm.length;
        else for (const k of ['words', 'start_s', 'end_s'] as const) (timed[k] as unknown[]).push(...piece.words[k]);
      }
      assert.deepEqual(timed.words, ['Hello', 'there,', 'general', 'Kenobi.']);
      const duration_s = pcmBytes / 2 / descriptor.capabilities.pcm_rate_hz!;
      timed.start_s.forEach((start, i) => {
        assert.ok(start >= (timed.end_s[i - 1] ?? 0) - 1e-9 && start <= timed.end_s[i]!, `word ${i} in order`);
        assert.ok(timed.end_s[i]! <= duration_s + 1e-6, `word ${i} ends within the audio (${timed.end_s[i]} <= ${duration_s})`);
      });
      await p.deleteVoice(voice_id);
      await p.deleteVoice(voice_id); // idempotent
      await assert.rejects(
        p.synthesize({ model, voice_id, text: 'Hello.', format: 'pcm' }),
        (err: unknown) => err instanceof VoiceProviderError && err.kind === 'rejected',
      );
    });
  });
}
