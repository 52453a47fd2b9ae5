// The model catalog: what each model accepts, what it costs, and which backend serves it. Request
// validation and pricing read only from here. The data lives in a file (config/models.yaml, or the
// operator's MODELS_FILE: ./catalog-file.ts reads and validates it), loaded once per process:
// loadConfig() installs it at startup; anything asking earlier gets the same file, read on first use.
import path from 'node:path';
import { readCatalogFile } from './catalog-file.js';
import { projectPath } from '../paths.js';
import type { AspectRatio, ImageMimeType, Resolution, SpeechFormat, SpeechProvider, VideoBackend, VideoParams } from './values.js';

/** Price of one second of video by resolution, in micro-euros. */
export type PricePerSecond = Partial<Record<Resolution, number>>;

/**
 * How a job's fields become an aggregator's input (fal, Replicate): the provider's field name for each of
 * our fields; a field left out is not sent. Images are sent as data: URIs (both providers take them).
 */
export interface VideoInputMap {
  prompt: string;
  /** `integer` 5, `string` "5", `seconds_suffix` "5s". */
  duration?: { field: string; format: 'integer' | 'string' | 'seconds_suffix' } | undefined;
  resolution?: string | undefined;
  aspect_ratio?: string | undefined;
  image?: string | undefined;
  last_frame?: string | undefined;
  /** The first frame's field when a last frame is given too (fal's first-last-frame endpoints name it differently). */
  image_with_last_frame?: string | undefined;
  generate_audio?: string | undefined;
  negative_prompt?: string | undefined;
  seed?: string | undefined;
  /** Constant fields sent with every request. */
  fixed?: Readonly<Record<string, string | number | boolean>> | undefined;
}

/** One backend that can serve a model, in the model's order of preference. */
export interface VideoModelBackend {
  backend: VideoBackend;
  /** Where the backend runs the model (`europe-west4` for Vertex; fal and Replicate document none). */
  region: string;
  /** The id the backend knows: the Vertex AI publisher model, fal's endpoint id, Replicate's owner/name. */
  provider_model_id: string;
  /** Replicate: run this version (POST /v1/predictions) instead of the model's latest. */
  version?: string | undefined;
  /** fal: the endpoint for a job with a first frame, and with a first and a last frame, when not provider_model_id. */
  image_endpoint?: string | undefined;
  first_last_frame_endpoint?: string | undefined;
  /** Videos one provider request makes: n above it means n provider requests, settled per video. */
  videos_per_request: number;
  /** Resolutions this backend serves; the model's when it serves them all. */
  resolutions: readonly Resolution[];
  /** fal and Replicate only. */
  input?: VideoInputMap | undefined;
}

export interface VideoModel {
  id: string;
  kind: 'video';
  family: string;
  variant: 'standard' | 'fast' | 'simulated';
  owned_by: string;
  /** The first backend's region. */
  region: string;
  /** The first backend (what callers that know one backend read). */
  backend: VideoBackend;
  /** The first backend's model id. */
  provider_model_id: string;
  /** Every backend that can serve it, in order: when the first refuses a submission for a passing reason, the next is tried. */
  backends: readonly VideoModelBackend[];
  durations_seconds: readonly number[];
  resolutions: readonly Resolution[];
  aspect_ratios: readonly AspectRatio[];
  max_n: number;
  supports_seed: boolean;
  /** Whether `parameters` passthrough is read (the reference family ignores it). */
  accepts_parameters: boolean;
  inputs: {
    /** `image`: the first frame. */
    image: boolean;
    /** `lastFrame`, always together with `image`. */
    last_frame: boolean;
    image_mime_types: readonly ImageMimeType[];
    negative_prompt: boolean;
  };
  /** Whether `generateAudio` is accepted, and its value when a request leaves it out. */
  audio: { supported: boolean; default: boolean };
  /** with_audio: null when the model has no audio. Every resolution of the model has a price in each. */
  price_micro_eur_per_second: { with_audio: PricePerSecond | null; without_audio: PricePerSecond };
  default_params: VideoParams;
}

/** A retired id still accepted: a job naming it runs, is priced and is reported as `replaced_by`. */
export interface VideoModelAlias {
  id: string;
  replaced_by: string;
}

export interface SpeechModel {
  id: string;
  kind: 'speech';
  owned_by: string;
  /** The voice provider adapter that serves it (config VOICE_PROVIDER). */
  provider: SpeechProvider;
  region: string;
  price_micro_eur_per_1000_chars: number;
  max_input_chars: number;
  response_formats: readonly SpeechFormat[];
}

export interface Catalog {
  /** Where it was read from. */
  file: string;
  default_video_model: string;
  video_models: readonly VideoModel[];
  aliases: readonly VideoModelAlias[];
  speech_models: readonly SpeechModel[];
}

export const BUILT_IN_MODELS_FILE = projectPath('config', 'models.yaml');

let current: Catalog | undefined;

/**
 * Reads and validates a models file (the built-in one when `file` is unset) and makes it the process's
 * catalog. Throws a ConfigError (one line per problem) when the file is unusable. The same file is
 * read once.
 */
