// The request bodies whose constraints depend on the model, stated per model in the OpenAPI document:
// built from the catalog this process runs with (read through its exported arrays and functions) and
// what serves each model here, on top of the zod-generated schema of the body. A client (or a fuzzer)
// that follows a variant sends a request the server accepts; one that follows none is refused (4xx).
import {
  defaultSpeechModelFor,
  defaultVideoModelId,
  findVideoModel,
  speechModels,
  videoBackendFor,
  videoModelAliases,
  videoModels,
  type SpeechModel,
  type VideoModel,
} from './catalog.js';
import { IMAGE_BYTES_MAX, SPEECH_FORMATS } from './values.js';
import { imageInputSchema } from './openapi-images.js';
import type { ModelAvailability } from '../http/openapi.js';

type JsonSchema = Record<string, unknown>;
type ObjectSchema = JsonSchema & { properties: Record<string, JsonSchema>; required?: string[] };

/** The JSON Schema of the simulator's `parameters.simulate` (src/providers/video/simulator.ts). */
export type SimulateJsonSchema = ObjectSchema;

const without = (props: Record<string, JsonSchema>, ...names: string[]) =>
  Object.fromEntries(Object.entries(props).filter(([k]) => !names.includes(k)));

function variant(title: string, properties: Record<string, JsonSchema>, required: string[], extra: JsonSchema = {}): JsonSchema {
  return { title, type: 'object', properties, required: [...new Set(required)], additionalProperties: false, ...extra };
}

/** The inputs a model may take beyond the common fields: its images, audio switch, negative prompt. */
function inputProperties(p: Record<string, JsonSchema>, m: VideoModel): Record<string, JsonSchema> {
  const frame = (what: string, description: JsonSchema | undefined) =>
    imageInputSchema(
      m.inputs.image_mime_types,
      IMAGE_BYTES_MAX,
      `${what} (${m.inputs.image_mime_types.join(', ')}). ${String(description?.['description'] ?? '')}`.trim(),
    );
  return {
    ...(m.inputs.image ? { image: frame('The first frame', p['image']) } : {}),
    ...(m.inputs.last_frame ? { lastFrame: frame('The last frame, with image', p['lastFrame']) } : {}),
    ...(m.audio.supported && p['generateAudio']
      ? {
          generateAudio: {
            ...p['generateAudio'],
            description: `Whether the videos have sound; default ${m.audio.default}. The price depends on it.`,
          },
        }
      : {}),
    ...(m.inputs.negative_prompt && p['negativePrompt'] ? { negativePrompt: p['negativePrompt'] } : {}),
  };
}

/**
 * The variants of one video model: `modelGiven` false is the request without `model` (the default
 * model). A model whose `parameters.simulate` the simulator reads has one variant per `n` (and one
 * without `n`), since `simulate.videos` may not exceed n.
 */
function videoVariants(
  base: ObjectSchema,
  m: VideoModel,
  simulate: SimulateJsonSchema | null,
  modelGiven: boolean,
  alias?: string,
): JsonSchema[] {
  const p = base.properties;
  const d = m.default_params;
  const id = alias ?? m.id;
  const props: Record<string, JsonSchema> = {
    ...without(p, 'model', 'seed', 'n', 'image', 'lastFrame', 'generateAudio', 'negativePrompt'),
    ...(modelGiven ? { model: { type: 'string', const: id, description: p['model']?.['description'] } } : {}),
    durationSeconds: { type: 'integer', enum: [...m.durations_seconds], description: `Seconds per video; default ${d.durationSeconds}.` },
    resolution: { type: 'string', enum: [...m.resolutions], description: `Default ${d.resolution}.` },
    aspectRatio: { type: 'string', enum: [...m.aspect_ratios], description: `Default ${d.aspectRatio}.` },
    ...(m.supports_seed && p['seed'] ? { seed: p['seed'] } : {}),
    ...inputProperties(p, m),
  };
  const required = [...(base.required ?? []), ...(modelGiven ? ['model'] : [])];
  const extra = m.inputs.last_frame ? { dependentRequired: { lastFrame: ['image'] } } : {};
  const title = !modelGiven ? `no model: the default, ${m.id}` : alias ? `${alias} (retired: runs as ${m.id})` : m.id;
  const nSchema = { type: 'integer', minimum: 1, maximum: m.max_n, description: `Videos to generate; default ${d.n}.` };
  if (!simulate) return [variant(title, { ...props, n: nSchema }, required, extra)];

  const withSimulate = (n: number): JsonSchema => {
    const videos = simulate.properties['videos'] ?? {};
    const max = typeof videos['maximum'] === 'number' ? Math.min(videos['maximum'], n) : n;
    return {
      type: 'object',
      description: p['parameters']?.['description'],
      properties: {
        simulate: {
          ...simulate,
          properties: { ...simulate.properties, videos: { ...videos, maximum: max, description: `Videos delivered, at most n (${n}).` } },
        },
      },
      additionalProperties: {},
    };
  };
  const counts = Array.from({ length: m.max_n }, (_, i) => i + 1);
  return [
    variant(`${title}, n absent (${d.n})`, { ...props, parameters: withSimulate(d.n) }, required, extra),
    ...counts.map((n) =>
      variant(`${title}, n = ${n}`, { ...props, n: { ...nSchema, const: n }, parameters: withSimulate(n) }, [...required, 'n'], extra),
    ),
  ];
}

