// GET /v1/models, GET /v2/models, the create body's variants in /v2/openapi.json and the create itself
// agree on which video models this process serves, for every combination of configured backends (the
// simulator on or off; Vertex AI, fal, Replicate each with or without credentials). The app is the real
// one (createApp), its backends computed from a configuration as the API process computes them; nothing
// but the API key lookup is stood in for, so no database or Temporal is needed. The speech models likewise, for
// every set of voice providers VOICE_PROVIDERS can list.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeHttp from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, type AppDeps } from '../../src/runtime/app.js';
import { loadConfig } from '../../src/config.js';
import { configuredBackends, createVideoProviders } from '../../src/runtime/providers.js';
import { VideoJobsService, type VideoJobsDeps } from '../../src/video-jobs/service.js';
import { findSpeechModel, speechModels, videoModels, type ConfiguredBackends } from '../../src/models/catalog.js';
import { SPEECH_PROVIDERS } from '../../src/models/values.js';
import { voiceProviderNames } from '../../src/providers/registry.js';
import type { ApiKeyPrincipal } from '../../src/account/workspaces.js';
import type { Db } from '../../src/db/pool.js';
import { ApiError } from '../../src/errors.js';

const PRINCIPAL: ApiKeyPrincipal = { key_id: 'k', workspace_id: 'w', models: null };
/** Answers every API key lookup with PRINCIPAL (the only query these routes make). */
const KEY_DB = { query: async () => ({ rows: [PRINCIPAL] }) } as unknown as Db;

/** The environment of one combination: bit 0 the simulator, then Vertex AI, fal, Replicate. */
function envOf(bits: number): NodeJS.ProcessEnv {
  return {
    SIMULATOR: bits & 1 ? 'on' : 'off',
    ...(bits & 2 ? { VERTEX_PROJECT_ID: 'my-project-1', VERTEX_ACCESS_TOKEN: 't' } : {}),
    ...(bits & 4 ? { FAL_KEY: 'fal-key' } : {}),
    ...(bits & 8 ? { REPLICATE_API_TOKEN: 'r8_token' } : {}),
  };
}

const COMBINATIONS = Array.from({ length: 16 }, (_, bits) => {
  const backends = configuredBackends(createVideoProviders(KEY_DB, loadConfig(envOf(bits))));
  const name = Object.entries(backends)
    .filter(([, on]) => on)
    .map(([b]) => b)
    .join(' + ');
  return { name: name || 'nothing', backends };
});

/** Serves createApp with these backends (and voice providers) on a loopback port. */
async function serve(
  backends: ConfiguredBackends,
  voiceProviders: readonly string[] = ['simulator'],
): Promise<{ url: string; close: () => Promise<void> }> {
  const deps = {
    db: KEY_DB,
    adminToken: 'x'.repeat(32),
    rateLimitPerMinute: 1000,
    backends,
    voiceProviders,
    storage: {},
    ffmpeg: {},
    logger: { isLevelEnabled: () => false, info() {}, warn() {}, error() {} },
    ready: async () => true,
  } as unknown as AppDeps;
  const server = nodeHttp.createServer(createApp(deps));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(() => r())) };
}

