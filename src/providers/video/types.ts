// The video provider interface: what every adapter (simulator, Vertex AI Veo, ...) implements.
// Adapters throw ProviderError; `retryable` tells the workflow's activities whether to try again.
import type { ImageMimeType, VideoParams } from '../../catalog.js';

/** What the workflow asks the submit activity for: small values only, never image bytes (workflow history). */
export interface VideoGenerationRequest {
  /** Our job id: adapters use it to make a resubmission after a crash idempotent where they can. */
  request_id: string;
  model: string;
  prompt: string;
  params: VideoParams;
  seed?: number | undefined;
  parameters?: Record<string, unknown> | undefined;
  /** Resolved at creation (the request's choice or the model's default); unset for models without audio. */
  generate_audio?: boolean | undefined;
  negative_prompt?: string | undefined;
  /** The job has a first frame (and a last frame) stored with it: the submit activity loads them by job id. */
  has_image?: boolean | undefined;
  has_last_frame?: boolean | undefined;
}

export interface InputImage {
  bytes: Buffer;
  /** Recognised from the bytes at creation. */
  mime_type: ImageMimeType;
}

/** What an adapter submits: the request with the job's stored images loaded. */
export interface VideoSubmission extends VideoGenerationRequest {
  image?: InputImage | undefined;
  last_frame?: InputImage | undefined;
}

export interface VideoOutputRef {
  /** Opaque reference understood by the same adapter's fetchOutput. */
  ref: string;
  content_type: string;
}

export type VideoOperationStatus =
  | { state: 'running' }
  | { state: 'succeeded'; outputs: VideoOutputRef[] }
  | { state: 'failed'; code: string; message: string };

export interface VideoProvider {
  readonly name: string;
  submit(req: VideoSubmission): Promise<{ operation_id: string }>;
  poll(operation_id: string): Promise<VideoOperationStatus>;
  fetchOutput(operation_id: string, output: VideoOutputRef): Promise<Buffer>;
  /**
   * Asks the provider to stop the operation. Best effort: a provider may not support it, or the
   * operation may finish anyway; callers never depend on it (a cancelled job is refunded regardless).
   */
  cancel(operation_id: string): Promise<void>;
}

export class ProviderError extends Error {
  override name = 'ProviderError';
  constructor(
    message: string,
    readonly opts: {
      code: string;
      retryable: boolean;
      /** How long the provider asked us to wait before trying again (its Retry-After), when it said. */
      retry_after_ms?: number;
    },
  ) {
    super(message);
  }
}

/** Largest video file accepted from a provider. */
export const MAX_VIDEO_OUTPUT_BYTES = 512 * 1024 * 1024;
