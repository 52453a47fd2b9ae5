// The model catalog: what each model accepts, what it costs, and which backend serves it. Request
// validation and pricing read only from here. The data lives in a file (config/models.yaml, or the
// operator's MODELS_FILE: ./catalog-file.ts reads and validates it), loaded once per process:
// loadConfig() installs it at startup; anything asking earlier gets the same file, read on first use.
import path from 'node:path';
import { readCatalogFile } from './catalog-file.js';
import { projectPath } from './paths.js';

export type Resolution = '720p' | '1080p' | '4k';
export type AspectRatio = '16:9' | '9:16';
export type ImageMimeType = 'image/png' | 'image/jpeg' | 'image/webp';
export type VideoBackend = 'simulator' | 'vertex';

export const RESOLUTIONS: readonly Resolution[] = ['720p', '1080p', '4k'];
export const ASPECT_RATIOS: readonly AspectRatio[] = ['16:9', '9:16'];
export const IMAGE_MIME_TYPES: readonly ImageMimeType[] = ['image/png', 'image/jpeg', 'image/webp'];

/** Price of one second of video by resolution, in micro-euros. */
export type PricePerSecond = Partial<Record<Resolution, number>>;

export interface VideoModel {
  id: string;
  kind: 'video';
  family: string;
  variant: 'standard' | 'fast' | 'simulated';
  owned_by: string;
  region: string;
  /** The adapter that serves it: `vertex` when Vertex AI is configured (else the simulator), or `simulator` only. */
  backend: VideoBackend;
  /** The model id the backend knows (the Vertex AI publisher model). */
  provider_model_id: string;
  durations_s: readonly number[];
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
  default_params: { durationSeconds: number; resolution: Resolution; aspectRatio: AspectRatio; n: number };
}

/** A retired id still accepted: a job naming it runs, is priced and is reported as `replaced_by`. */
export interface VideoModelAlias {
  id: string;
  replaced_by: string;
}

export type SpeechResponseFormat = 'mp3' | 'opus' | 'aac' | 'flac' | 'wav' | 'pcm';

export interface SpeechModel {
  id: string;
  kind: 'speech';
  owned_by: string;
  /** The voice provider adapter that serves it (config VOICE_PROVIDER). */
  provider: 'simulator' | 'elevenlabs';
  region: string;
  price_micro_eur_per_1000_chars: number;
  max_input_chars: number;
  response_formats: readonly SpeechResponseFormat[];
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

export interface VideoParams {
  durationSeconds: number;
  resolution: Resolution;
  aspectRatio: AspectRatio;
  n: number;
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
  const prices = generatesAudio(model, options) ? model.price_micro_eur_per_second.with_audio : model.price_micro_eur_per_second.without_audio;
  const perSecond = prices?.[params.resolution];
  if (perSecond === undefined) throw new Error(`invariant: model ${model.id} has no price for ${params.resolution}`);
  return perSecond * params.durationSeconds;
}

/** What a job is charged at creation: n videos at the price of its resolution and audio setting. */
export function estimateCostMicroEur(model: VideoModel, params: VideoParams, options: PriceOptions = {}): number {
  return unitPriceMicroEur(model, params, options) * params.n;
}

/**
 * Which backend serves a model. A `vertex` model goes to Vertex AI when it is configured; until then
 * it is served by the simulator when that is on (contract.md 5); with neither, nothing.
 */
export function videoBackendFor(model: VideoModel, opts: { simulator: boolean; vertex: boolean }): VideoBackend | null {
  if (model.backend === 'vertex' && opts.vertex) return 'vertex';
  return opts.simulator ? 'simulator' : null;
}

/**
 * The id a backend knows a model by (the catalog's provider_model_id), a retired id resolving to its
 * replacement; undefined when the model is not one the backend serves.
 */
export function providerModelIdFor(id: string, backend: VideoBackend): string | undefined {
  const m = findVideoModel(id);
  return m?.backend === backend ? m.provider_model_id : undefined;
}

/** Price of speaking `characters` characters, rounded up to a whole micro-euro. */
export function speechCostMicroEur(model: SpeechModel, characters: number): number {
  if (!(Number.isSafeInteger(characters) && characters > 0)) throw new Error(`invariant: speech of ${characters} characters`);
  return Math.ceil((characters * model.price_micro_eur_per_1000_chars) / 1000);
}
