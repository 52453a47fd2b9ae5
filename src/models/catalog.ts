// The model catalog: what each model accepts, what it costs, and which backend serves it. Request
// validation and pricing read only from here. The data lives in a file (config/models.yaml, or the
// operator's MODELS_FILE: ./catalog-file.ts reads and validates it), loaded once per process:
// loadConfig() installs it at startup; anything asking earlier gets the same file, read on first use.
import path from 'node:path';
import { readCatalogFile } from './catalog-file.js';
import { projectPath } from '../paths.js';
import type { Catalog, SpeechModel, VideoModel, VideoModelAlias, VideoModelBackend } from './catalog-types.js';
import type { VideoBackend, VideoParams } from './values.js';

export type {
  Catalog,
  PricePerSecond,
  SpeechModel,
  VideoInputMap,
  VideoModel,
  VideoModelAlias,
  VideoModelBackend,
} from './catalog-types.js';

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
