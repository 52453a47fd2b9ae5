// The value sets the service names in more than one place: a video's resolutions and aspect ratios, the
// image types a job takes, the backends a video model can name, the voice providers a speech model can
// name, and the speech formats (a video's durations are each model's own, in the catalog). The catalog,
// its file's schema, the request and response schemas, config, the adapters and the workflows' messages
// read them from here. Imported by workflow code (types only): no Node APIs, no imports.

export const RESOLUTIONS = ['720p', '1080p', '4k'] as const;
export type Resolution = (typeof RESOLUTIONS)[number];

export const ASPECT_RATIOS = ['16:9', '9:16'] as const;
export type AspectRatio = (typeof ASPECT_RATIOS)[number];

export const IMAGE_MIME_TYPES = ['image/png', 'image/jpeg', 'image/webp'] as const;
export type ImageMimeType = (typeof IMAGE_MIME_TYPES)[number];
/** The largest image a job takes, decoded: the create's limit, and what the models list says of it. */
export const IMAGE_BYTES_MAX = 8 * 1024 * 1024;

/** The backends a model can name in the catalog (the simulator stands in for any of them when none is configured). */
export const VIDEO_BACKENDS = ['simulator', 'vertex', 'fal', 'replicate'] as const;
export type VideoBackend = (typeof VIDEO_BACKENDS)[number];

/**
 * What the catalog's entries of some backends carry: the aggregators take a mapped input (`input:`, one
 * video per request by default); Replicate's may pin a `version`; fal's may name endpoints per input.
 */
export const MAPPED_INPUT_BACKENDS: readonly VideoBackend[] = ['fal', 'replicate'];
export const VERSIONED_BACKEND: VideoBackend = 'replicate';
export const ENDPOINT_PER_INPUT_BACKEND: VideoBackend = 'fal';

/** The voice providers a speech model can name in the catalog. */
export const SPEECH_PROVIDERS = ['simulator', 'elevenlabs', 'cartesia'] as const;
export type SpeechProvider = (typeof SPEECH_PROVIDERS)[number];

/** The formats a speech is returned in (OpenAI's speech API's), in the order the API lists them. */
export const SPEECH_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;
export type SpeechFormat = (typeof SPEECH_FORMATS)[number];

/**
 * What a video job makes: the length of each video, its size and how many. The field names are the
 * create body's (camelCase), and the job's workflow input records them so.
 */
export interface VideoParams {
  durationSeconds: number;
  resolution: Resolution;
  aspectRatio: AspectRatio;
  n: number;
}