async function getJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(url, { headers: { authorization: 'Bearer vva_sk_test' } });
  assert.equal(res.status, 200, `${url}: ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

const videoIds = new Set(videoModels().map((m) => m.id));
const sorted = (ids: Iterable<string>) => [...new Set(ids)].sort();

/** The video models the create accepts (it refuses the others: 503 provider_not_configured). */
function acceptedByCreate(backends: ConfiguredBackends): string[] {
  const service = new VideoJobsService({ backends } as unknown as VideoJobsDeps);
  return videoModels()
    .filter((m) => {
      try {
        service.resolveRequest(PRINCIPAL, { prompt: 'p', model: m.id } as Parameters<VideoJobsService['resolveRequest']>[1]);
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.code === 'provider_not_configured') return false;
        throw err;
      }
    })
    .map((m) => m.id);
}

/** The model ids the create body's variants in the OpenAPI document name. */
function documentedCreateModels(doc: Record<string, unknown>): string[] {
  const body = (doc['components'] as { schemas: Record<string, { oneOf?: { properties: { model?: { const?: string } } }[] }> }).schemas[
    'CreateVideoBody'
  ];
  return (body?.oneOf ?? []).map((v) => v.properties.model?.const).filter((id): id is string => id !== undefined && videoIds.has(id));
}

describe('the model lists agree for every combination of configured backends', () => {
  const served: { name: string; backends: ConfiguredBackends; url: string; close: () => Promise<void> }[] = [];
  before(async () => {
    for (const c of COMBINATIONS) served.push({ ...c, ...(await serve(c.backends)) });
  });
  after(async () => {
    for (const s of served) await s.close();
  });

  test('the combinations are all 16, each computed from its configuration', () => {
    assert.equal(new Set(COMBINATIONS.map((c) => c.name)).size, 16);
  });

  for (const [i, c] of COMBINATIONS.entries()) {
    test(`${c.name}: /v1/models, /v2/models, the OpenAPI create body and the create name the same video models`, async () => {
      const { url } = served[i]!;
      const v2 = ((await getJson(`${url}/v2/models`))['data'] as { id: string }[]).map((m) => m.id).filter((id) => videoIds.has(id));
      const v1 = ((await getJson(`${url}/v1/models`))['data'] as { id: string }[]).map((m) => m.id).filter((id) => videoIds.has(id));
      const all = (await getJson(`${url}/v2/models/all`))['data'] as { id: string; backend: string | null }[];
      const servedByAll = all.filter((m) => videoIds.has(m.id) && m.backend !== null).map((m) => m.id);
      const created = acceptedByCreate(c.backends);
      assert.deepEqual(sorted(v1), sorted(v2), 'GET /v1/models and GET /v2/models');
      assert.deepEqual(sorted(servedByAll), sorted(v2), 'GET /v2/models/all (a backend set) and GET /v2/models');
      assert.deepEqual(sorted(created), sorted(v2), 'the create and GET /v2/models');
      const documented = documentedCreateModels(await getJson(`${url}/v2/openapi.json`));
      assert.deepEqual(sorted(documented), sorted(v2), 'the create body in /v2/openapi.json and GET /v2/models');
      if (c.backends.fal || c.backends.replicate) assert.ok(v2.length > 0, 'fal or Replicate serves some model');
    });
  }
});

/** Every set of voice providers VOICE_PROVIDERS can list (none included), each read through the config. */
const VOICE_COMBINATIONS = Array.from({ length: 2 ** SPEECH_PROVIDERS.length }, (_, bits) => {
  const listed = SPEECH_PROVIDERS.filter((_p, i) => bits & (1 << i));
  const env = { VOICE_PROVIDERS: listed.join(',') || 'none', ELEVENLABS_API_KEY: 'xi', CARTESIA_API_KEY: 'sk_car' };
  return voiceProviderNames(loadConfig(env).providers);
});

describe('the speech model lists agree for every set of configured voice providers', () => {
  const speechIds = new Set(speechModels().map((m) => m.id));
  for (const providers of VOICE_COMBINATIONS) {
    test(`${providers.join(' + ') || 'none'}: /v1/models, /v2/models, /v2/models/all and the OpenAPI speech body name the same speech models`, async () => {
      const { url, close } = await serve({ simulator: false } as ConfiguredBackends, providers);
      try {
        const expected = speechModels()
          .filter((m) => providers.includes(m.provider))
          .map((m) => m.id);
        const ids = (body: Record<string, unknown>) =>
          (body['data'] as { id: string }[]).map((m) => m.id).filter((id) => speechIds.has(id));
        assert.deepEqual(sorted(ids(await getJson(`${url}/v2/models`))), sorted(expected), 'GET /v2/models');
        assert.deepEqual(sorted(ids(await getJson(`${url}/v1/models`))), sorted(expected), 'GET /v1/models');
        const all = (await getJson(`${url}/v2/models/all`))['data'] as { id: string; backend: string | null; preset_voices?: string[] }[];
        for (const m of all.filter((x) => speechIds.has(x.id))) {
          const provider = findSpeechModel(m.id)!.provider;
          assert.equal(m.backend, providers.includes(provider) ? provider : null, m.id);
          assert.equal((m.preset_voices ?? []).length > 0, providers.includes(provider), `${m.id}: its provider's preset voices`);
        }
        const doc = await getJson(`${url}/v2/openapi.json`);
        const body = (doc['components'] as { schemas: Record<string, { oneOf?: { properties: { model?: { const?: string } } }[] }> })
          .schemas['CreateSpeechBody'];
        const documented = (body?.oneOf ?? []).map((v) => v.properties.model?.const).filter((id): id is string => id !== undefined);
        assert.deepEqual(sorted(documented), sorted(expected), 'the speech body in /v2/openapi.json');
      } finally {
        await close();
      }
    });
  }
});
