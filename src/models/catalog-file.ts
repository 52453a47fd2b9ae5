// Reads a models file (config/models.yaml, or the operator's MODELS_FILE; YAML or JSON) into a Catalog,
// validated with zod: every problem becomes one line naming the file, the path in it and what is wrong,
// thrown together as one ConfigError, so a bad file stops the process at startup, never a request later.
import fs from 'node:fs';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { ConfigError } from '../config-error.js';
import { eurToMicroEur } from '../money.js';
import type { Catalog, PricePerSecond, SpeechModel, VideoModel, VideoModelBackend } from './catalog-types.js';
import {
  ASPECT_RATIOS,
  ENDPOINT_PER_INPUT_BACKEND,
  MAPPED_INPUT_BACKENDS,
  RESOLUTIONS,
  SPEECH_FORMATS,
  SPEECH_PROVIDERS,
  VERSIONED_BACKEND,
  VIDEO_BACKENDS,
  type Resolution,
} from './values.js';

/** Limits on the file itself. */
const FILE_BYTES_MAX = 1024 * 1024;
const ENTRIES_MAX = 200;
/** Problems listed before "... and N more". */
const REPORTED_MAX = 20;

const Id = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'must be 1 to 100 letters, digits, ".", "_" or "-"');
const Label = z.string().trim().min(1).max(100);
const euros = (max: number) =>
  z
    .number()
    .nonnegative()
    .max(max)
    .refine((v) => eurToMicroEur(v) !== null, 'must have at most 6 decimals (whole micro-euros)');
const Resolution = z.enum(RESOLUTIONS);
const AspectRatio = z.enum(ASPECT_RATIOS);
const PriceTable = z.partialRecord(Resolution, euros(100));
const distinct = <T extends z.ZodType>(item: T, max: number) =>
  z
    .array(item)
    .min(1)
    .max(max)
    .refine((a) => new Set(a).size === a.length, 'must not repeat a value');

/** A provider's model or endpoint id: `veo-3.1-generate-001`, `fal-ai/veo3.1/fast`, `google/veo-3.1`. */
const ProviderModelId = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]*(?:\/[A-Za-z0-9][A-Za-z0-9._-]*){0,7}$/,
    'must be path segments of letters, digits, ".", "_" or "-" separated by "/"',
  )
  .max(200);
/** A provider's input field name. */
const Field = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be a field name (letters, digits, "_")');
const BackendName = z.enum(VIDEO_BACKENDS);

const InputMapEntry = z.strictObject({
  prompt: Field,
  duration: z.strictObject({ field: Field, format: z.enum(['integer', 'string', 'seconds_suffix']) }).optional(),
  resolution: Field.optional(),
  aspect_ratio: Field.optional(),
  image: Field.optional(),
  last_frame: Field.optional(),
  image_with_last_frame: Field.optional(),
  generate_audio: Field.optional(),
  negative_prompt: Field.optional(),
  seed: Field.optional(),
  fixed: z
    .record(Field, z.union([z.string().max(200), z.number(), z.boolean()]))
    .refine((r) => Object.keys(r).length <= 20, 'at most 20 fields')
    .optional(),
});

const BackendEntry = z.strictObject({
  backend: BackendName,
  region: Label,
  provider_model_id: ProviderModelId,
  version: z
    .string()
    .regex(/^[a-f0-9]{64}$/, 'must be a Replicate version id (64 hex digits)')
    .optional(),
  image_endpoint: ProviderModelId.optional(),
  first_last_frame_endpoint: ProviderModelId.optional(),
  videos_per_request: z.int().min(1).max(16).optional(),
  resolutions: distinct(Resolution, 3).optional(),
  input: InputMapEntry.optional(),
});
type BackendEntry = z.infer<typeof BackendEntry>;

