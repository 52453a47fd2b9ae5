// The model catalog: what each model accepts, what it costs, and which backend serves it.
// Request validation and pricing read only from here.
import { MICRO_EUR_PER_EUR } from './money.js';

export type Resolution = '720p' | '1080p';
export type AspectRatio = '16:9' | '9:16';

export interface VideoModel {
  id: string;
  kind: 'video';
  family: string;
  variant: 'standard' | 'fast' | 'simulated';
  owned_by: string;
  region: string;
  durations_s: readonly number[];
  resolutions: readonly Resolution[];
  aspect_ratios: readonly AspectRatio[];
  max_n: number;
  supports_seed: boolean;
  /** Whether `parameters` passthrough is read (the reference family ignores it). */
  accepts_parameters: boolean;
  price_micro_eur_per_second: Record<Resolution, number>;
  default_params: { durationSeconds: number; resolution: Resolution; aspectRatio: AspectRatio; n: number };
}

export type VideoBackend = 'simulator' | 'vertex';

/** Families Vertex AI serves when it is configured (VERTEX_PROJECT_ID). */
const VERTEX_FAMILIES: ReadonlySet<string> = new Set(['veo-3']);

const REFERENCE_LIMITS = {
  durations_s: [4, 6, 8],
  resolutions: ['720p', '1080p'],
  aspect_ratios: ['16:9', '9:16'],
  max_n: 4,
  supports_seed: true,
  default_params: { durationSeconds: 8, resolution: '720p', aspectRatio: '16:9', n: 1 },
} as const;

const eur = (amount_eur: number) => Math.round(amount_eur * MICRO_EUR_PER_EUR);

export const VIDEO_MODELS: readonly VideoModel[] = [
  {
    id: 'veo-3.0-fast-generate-001',
    kind: 'video',
    family: 'veo-3',
    variant: 'fast',
    owned_by: 'google',
    region: 'europe-west4',
    accepts_parameters: false,
    price_micro_eur_per_second: { '720p': eur(0.1), '1080p': eur(0.15) },
    ...REFERENCE_LIMITS,
  },
  {
    id: 'veo-3.0-generate-001',
    kind: 'video',
    family: 'veo-3',
    variant: 'standard',
    owned_by: 'google',
    region: 'europe-west4',
    accepts_parameters: false,
    price_micro_eur_per_second: { '720p': eur(0.4), '1080p': eur(0.5) },
    ...REFERENCE_LIMITS,
  },
  {
    id: 'sim-video-1',
    kind: 'video',
    family: 'simulator',
    variant: 'simulated',
    owned_by: 'video-voice-api',
    region: 'local',
    accepts_parameters: true,
    price_micro_eur_per_second: { '720p': eur(0.05), '1080p': eur(0.1) },
    ...REFERENCE_LIMITS,
  },
];

export const DEFAULT_VIDEO_MODEL_ID = 'veo-3.0-fast-generate-001';

export function findVideoModel(id: string): VideoModel | undefined {
  return VIDEO_MODELS.find((m) => m.id === id);
}

export interface VideoParams {
  durationSeconds: number;
  resolution: Resolution;
  aspectRatio: AspectRatio;
  n: number;
}

/** Price of one video of these parameters, in micro-euros. */
export function unitPriceMicroEur(model: VideoModel, params: VideoParams): number {
  return model.price_micro_eur_per_second[params.resolution] * params.durationSeconds;
}

/** Upper bound charged at creation: n videos. */
export function estimateCostMicroEur(model: VideoModel, params: VideoParams): number {
  return unitPriceMicroEur(model, params) * params.n;
}

/**
 * Which backend serves a model. With Vertex AI configured, the reference family goes to Vertex; until
 * then it is served by the simulator when it is enabled (contract.md 5); with neither, nothing.
 */
export function videoBackendFor(model: VideoModel, opts: { simulator: boolean; vertex: boolean }): VideoBackend | null {
  if (model.family === 'simulator') return opts.simulator ? 'simulator' : null;
  if (opts.vertex && VERTEX_FAMILIES.has(model.family)) return 'vertex';
  return opts.simulator ? 'simulator' : null;
}

// ---------------------------------------------------------------------------------------------
// Speech models: priced per 1,000 characters of input (Unicode code points), charged per request.

export type SpeechResponseFormat = 'wav' | 'pcm';

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

export const SPEECH_MODELS: readonly SpeechModel[] = [
  {
    id: 'sim-speech-1',
    kind: 'speech',
    owned_by: 'video-voice-api',
    provider: 'simulator',
    region: 'local',
    price_micro_eur_per_1000_chars: eur(0.15),
    max_input_chars: 4_096,
    response_formats: ['wav', 'pcm'],
  },
  {
    // ElevenLabs Multilingual v2 (the model_id is ELEVENLABS_MODEL_ID, default eleven_multilingual_v2).
    // Region: ElevenLabs' default environment (api.elevenlabs.io) stores data in the US. Its API
    // lists Multilingual v2 at about USD 0.10 per 1,000 characters (more as plan overage); input is
    // capped below its 10,000-character request limit to bound latency and the audio held in memory.
    id: 'eleven-multilingual-v2',
    kind: 'speech',
    owned_by: 'elevenlabs',
    provider: 'elevenlabs',
    region: 'us',
    price_micro_eur_per_1000_chars: eur(0.3),
    max_input_chars: 5_000,
    response_formats: ['wav', 'pcm'],
  },
];

export function findSpeechModel(id: string): SpeechModel | undefined {
  return SPEECH_MODELS.find((m) => m.id === id);
}

/** The model used when a speech request names none: the first one of the configured provider. */
export function defaultSpeechModelFor(provider: string): SpeechModel | undefined {
  return SPEECH_MODELS.find((m) => m.provider === provider);
}

/** Price of speaking `characters` characters, rounded up to a whole micro-euro. */
export function speechCostMicroEur(model: SpeechModel, characters: number): number {
  if (!(Number.isSafeInteger(characters) && characters > 0)) throw new Error(`invariant: speech of ${characters} characters`);
  return Math.ceil((characters * model.price_micro_eur_per_1000_chars) / 1000);
}