/**
 * POST /v2/videos/generations: one variant per video model served here, per retired id that runs as one
 * of them, and the default model's without `model`.
 */
export function videoBodySchema(base: ObjectSchema, avail: ModelAvailability, simulate: SimulateJsonSchema): JsonSchema {
  const served = videoModels()
    .map((m) => ({ m, backend: videoBackendFor(m, avail.backends) }))
    .filter((x) => x.backend !== null);
  if (served.length === 0) return base;
  const simulateOf = (m: VideoModel, backend: string | null) => (backend === 'simulator' && m.accepts_parameters ? simulate : null);
  const variants = served.flatMap(({ m, backend }) => videoVariants(base, m, simulateOf(m, backend), true));
  for (const alias of videoModelAliases()) {
    const m = findVideoModel(alias.replaced_by);
    const backend = m ? videoBackendFor(m, avail.backends) : null;
    if (m && backend) variants.push(...videoVariants(base, m, simulateOf(m, backend), true, alias.id));
  }
  const defaultId = defaultVideoModelId();
  const def = findVideoModel(defaultId);
  const defBackend = def ? videoBackendFor(def, avail.backends) : null;
  if (def && defBackend) variants.push(...videoVariants(base, def, simulateOf(def, defBackend), false));
  return {
    description:
      `${base['description'] ?? 'A video generation request.'} One variant per model served here (GET ` +
      `/v2/models/all), with its limits and inputs; without \`model\`, the default model's (${defaultId}).`,
    oneOf: variants,
  };
}

function speechVariant(base: ObjectSchema, m: SpeechModel, modelGiven: boolean): JsonSchema {
  const p = base.properties;
  return variant(
    modelGiven ? m.id : `no model: the default, ${m.id}`,
    {
      ...without(p, 'model'),
      ...(modelGiven ? { model: { type: 'string', const: m.id, description: p['model']?.['description'] } } : {}),
      input: { ...p['input'], maxLength: m.max_input_chars },
      response_format: { ...p['response_format'], enum: [...m.response_formats] },
    },
    [...(base.required ?? []), ...(modelGiven ? ['model'] : [])],
  );
}

/** `timestamps` (where the body has it) needs `stream_format: "sse"`: the timings are events of the stream. */
function timestampsNeedSse(base: ObjectSchema): JsonSchema {
  if (!base.properties['timestamps']) return {};
  return { dependentSchemas: { timestamps: { required: ['stream_format'], properties: { stream_format: { const: 'sse' } } } } };
}

/** POST /v2/audio/speech: one variant per speech model of the configured voice providers, and one without `model`. */
export function speechBodySchema(base: ObjectSchema, avail: ModelAvailability): JsonSchema {
  const served = speechModels().filter((m) => avail.voiceProviders.includes(m.provider));
  const defaults = avail.voiceProviders.map((p) => defaultSpeechModelFor(p)).filter((m) => m !== undefined);
  if (served.length === 0 || defaults.length === 0) return { ...base, ...timestampsNeedSse(base) };
  // Without `model`, the default model of the voice's provider speaks: the widest of their limits.
  const def: SpeechModel = {
    ...defaults[0]!,
    max_input_chars: Math.max(...defaults.map((m) => m.max_input_chars)),
    response_formats: SPEECH_FORMATS.filter((f) => defaults.some((m) => m.response_formats.includes(f))),
  };
  return {
    description:
      'A text-to-speech request. One variant per speech model of the configured voice providers (GET ' +
      "/v2/models), with its limits; without `model`, the default model of the voice's provider.",
    oneOf: [...served.map((m) => speechVariant(base, m, true)), speechVariant(base, def, false)],
    ...timestampsNeedSse(base),
  };
}

/** POST /admin/v1/workspaces/{id}/api-keys: `models` names catalog models (any, served here or not). */
export function apiKeyBodySchema(base: ObjectSchema): JsonSchema {
  const models = base.properties['models'];
  if (!models) return base;
  const ids = [...videoModels().map((m) => m.id), ...videoModelAliases().map((a) => a.id), ...speechModels().map((m) => m.id)];
  return {
    ...base,
    properties: {
      ...base.properties,
      models: {
        ...models,
        items: { type: 'string', enum: ids },
        description: 'Model ids of the catalog (GET /v2/models/all) the key may use; absent: all.',
      },
    },
  };
}

/** An example request (shown by /docs, sent by "Try it out"): the first model served here, with its defaults. */
export function videoBodyExample(avail: ModelAvailability): Record<string, unknown> | undefined {
  const m = findVideoModel(defaultVideoModelId()) ?? videoModels().find((x) => videoBackendFor(x, avail.backends) !== null);
  if (m && videoBackendFor(m, avail.backends) === null) return undefined;
  if (!m) return undefined;
  return { prompt: 'a lighthouse at dusk, waves crashing', model: m.id, durationSeconds: m.default_params.durationSeconds, n: 1 };
}

/** An example speech request: the configured provider's default model, with a preset voice of the simulator. */
export function speechBodyExample(avail: ModelAvailability): Record<string, unknown> | undefined {
  const m = avail.voiceProviders[0] === undefined ? undefined : defaultSpeechModelFor(avail.voiceProviders[0]);
  if (!m) return undefined;
  return {
    input: 'Hello from a cloned voice.',
    model: m.id,
    voice: avail.exampleVoice ?? '<voice_id of one of your voices>',
  };
}