const VideoModelEntry = z.strictObject({
  id: Id,
  family: Label,
  variant: z.enum(['standard', 'fast', 'simulated']),
  owned_by: Label,
  // One backend (backend, provider_model_id, region), or an ordered list of them (backends).
  region: Label.optional(),
  backend: BackendName.optional(),
  provider_model_id: ProviderModelId.optional(),
  backends: z.array(BackendEntry).min(1).max(8).optional(),
  durations_seconds: distinct(z.int().min(1).max(60), 20),
  resolutions: distinct(Resolution, 3),
  aspect_ratios: distinct(AspectRatio, 2),
  max_n: z.int().min(1).max(16),
  supports_seed: z.boolean(),
  accepts_parameters: z.boolean(),
  inputs: z.strictObject({
    image: z.boolean(),
    last_frame: z.boolean(),
    image_mime_types: z
      .array(z.enum(['image/png', 'image/jpeg', 'image/webp']))
      .max(3)
      .default([]),
    negative_prompt: z.boolean(),
  }),
  audio: z.strictObject({ supported: z.boolean(), default: z.boolean() }),
  price_eur_per_second: z.strictObject({ with_audio: PriceTable.optional(), without_audio: PriceTable }),
  default_params: z.strictObject({ durationSeconds: z.int(), resolution: Resolution, aspectRatio: AspectRatio, n: z.int() }),
});
type VideoModelEntry = z.infer<typeof VideoModelEntry>;

const AliasEntry = z.strictObject({ id: Id, replaced_by: Id });

const SpeechModelEntry = z.strictObject({
  id: Id,
  owned_by: Label,
  provider: z.enum(SPEECH_PROVIDERS),
  region: Label,
  price_eur_per_1000_chars: euros(1_000),
  max_input_chars: z.int().min(1).max(100_000),
  response_formats: distinct(z.enum(SPEECH_FORMATS), SPEECH_FORMATS.length),
});

const CatalogFile = z
  .strictObject({
    default_video_model: Id,
    video_models: z.array(VideoModelEntry).min(1).max(ENTRIES_MAX),
    aliases: z.array(AliasEntry).max(ENTRIES_MAX).default([]),
    speech_models: z.array(SpeechModelEntry).max(ENTRIES_MAX).default([]),
  })
  .superRefine((file, ctx) => {
    const problem = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    const seen = new Map<string, string>();
    const claim = (id: string, where: (string | number)[]) => {
      const first = seen.get(id);
      if (first) problem([...where, 'id'], `"${id}" is already used by ${first}`);
      else seen.set(id, formatPath(where));
    };
    file.video_models.forEach((m, i) => {
      claim(m.id, ['video_models', i]);
      checkVideoModel(m, ['video_models', i], problem);
    });
    file.aliases.forEach((a, i) => {
      claim(a.id, ['aliases', i]);
      if (!file.video_models.some((m) => m.id === a.replaced_by))
        problem(['aliases', i, 'replaced_by'], `"${a.replaced_by}" is not one of video_models`);
    });
    file.speech_models.forEach((m, i) => claim(m.id, ['speech_models', i]));
    if (!file.video_models.some((m) => m.id === file.default_video_model)) {
      problem(['default_video_model'], `"${file.default_video_model}" is not one of video_models`);
    }
  });

type Problem = (path: (string | number)[], message: string) => void;

function checkVideoModel(m: VideoModelEntry, at: (string | number)[], problem: Problem): void {
  checkBackends(m, at, problem);
  const d = m.default_params;
  if (!m.durations_seconds.includes(d.durationSeconds))
    problem([...at, 'default_params', 'durationSeconds'], `must be one of durations_seconds (${m.durations_seconds.join(', ')})`);
  if (!m.resolutions.includes(d.resolution))
    problem([...at, 'default_params', 'resolution'], `must be one of resolutions (${m.resolutions.join(', ')})`);
  if (!m.aspect_ratios.includes(d.aspectRatio))
    problem([...at, 'default_params', 'aspectRatio'], `must be one of aspect_ratios (${m.aspect_ratios.join(', ')})`);
  if (!(d.n >= 1 && d.n <= m.max_n)) problem([...at, 'default_params', 'n'], `must be between 1 and max_n (${m.max_n})`);
  if (m.inputs.last_frame && !m.inputs.image)
    problem([...at, 'inputs', 'last_frame'], 'needs inputs.image: a last frame goes with a first frame');
  if (m.inputs.image && m.inputs.image_mime_types.length === 0)
    problem([...at, 'inputs', 'image_mime_types'], 'must list at least one type when inputs.image is true');
  if (!m.audio.supported && m.audio.default) problem([...at, 'audio', 'default'], 'must be false when audio.supported is false');
  const tables: [string, PricePerSecond | undefined][] = [['without_audio', m.price_eur_per_second.without_audio]];
  if (m.audio.supported) tables.push(['with_audio', m.price_eur_per_second.with_audio]);
  else if (m.price_eur_per_second.with_audio)
    problem([...at, 'price_eur_per_second', 'with_audio'], 'must be absent when audio.supported is false');
  for (const [name, table] of tables) {
    const where = [...at, 'price_eur_per_second', name];
    if (!table) {
      problem(where, 'required: a price for each resolution (audio.supported is true)');
      continue;
    }
    for (const r of m.resolutions) if (table[r] === undefined) problem([...where, r], `required: ${r} is one of the model's resolutions`);
    for (const r of Object.keys(table))
      if (!m.resolutions.includes(r as Resolution)) problem([...where, r], `${r} is not one of the model's resolutions`);
  }
}

