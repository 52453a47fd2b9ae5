// The model catalog as a file the operator owns: the built-in config/models.yaml (Veo 3.1 the reference
// family, the retired Veo 3.0 ids as aliases), its pricing by resolution and audio setting, validation
// with one line per problem naming the file and the path in it (a broken MODELS_FILE stops a process at
// startup with that line), and an operator's MODELS_FILE replacing the built-in one end to end. Models
// on several backends (Vertex AI, fal, Replicate): their order, regions, input maps, and which serve a job.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { parse } from 'yaml';
import { parseCatalog, readCatalogFile } from '../../src/models/catalog-file.js';
import {
  BUILT_IN_MODELS_FILE,
  defaultVideoModelId,
  estimateCostMicroEur,
  findVideoModel,
  generatesAudio,
  providerModelIdFor,
  videoBackendFor,
  videoBackendsFor,
  videoModelAliases,
  videoModelBackendFor,
  videoModels,
  type VideoModel,
} from '../../src/models/catalog.js';
import { ConfigError } from '../../src/config-error.js';
import { loadConfig } from '../../src/config.js';
import { assertAuditHolds, balanceMicro, http, infra, newCustomer, startStack, waitForJob, type Stack } from '../helpers/stack.js';
import { imageField, pngImage } from '../helpers/images.js';

const builtIn = () => parse(fs.readFileSync(BUILT_IN_MODELS_FILE, 'utf8')) as any;
/** Where sim-video-1 is in the built-in file (the validation cases below edit it by index). */
const SIM = (builtIn().video_models as { id: string }[]).findIndex((m) => m.id === 'sim-video-1');

describe('the built-in catalog', () => {
  test('Veo 3.1 is the reference family, fast the default; the retired Veo 3.0 ids resolve to their replacements', () => {
    assert.equal(loadConfig({}).modelsFile, BUILT_IN_MODELS_FILE);
    assert.equal(defaultVideoModelId(), 'veo-3.1-fast-generate-001');
    assert.deepEqual(
      videoModels().map((m) => m.id),
      [
        'veo-3.1-fast-generate-001',
        'veo-3.1-generate-001',
        'kling-v2.5-turbo-pro',
        'seedance-1-pro',
        'wan-2.5',
        'hailuo-02-pro',
        'sim-video-1',
      ],
    );
    assert.deepEqual(
      videoModelAliases().map((a) => [a.id, a.replaced_by]),
      [
        ['veo-3.0-fast-generate-001', 'veo-3.1-fast-generate-001'],
        ['veo-3.0-generate-001', 'veo-3.1-generate-001'],
      ],
    );
    assert.equal(findVideoModel('veo-3.0-fast-generate-001')!.id, 'veo-3.1-fast-generate-001');
    assert.equal(findVideoModel('veo-3.0-generate-001')!.id, 'veo-3.1-generate-001');
    assert.equal(findVideoModel('veo-2.0-generate-001'), undefined);
    for (const id of ['veo-3.1-fast-generate-001', 'veo-3.1-generate-001']) {
      const m = findVideoModel(id)!;
      assert.equal(m.backend, 'vertex');
      assert.deepEqual(m.durations_seconds, [4, 6, 8]);
      assert.deepEqual(m.resolutions, ['720p', '1080p', '4k']);
      assert.deepEqual(m.aspect_ratios, ['16:9', '9:16']);
      assert.equal(m.max_n, 4);
      assert.deepEqual(m.inputs, { image: true, last_frame: true, image_mime_types: ['image/jpeg', 'image/png'], negative_prompt: true });
      assert.deepEqual(m.audio, { supported: true, default: true });
    }
  });

  test('prices per resolution and audio setting, in whole micro-euros; the estimate is n x duration x price', () => {
    const fast = findVideoModel('veo-3.1-fast-generate-001')!;
    const params = { durationSeconds: 8, resolution: '720p', aspectRatio: '16:9', n: 2 } as const;
    assert.equal(estimateCostMicroEur(fast, params), 2 * 8 * 200_000, 'default: with audio');
    assert.equal(estimateCostMicroEur(fast, params, { generateAudio: true }), 2 * 8 * 200_000);
    assert.equal(estimateCostMicroEur(fast, params, { generateAudio: false }), 2 * 8 * 150_000);
    assert.equal(estimateCostMicroEur(fast, { ...params, resolution: '4k' }, { generateAudio: true }), 2 * 8 * 450_000);
    assert.equal(estimateCostMicroEur(fast, { ...params, resolution: '4k' }, { generateAudio: false }), 2 * 8 * 400_000);
    const standard = findVideoModel('veo-3.1-generate-001')!;
    assert.equal(estimateCostMicroEur(standard, { ...params, resolution: '1080p', n: 1 }), 8 * 600_000);
    assert.equal(estimateCostMicroEur(standard, { ...params, resolution: '1080p', n: 1 }, { generateAudio: false }), 8 * 350_000);
    // an alias is priced as its replacement
    assert.equal(
      estimateCostMicroEur(findVideoModel('veo-3.0-generate-001')!, { ...params, n: 1 }),
      estimateCostMicroEur(standard, { ...params, n: 1 }),
    );
    const sim = findVideoModel('sim-video-1')!;
    assert.equal(estimateCostMicroEur(sim, { ...params, durationSeconds: 4 }), 400_000, 'sim-video-1 keeps its price with audio');
    assert.equal(estimateCostMicroEur(sim, { ...params, durationSeconds: 4 }, { generateAudio: false }), 320_000);
    const silent: VideoModel = {
      ...sim,
      audio: { supported: false, default: false },
      price_micro_eur_per_second: { with_audio: null, without_audio: { '720p': 1 } },
    };
    assert.equal(generatesAudio(silent), false);
    assert.throws(() => generatesAudio(silent, { generateAudio: true }), /has no audio/);
  });
});

