// Reads a models file (config/models.yaml, or the operator's MODELS_FILE; YAML or JSON) into a Catalog,
// validated with zod: every problem becomes one line naming the file, the path in it and what is wrong,
// thrown together as one ConfigError, so a bad file stops the process at startup, never a request later.
import fs from 'node:fs';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { ConfigError } from './config-error.js';
import { eurToMicroEur } from './money.js';
import type { Catalog, PricePerSecond, Resolution, SpeechModel, VideoModel } from './catalog.js';

/** Limits on the file itself. */
const MAX_FILE_BYTES = 1024 * 1024;
const MAX_ENTRIES = 200;
/** Problems listed before "... and N more". */
const MAX_REPORTED = 20;

const Id = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'must be 1 to 100 letters, digits, ".", "_" or "-"');
const Label = z.string().trim().min(1).max(100);
const euros = (max: number) =>
  z
    .number()
    .nonnegative()
    .max(max)
    .refine((v) => eurToMicroEur(v) !== null, 'must have at most 6 decimals (whole micro-euros)');
const Resolution = z.enum(['720p', '1080p', '4k']);
const AspectRatio = z.enum(['16:9', '9:16']);
const PriceTable = z.partialRecord(Resolution, euros(100));
const distinct = <T extends z.ZodType>(item: T, max: number) =>
  z
    .array(item)
    .min(1)
    .max(max)
    .refine((a) => new Set(a).size === a.length, 'must not repeat a value');

const VideoModelEntry = z.strictObject({
  id: Id,
  family: Label,
  variant: z.enum(['standard', 'fast', 'simulated']),
  owned_by: Label,
  region: Label,
  backend: z.enum(['simulator', 'vertex']),
  provider_model_id: Id,
  durations_seconds: distinct(z.int().min(1).max(60), 20),
  resolutions: distinct(Resolution, 3),
  aspect_ratios: distinct(AspectRatio, 2),
  max_n: z.int().min(1).max(16),
  supports_seed: z.boolean(),
  accepts_parameters: z.boolean(),
  inputs: z.strictObject({
    image: z.boolean(),
    last_frame: z.boolean(),
    image_mime_types: z.array(z.enum(['image/png', 'image/jpeg', 'image/webp'])).max(3).default([]),
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
  provider: z.enum(['simulator', 'elevenlabs']),
  region: Label,
  price_eur_per_1000_chars: euros(1_000),
  max_input_chars: z.int().min(1).max(100_000),
  response_formats: distinct(z.enum(['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm']), 6),
});

const CatalogFile = z
  .strictObject({
    default_video_model: Id,
    video_models: z.array(VideoModelEntry).min(1).max(MAX_ENTRIES),
    aliases: z.array(AliasEntry).max(MAX_ENTRIES).default([]),
    speech_models: z.array(SpeechModelEntry).max(MAX_ENTRIES).default([]),
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
      if (!file.video_models.some((m) => m.id === a.replaced_by)) problem(['aliases', i, 'replaced_by'], `"${a.replaced_by}" is not one of video_models`);
    });
    file.speech_models.forEach((m, i) => claim(m.id, ['speech_models', i]));
    if (!file.video_models.some((m) => m.id === file.default_video_model)) {
      problem(['default_video_model'], `"${file.default_video_model}" is not one of video_models`);
    }
  });

function checkVideoModel(m: VideoModelEntry, at: (string | number)[], problem: (path: (string | number)[], message: string) => void): void {
  const d = m.default_params;
  if (!m.durations_seconds.includes(d.durationSeconds)) problem([...at, 'default_params', 'durationSeconds'], `must be one of durations_seconds (${m.durations_seconds.join(', ')})`);
  if (!m.resolutions.includes(d.resolution)) problem([...at, 'default_params', 'resolution'], `must be one of resolutions (${m.resolutions.join(', ')})`);
  if (!m.aspect_ratios.includes(d.aspectRatio)) problem([...at, 'default_params', 'aspectRatio'], `must be one of aspect_ratios (${m.aspect_ratios.join(', ')})`);
  if (!(d.n >= 1 && d.n <= m.max_n)) problem([...at, 'default_params', 'n'], `must be between 1 and max_n (${m.max_n})`);
  if (m.inputs.last_frame && !m.inputs.image) problem([...at, 'inputs', 'last_frame'], 'needs inputs.image: a last frame goes with a first frame');
  if (m.inputs.image && m.inputs.image_mime_types.length === 0) problem([...at, 'inputs', 'image_mime_types'], 'must list at least one type when inputs.image is true');
  if (!m.audio.supported && m.audio.default) problem([...at, 'audio', 'default'], 'must be false when audio.supported is false');
  const tables: [string, PricePerSecond | undefined][] = [['without_audio', m.price_eur_per_second.without_audio]];
  if (m.audio.supported) tables.push(['with_audio', m.price_eur_per_second.with_audio]);
  else if (m.price_eur_per_second.with_audio) problem([...at, 'price_eur_per_second', 'with_audio'], 'must be absent when audio.supported is false');
  for (const [name, table] of tables) {
    const where = [...at, 'price_eur_per_second', name];
    if (!table) {
      problem(where, 'required: a price for each resolution (audio.supported is true)');
      continue;
    }
    for (const r of m.resolutions) if (table[r] === undefined) problem([...where, r], `required: ${r} is one of the model's resolutions`);
    for (const r of Object.keys(table)) if (!m.resolutions.includes(r as Resolution)) problem([...where, r], `${r} is not one of the model's resolutions`);
  }
}

function microTable(table: PricePerSecond): PricePerSecond {
  return Object.fromEntries(Object.entries(table).map(([r, eur]) => [r, eurToMicroEur(eur)!]));
}

function toCatalog(file: string, parsed: z.infer<typeof CatalogFile>): Catalog {
  const video_models: VideoModel[] = parsed.video_models.map((m) => ({
    id: m.id,
    kind: 'video',
    family: m.family,
    variant: m.variant,
    owned_by: m.owned_by,
    region: m.region,
    backend: m.backend,
    provider_model_id: m.provider_model_id,
    durations_s: m.durations_seconds,
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
  }));
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
  if (issue.code === 'unrecognized_keys') return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
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
    const shown = lines.slice(0, MAX_REPORTED).map((l) => `models file ${file}: ${l}`);
    if (lines.length > MAX_REPORTED) shown.push(`models file ${file}: ... and ${lines.length - MAX_REPORTED} more problems`);
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
    if (stat.size > MAX_FILE_BYTES) throw new ConfigError(`models file ${file}: larger than ${MAX_FILE_BYTES} bytes`);
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(`models file ${file}: cannot be read (${code === 'ENOENT' ? 'no such file' : (code ?? (err as Error).message)})`);
  }
  return parseCatalog(text, file);
}