/** The model's backends: the `backends` list, or the one of `backend`/`provider_model_id`/`region`. */
function backendEntries(m: VideoModelEntry): BackendEntry[] {
  if (m.backends) return m.backends;
  return [{ backend: m.backend ?? 'simulator', provider_model_id: m.provider_model_id ?? m.id, region: m.region ?? 'local' }];
}

/** Aggregators take a mapped input; Vertex AI and the simulator take the job as it is. */
const MAPPED_BACKENDS = new Set<string>(MAPPED_INPUT_BACKENDS);

function checkBackends(m: VideoModelEntry, at: (string | number)[], problem: Problem): void {
  if (m.backends) {
    for (const key of ['backend', 'provider_model_id', 'region'] as const) {
      if (m[key] !== undefined) problem([...at, key], 'must be absent when backends is given (each backend names its own)');
    }
  } else {
    for (const key of ['backend', 'provider_model_id', 'region'] as const)
      if (m[key] === undefined) problem([...at, key], 'required (or give backends)');
    return;
  }
  const seen = new Set<string>();
  m.backends.forEach((b, i) => {
    const where = [...at, 'backends', i];
    if (seen.has(b.backend)) problem([...where, 'backend'], `"${b.backend}" is listed twice`);
    seen.add(b.backend);
    for (const r of b.resolutions ?? [])
      if (!m.resolutions.includes(r)) problem([...where, 'resolutions'], `${r} is not one of the model's resolutions`);
    if (b.videos_per_request !== undefined && b.videos_per_request > m.max_n)
      problem([...where, 'videos_per_request'], `must be at most max_n (${m.max_n})`);
    if (b.version !== undefined && b.backend !== VERSIONED_BACKEND)
      problem([...where, 'version'], `only a ${VERSIONED_BACKEND} backend has a version`);
    if ((b.image_endpoint ?? b.first_last_frame_endpoint) !== undefined && b.backend !== ENDPOINT_PER_INPUT_BACKEND)
      problem([...where, 'image_endpoint'], `only a ${ENDPOINT_PER_INPUT_BACKEND} backend has endpoints per input`);
    if (!MAPPED_BACKENDS.has(b.backend)) {
      if (b.input) problem([...where, 'input'], `must be absent for ${b.backend} (it takes the job's fields as they are)`);
      return;
    }
    if (!b.input) {
      problem([...where, 'input'], `required for ${b.backend}: how the job's fields map to the model's input`);
      return;
    }
    // Whatever the model offers must reach the provider: a field it cannot send is a mistake in the file.
    const needs: [keyof NonNullable<BackendEntry['input']>, boolean, string][] = [
      ['duration', m.durations_seconds.length > 1, 'the model has several durations'],
      ['resolution', (b.resolutions ?? m.resolutions).length > 1, 'the backend serves several resolutions'],
      ['aspect_ratio', m.aspect_ratios.length > 1, 'the model has several aspect ratios'],
      ['image', m.inputs.image, 'inputs.image is true'],
      ['last_frame', m.inputs.last_frame, 'inputs.last_frame is true'],
      ['generate_audio', m.audio.supported, 'audio.supported is true'],
      ['negative_prompt', m.inputs.negative_prompt, 'inputs.negative_prompt is true'],
      ['seed', m.supports_seed, 'supports_seed is true'],
    ];
    for (const [field, needed, why] of needs)
      if (needed && b.input[field] === undefined) problem([...where, 'input', field], `required: ${why}`);
  });
}

