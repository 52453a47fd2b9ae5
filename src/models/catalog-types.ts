// The shape of the model catalog: its video models (with their backends and how a job's fields map to an
// aggregator's input), retired aliases and speech models. ./catalog-file.ts builds one from a file and
// ./catalog.ts holds the process's; both import the shape from here, so neither imports the other back.
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