export function useCatalogFile(file: string | undefined): Catalog {
  const resolved = path.resolve(file ?? BUILT_IN_MODELS_FILE);
  if (current?.file !== resolved) current = readCatalogFile(resolved);
  return current;
}

/** The process's catalog; read on first use (MODELS_FILE, else the built-in file) if not installed yet. */
export function catalog(): Catalog {
  return current ?? useCatalogFile(process.env['MODELS_FILE'] || undefined);
}

export const videoModels = (): readonly VideoModel[] => catalog().video_models;
export const videoModelAliases = (): readonly VideoModelAlias[] => catalog().aliases;
export const speechModels = (): readonly SpeechModel[] => catalog().speech_models;
export const defaultVideoModelId = (): string => catalog().default_video_model;

/** The model an id names, a retired alias resolving to its replacement; undefined when unknown. */
export function findVideoModel(id: string): VideoModel | undefined {
  const c = catalog();
  const target = c.aliases.find((a) => a.id === id)?.replaced_by ?? id;
  return c.video_models.find((m) => m.id === target);
}

export function findSpeechModel(id: string): SpeechModel | undefined {
  return speechModels().find((m) => m.id === id);
}

/** The model used when a speech request names none: the first one of the configured provider. */
export function defaultSpeechModelFor(provider: string): SpeechModel | undefined {
  return speechModels().find((m) => m.provider === provider);
}

export interface PriceOptions {
  /** Unset: the model's default. Must be unset or false for a model without audio. */
  generateAudio?: boolean | undefined;
}

/** Whether a job of this model generates audio: the request's choice, else the model's default. */
export function generatesAudio(model: VideoModel, options: PriceOptions = {}): boolean {
  if (!model.audio.supported) {
    if (options.generateAudio) throw new Error(`invariant: model ${model.id} has no audio`);
    return false;
  }
  return options.generateAudio ?? model.audio.default;
}

/** Price of one video of these parameters, in micro-euros. */
export function unitPriceMicroEur(model: VideoModel, params: VideoParams, options: PriceOptions = {}): number {
  const prices = generatesAudio(model, options)
    ? model.price_micro_eur_per_second.with_audio
    : model.price_micro_eur_per_second.without_audio;
  const perSecond = prices?.[params.resolution];
  if (perSecond === undefined) throw new Error(`invariant: model ${model.id} has no price for ${params.resolution}`);
  return perSecond * params.durationSeconds;
}

/** What a job is charged at creation: n videos at the price of its resolution and audio setting. */
export function estimateCostMicroEur(model: VideoModel, params: VideoParams, options: PriceOptions = {}): number {
  return unitPriceMicroEur(model, params, options) * params.n;
}

/**
 * Which real backends this process has credentials for (VERTEX_PROJECT_ID, FAL_KEY, REPLICATE_API_TOKEN), and
 * SIMULATOR. One value per process (src/runtime/providers.ts, configuredBackends) is what both model lists,
 * the OpenAPI document and the create read, so what is listed is what is accepted.
 */
export type ConfiguredBackends = { simulator: boolean } & { readonly [B in Exclude<VideoBackend, 'simulator'>]?: boolean | undefined };

/**
 * The backends that can serve a job of this model, in the model's order: those configured (and, given
 * `params`, serving its resolution). When none of the model's backends is configured, the simulator
 * serves it if it is on; otherwise nothing does (an empty list).
 */
export function videoBackendsFor(
  model: VideoModel,
  configured: ConfiguredBackends,
  params?: Pick<VideoParams, 'resolution'>,
): VideoBackend[] {
  const real = model.backends.filter((b) => b.backend !== 'simulator' && configured[b.backend] === true);
  if (real.length > 0) return real.filter((b) => !params || b.resolutions.includes(params.resolution)).map((b) => b.backend);
  return configured.simulator ? ['simulator'] : [];
}

/** The first backend of videoBackendsFor, or null when nothing serves the model. */
export function videoBackendFor(model: VideoModel, configured: ConfiguredBackends): VideoBackend | null {
  return videoBackendsFor(model, configured)[0] ?? null;
}

/** The model's entry for a backend; undefined when the model does not list it. */
export function modelBackend(model: VideoModel, backend: VideoBackend): VideoModelBackend | undefined {
  return model.backends.find((b) => b.backend === backend);
}

/**
 * The id a backend knows a model by (the catalog's provider_model_id), a retired id resolving to its
 * replacement; undefined when the model is not one the backend serves.
 */
export function providerModelIdFor(id: string, backend: VideoBackend): string | undefined {
  return videoModelBackendFor(id, backend)?.provider_model_id;
}

/** The catalog's entry of a backend for a model id (a retired id resolving to its replacement); undefined when the model does not list it. */
export function videoModelBackendFor(id: string, backend: VideoBackend): VideoModelBackend | undefined {
  const m = findVideoModel(id);
  return m ? modelBackend(m, backend) : undefined;
}

/** Price of speaking `characters` characters, rounded up to a whole micro-euro. */
export function speechCostMicroEur(model: SpeechModel, characters: number): number {
  if (!(Number.isSafeInteger(characters) && characters > 0)) throw new Error(`invariant: speech of ${characters} characters`);
  return Math.ceil((characters * model.price_micro_eur_per_1000_chars) / 1000);
}