function toBackend(m: VideoModelEntry, b: BackendEntry): VideoModelBackend {
  return {
    backend: b.backend,
    region: b.region,
    provider_model_id: b.provider_model_id,
    ...(b.version !== undefined ? { version: b.version } : {}),
    ...(b.image_endpoint !== undefined ? { image_endpoint: b.image_endpoint } : {}),
    ...(b.first_last_frame_endpoint !== undefined ? { first_last_frame_endpoint: b.first_last_frame_endpoint } : {}),
    // Vertex AI and the simulator make up to max_n videos per request; the aggregators' models one unless told.
    videos_per_request: b.videos_per_request ?? (MAPPED_BACKENDS.has(b.backend) ? 1 : m.max_n),
    resolutions: b.resolutions ?? m.resolutions,
    ...(b.input ? { input: b.input } : {}),
  };
}

function microTable(table: PricePerSecond): PricePerSecond {
  return Object.fromEntries(Object.entries(table).map(([r, eur]) => [r, eurToMicroEur(eur)!]));
}

function toCatalog(file: string, parsed: z.infer<typeof CatalogFile>): Catalog {
  const video_models: VideoModel[] = parsed.video_models.map((m) => {
    const backends = backendEntries(m).map((b) => toBackend(m, b));
    return {
      id: m.id,
      kind: 'video',
      family: m.family,
      variant: m.variant,
      owned_by: m.owned_by,
      region: backends[0]!.region,
      backend: backends[0]!.backend,
      provider_model_id: backends[0]!.provider_model_id,
      backends,
      durations_seconds: m.durations_seconds,
      resolutions: m.resolutions,
      aspect_ratios: m.aspect_ratios,
      max_n: m.max_n,
      supports_seed: m.supports_seed,
      accepts_parameters: m.accepts_parameters,
      inputs: m.inputs,
      audio: m.audio,
      price_micro_eur_per_second: {
        with_audio: m.audio.supported && m.price_eur_per_second.with_audio ? microTable(m.price_eur_per_second.with_audio) : null,
        without_audio: microTable(m.price_eur_per_second.without_audio),
      },
      default_params: m.default_params,
    } satisfies VideoModel;
  });
  const speech_models: SpeechModel[] = parsed.speech_models.map((m) => ({
    id: m.id,
    kind: 'speech',
    owned_by: m.owned_by,
    provider: m.provider,
    region: m.region,
    price_micro_eur_per_1000_chars: eurToMicroEur(m.price_eur_per_1000_chars)!,
    max_input_chars: m.max_input_chars,
    response_formats: m.response_formats,
  }));
  return { file, default_video_model: parsed.default_video_model, video_models, aliases: parsed.aliases, speech_models };
}

/** `video_models[0].price_eur_per_second.with_audio.4k` */
export function formatPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

function describeIssue(issue: z.core.$ZodIssue, data: unknown): string {
  if (issue.code === 'unrecognized_keys')
    return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (issue.code !== 'custom' && valueAt(data, issue.path) === undefined) return 'required';
  return issue.message;
}

function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let v = data;
  for (const key of path) v = v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[key] : undefined;
  return v;
}

/** Parses the text of a models file; `file` only names it in errors. */
export function parseCatalog(text: string, file: string): Catalog {
  const fail = (lines: string[]): never => {
    const shown = lines.slice(0, REPORTED_MAX).map((l) => `models file ${file}: ${l}`);
    if (lines.length > REPORTED_MAX) shown.push(`models file ${file}: ... and ${lines.length - REPORTED_MAX} more problems`);
    throw new ConfigError(shown.join('\n'));
  };
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) fail(doc.errors.map((e) => `not valid YAML or JSON: ${e.message.split('\n')[0]}`));
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    fail([`not valid YAML or JSON: ${(err as Error).message.split('\n')[0]}`]);
  }
  const parsed = CatalogFile.safeParse(data);
  if (!parsed.success) {
    fail(parsed.error.issues.map((issue) => `${formatPath(issue.path) || '(top level)'}: ${describeIssue(issue, data)}`));
  }
  return toCatalog(file, parsed.data!);
}

/** Reads and parses a models file. */
export function readCatalogFile(file: string): Catalog {
  let text: string;
  try {
    const stat = fs.statSync(file);
    if (!stat.isFile()) throw new ConfigError(`models file ${file}: not a file (MODELS_FILE must name a YAML or JSON file)`);
    if (stat.size > FILE_BYTES_MAX) throw new ConfigError(`models file ${file}: larger than ${FILE_BYTES_MAX} bytes`);
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(`models file ${file}: cannot be read (${code === 'ENOENT' ? 'no such file' : (code ?? (err as Error).message)})`);
  }
  return parseCatalog(text, file);
}