describe('models on several backends', () => {
  test('Veo 3.1 on Vertex AI in the EU first, then fal and Replicate (no region documented, no 4k); one video per aggregator request', () => {
    const fast = findVideoModel('veo-3.1-fast-generate-001')!;
    assert.deepEqual(
      fast.backends.map((b) => [b.backend, b.region, b.provider_model_id, b.videos_per_request, b.resolutions.join(',')]),
      [
        ['vertex', 'europe-west4', 'veo-3.1-fast-generate-001', 4, '720p,1080p,4k'],
        ['fal', 'global', 'fal-ai/veo3.1/fast', 1, '720p,1080p'],
        ['replicate', 'global', 'google/veo-3.1-fast', 1, '720p,1080p'],
      ],
    );
    assert.equal(fast.region, 'europe-west4');
    assert.equal(fast.backend, 'vertex', 'callers knowing one backend see the first');
    const fal = videoModelBackendFor('veo-3.0-fast-generate-001', 'fal')!;
    assert.equal(fal.image_endpoint, 'fal-ai/veo3.1/fast/image-to-video');
    assert.equal(fal.first_last_frame_endpoint, 'fal-ai/veo3.1/fast/first-last-frame-to-video');
    assert.equal(providerModelIdFor('veo-3.0-generate-001', 'replicate'), 'google/veo-3.1', 'a retired id resolves to its replacement');
    assert.equal(providerModelIdFor('kling-v2.5-turbo-pro', 'vertex'), undefined);
    // every aggregator model makes one video per request and n up to 4 means up to 4 requests
    for (const m of videoModels())
      for (const b of m.backends)
        if (b.backend === 'fal' || b.backend === 'replicate') assert.equal(b.videos_per_request, 1, `${m.id} on ${b.backend}`);
  });

  test('the backends serving a job: those configured, in order, serving its resolution; else the simulator when it is on', () => {
    const fast = findVideoModel('veo-3.1-fast-generate-001')!;
    const kling = findVideoModel('kling-v2.5-turbo-pro')!;
    const sim = findVideoModel('sim-video-1')!;
    assert.deepEqual(videoBackendsFor(fast, { simulator: true }), ['simulator']);
    assert.deepEqual(videoBackendsFor(fast, { simulator: false }), []);
    assert.deepEqual(videoBackendsFor(fast, { simulator: true, vertex: true, fal: true, replicate: true }), ['vertex', 'fal', 'replicate']);
    assert.deepEqual(videoBackendsFor(fast, { simulator: true, replicate: true, fal: true }), ['fal', 'replicate']);
    assert.deepEqual(
      videoBackendsFor(fast, { simulator: true, vertex: true, fal: true }, { resolution: '4k' }),
      ['vertex'],
      'only Vertex AI serves 4k',
    );
    assert.deepEqual(
      videoBackendsFor(fast, { simulator: true, fal: true }, { resolution: '4k' }),
      [],
      'configured, but none serves 4k: no stand-in',
    );
    assert.deepEqual(videoBackendsFor(kling, { simulator: false, vertex: true, replicate: true }), ['replicate']);
    assert.deepEqual(videoBackendsFor(kling, { simulator: true, vertex: true }), ['simulator']);
    assert.deepEqual(videoBackendsFor(sim, { simulator: true, vertex: true, fal: true }), ['simulator']);
    assert.equal(videoBackendFor(fast, { simulator: true, vertex: true }), 'vertex');
    assert.equal(videoBackendFor(fast, { simulator: true, vertex: false }), 'simulator');
    assert.equal(videoBackendFor(kling, { simulator: false, vertex: true }), null);
  });

  test("our price per second is above each backend's list price (USD, from the pages the file cites)", () => {
    // [model, resolution, with audio?, the highest list price per second among its backends, USD]
    const lists: [string, string, boolean, number][] = [
      ['veo-3.1-fast-generate-001', '720p', true, 0.15],
      ['veo-3.1-fast-generate-001', '1080p', false, 0.1],
      ['veo-3.1-generate-001', '720p', true, 0.4],
      ['veo-3.1-generate-001', '1080p', false, 0.2],
      ['kling-v2.5-turbo-pro', '1080p', false, 0.07],
      ['seedance-1-pro', '1080p', false, 0.15],
      ['seedance-1-pro', '720p', false, 0.06],
      ['wan-2.5', '720p', false, 0.1],
      ['wan-2.5', '1080p', false, 0.15],
      ['hailuo-02-pro', '1080p', false, 0.08],
    ];
    for (const [id, resolution, audio, usd] of lists) {
      const m = findVideoModel(id)!;
      const table = audio ? m.price_micro_eur_per_second.with_audio! : m.price_micro_eur_per_second.without_audio;
      const ours = table[resolution as '720p']!;
      // EUR is worth more than USD: a price in euros at least the dollar figure is above it.
      assert.ok(ours > usd * 1_000_000, `${id} ${resolution}: ${ours} micro-EUR/s is not above USD ${usd}/s`);
    }
  });
});

describe('validation of a models file: one line per problem, naming the file and the path in it', () => {
  const problems = (mutate: (file: any) => void): string[] => {
    const file = builtIn();
    mutate(file);
    try {
      parseCatalog(JSON.stringify(file), '/etc/video-api/models.json');
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return err.message.split('\n');
    }
    assert.fail('the file was accepted');
  };
  const cases: [string, (f: any) => void, RegExp][] = [
    [
      'a resolution without a price',
      (f) => delete f.video_models[0].price_eur_per_second.without_audio['4k'],
      /^video_models\[0\]\.price_eur_per_second\.without_audio\.4k: required: 4k is one of the model's resolutions$/,
    ],
    [
      'a price for a resolution the model does not offer',
      (f) => (f.video_models[SIM].price_eur_per_second.with_audio['4k'] = 1),
      new RegExp(`^video_models\\[${SIM}\\]\\.price_eur_per_second\\.with_audio\\.4k: 4k is not one of the model's resolutions$`),
    ],
    [
      'a price finer than a micro-euro',
      (f) => (f.video_models[1].price_eur_per_second.with_audio['720p'] = 0.1234567),
      /^video_models\[1\]\.price_eur_per_second\.with_audio\.720p: must have at most 6 decimals/,
    ],
    [
      'a negative price',
      (f) => (f.video_models[1].price_eur_per_second.with_audio['720p'] = -1),
      /^video_models\[1\]\.price_eur_per_second\.with_audio\.720p: /,
    ],
    ['an unknown resolution', (f) => (f.video_models[0].resolutions[2] = '8k'), /^video_models\[0\]\.resolutions\[2\]: Invalid option/],
    ['a misspelt key', (f) => (f.video_models[0].max_samples = 4), /^video_models\[0\]: unknown key "max_samples"$/],
    ['a missing field', (f) => delete f.video_models[1].audio, /^video_models\[1\]\.audio: required$/],
    ['an alias of nothing', (f) => (f.aliases[0].replaced_by = 'veo-4'), /^aliases\[0\]\.replaced_by: "veo-4" is not one of video_models$/],
    [
      'an unknown default model',
      (f) => (f.default_video_model = 'veo-3.0-fast-generate-001'),
      /^default_video_model: "veo-3\.0-fast-generate-001" is not one of video_models$/,
    ],
    [
      'an id used twice',
      (f) => (f.aliases[1].id = 'sim-video-1'),
      new RegExp(`^aliases\\[1\\]\\.id: "sim-video-1" is already used by video_models\\[${SIM}\\]$`),
    ],
    [
      'a default outside the limits',
      (f) => (f.video_models[0].default_params.durationSeconds = 10),
      /^video_models\[0\]\.default_params\.durationSeconds: must be one of durations_seconds \(4, 6, 8\)$/,
    ],
    [
      'a last frame without a first frame',
      (f) => (f.video_models[0].inputs.image = false),
      /^video_models\[0\]\.inputs\.last_frame: needs inputs\.image/,
    ],
    [
      'audio prices for a model without audio',
      (f) => (f.video_models[SIM].audio.supported = false),
      new RegExp(`^video_models\\[${SIM}\\]\\.audio\\.default: must be false when audio\\.supported is false$`),
    ],
    [
      'no audio prices for a model with audio',
      (f) => delete f.video_models[0].price_eur_per_second.with_audio,
      /^video_models\[0\]\.price_eur_per_second\.with_audio: required/,
    ],
    ['an unknown speech provider', (f) => (f.speech_models[0].provider = 'acme'), /^speech_models\[0\]\.provider: Invalid option/],
    [
      'a fal backend without an input map',
      (f) => delete f.video_models[2].backends[0].input,
      /^video_models\[2\]\.backends\[0\]\.input: required for fal: how the job's fields map/,
    ],
    [
      'an input map that cannot send what the model offers',
      (f) => delete f.video_models[3].backends[1].input.last_frame,
      /^video_models\[3\]\.backends\[1\]\.input\.last_frame: required: inputs\.last_frame is true$/,
    ],
    [
      'an input map for vertex',
      (f) => (f.video_models[0].backends[0].input = { prompt: 'prompt' }),
      /^video_models\[0\]\.backends\[0\]\.input: must be absent for vertex/,
    ],
    [
      'a backend listed twice',
      (f) => (f.video_models[0].backends[2].backend = 'fal'),
      /^video_models\[0\]\.backends\[2\]\.backend: "fal" is listed twice$/,
    ],
    [
      'a backend and a list of backends',
      (f) => (f.video_models[0].backend = 'vertex'),
      /^video_models\[0\]\.backend: must be absent when backends is given/,
    ],
    [
      'neither a backend nor a list',
      (f) => delete f.video_models[SIM].backend,
      new RegExp(`^video_models\\[${SIM}\\]\\.backend: required \\(or give backends\\)$`),
    ],
    [
      'a backend resolution the model lacks',
      (f) => (f.video_models[2].backends[0].resolutions = ['720p']),
      /^video_models\[2\]\.backends\[0\]\.resolutions: 720p is not one of the model's resolutions$/,
    ],
    [
      'an endpoint id that is not a path',
      (f) => (f.video_models[2].backends[0].provider_model_id = 'fal-ai/../admin'),
      /^video_models\[2\]\.backends\[0\]\.provider_model_id: must be path segments/,
    ],
    [
      'an unknown backend',
      (f) => (f.video_models[2].backends[0].backend = 'runway'),
      /^video_models\[2\]\.backends\[0\]\.backend: Invalid option/,
    ],
  ];
  for (const [name, mutate, expected] of cases) {
    test(name, () => {
      const lines = problems(mutate);
      assert.ok(lines.length >= 1);
      for (const line of lines) assert.match(line, /^models file \/etc\/video-api\/models\.json: /, 'every line names the file');
      const messages = lines.map((l) => l.slice('models file /etc/video-api/models.json: '.length));
      assert.ok(
        messages.some((m) => expected.test(m)),
        `expected ${expected} in:\n${lines.join('\n')}`,
      );
    });
  }

  test('several problems: one line each', () => {
    const lines = problems((f) => {
      f.video_models[0].max_n = 0;
      f.video_models[SIM].region = '';
    });
    assert.deepEqual(
      lines.map((l) => l.replace(/^models file \/etc\/video-api\/models\.json: /, '').replace(/: .*/, '')),
      ['video_models[0].max_n', `video_models[${SIM}].region`, 'video_models[0].default_params.n'],
    );
  });

  test('not YAML, not a file, too large', () => {
    assert.throws(
      () => parseCatalog('video_models: [', 'bad.yaml'),
      (e: Error) =>
        e instanceof ConfigError && /^models file bad\.yaml: not valid YAML or JSON: .*line 1/.test(e.message) && !e.message.includes('\n'),
    );
    assert.throws(() => readCatalogFile('/nonexistent/models.yaml'), {
      name: 'ConfigError',
      message: 'models file /nonexistent/models.yaml: cannot be read (no such file)',
    });
    assert.throws(() => readCatalogFile(path.dirname(BUILT_IN_MODELS_FILE)), /not a file/);
  });

  test('a broken MODELS_FILE stops a process at startup with that line, never a stack trace', async () => {
    const dir = fs.mkdtempSync(path.join(infra().tmp, 'models-'));
    const file = path.join(dir, 'models.yaml');
    fs.writeFileSync(file, fs.readFileSync(BUILT_IN_MODELS_FILE, 'utf8').replace('max_n: 4', 'max_n: 40'));
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/api-main.ts'], {
      env: {
        ...process.env,
        MODELS_FILE: file,
        DATABASE_URL: infra().databaseUrl,
        TEMPORAL_ADDRESS: infra().temporalAddress,
        LOG_LEVEL: 'silent',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    assert.equal(code, 1, output);
    assert.equal(output.trim(), `api: models file ${file}: video_models[0].max_n: Too big: expected number to be <=16`);
  });
});

describe("an operator's MODELS_FILE replaces the built-in catalog", () => {
  let stack: Stack;
  before(async () => {
    const dir = fs.mkdtempSync(path.join(infra().tmp, 'models-'));
    const file = path.join(dir, 'models.json');
    const own = {
      default_video_model: 'sim-basic-1',
      video_models: [
        {
          id: 'sim-basic-1',
          family: 'simulator',
          variant: 'simulated',
          owned_by: 'the-operator',
          region: 'local',
          backend: 'simulator',
          provider_model_id: 'sim-video-1',
          durations_seconds: [5],
          resolutions: ['1080p'],
          aspect_ratios: ['9:16'],
          max_n: 2,
          supports_seed: false,
          accepts_parameters: true,
          inputs: { image: false, last_frame: false, negative_prompt: false },
          audio: { supported: false, default: false },
          price_eur_per_second: { without_audio: { '1080p': 0.123457 } },
          default_params: { durationSeconds: 5, resolution: '1080p', aspectRatio: '9:16', n: 1 },
        },
      ],
      aliases: [{ id: 'sim-basic-0', replaced_by: 'sim-basic-1' }],
      speech_models: builtIn().speech_models,
    };
    fs.writeFileSync(file, JSON.stringify(own, null, 2));
    stack = await startStack({ env: { MODELS_FILE: file } });
  });
  after(async () => {
    await stack?.stop();
  });

  test('/v2/models/all serves it', async () => {
    const c = await newCustomer(stack, 10);
    const r = await http(stack.baseUrl, 'GET', '/v2/models/all', { token: c.key });
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.body.data.map((m: any) => [m.id, m.deprecated ?? null]),
      [
        ['sim-basic-1', false],
        ['sim-basic-0', true],
        ['sim-speech-1', null],
        ['eleven-multilingual-v2', null],
        ['sonic-3', null],
        ['sonic-3.5', null],
      ],
    );
    const basic = r.body.data[0];
    assert.equal(basic.owned_by, 'the-operator');
    assert.deepEqual(basic.durations_seconds, [5]);
    assert.equal(basic.supports_audio, false);
    assert.deepEqual(basic.pricing.per_second_in_euro, { '1080p': 0.123457 });
    assert.equal(basic.pricing.per_second_with_audio_in_euro, null);
  });

  test('a job on its default model, and on its alias, validated and priced from it', async () => {
    const c = await newCustomer(stack, 10);
    const created = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'p', parameters: { simulate: { delay_ms: 100 } } },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    assert.equal(created.body.model, 'sim-basic-1');
    assert.deepEqual(created.body.params, { durationSeconds: 5, resolution: '1080p', aspectRatio: '9:16', n: 1 });
    assert.equal(created.body.estimated_cost_in_euro, 0.617285); // 0.123457 EUR/s x 5 s, exact
    const aliased = await http(stack.baseUrl, 'POST', '/v2/videos/generations', {
      token: c.key,
      json: { prompt: 'p', model: 'sim-basic-0', n: 2, parameters: { simulate: { delay_ms: 100, videos: 1 } } },
    });
    assert.equal(aliased.status, 202, JSON.stringify(aliased.body));
    assert.equal(aliased.body.model, 'sim-basic-1');
    assert.equal((await waitForJob(stack, c.key, created.body.id)).status, 'succeeded');
    const shortfall = await waitForJob(stack, c.key, aliased.body.id);
    assert.equal(shortfall.cost_in_euro, 0.617285);
    assert.equal(shortfall.refunded_in_euro, 0.617285);
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000 - 2 * 617_285);
    await assertAuditHolds(stack);
  });

  test('what its model does not support is a 400 naming the field, and charges nothing', async () => {
    const c = await newCustomer(stack, 10);
    const cases: [Record<string, unknown>, string][] = [
      [{ image: imageField(pngImage(), 'image/png') }, 'image'],
      [{ generateAudio: false }, 'generateAudio'],
      [{ negativePrompt: 'blur' }, 'negativePrompt'],
      [{ seed: 1 }, 'seed'],
      [{ durationSeconds: 8 }, 'durationSeconds'],
      [{ model: 'veo-3.1-fast-generate-001' }, 'model'],
    ];
    for (const [extra, param] of cases) {
      const r = await http(stack.baseUrl, 'POST', '/v2/videos/generations', { token: c.key, json: { prompt: 'p', ...extra } });
      assert.ok(r.status === 400 || (param === 'model' && r.status === 404), `${param}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, param);
    }
    assert.equal(await balanceMicro(stack, c.workspaceId), 10_000_000);
  });
});
