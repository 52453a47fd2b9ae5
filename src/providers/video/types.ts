// The video provider interface: what every adapter (simulator, Vertex AI Veo, ...) implements.
// Adapters throw ProviderError; `retryable` tells the workflow's activities whether to try again.
import type { ImageMimeType, VideoParams } from '../../catalog.js';
import type { VideoOutputRef } from '../../../workflows/messages.js';

export type { VideoOutputRef };

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
  /** The job fails at this time (Unix ms): a provider that can stop work by itself then is told so. */
  deadline_at_ms?: number | undefined;
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

export type VideoOperationStatus =
  /** `progress` 0-100 and `queue_position`, where the provider reports them. */
  | { state: 'running'; progress?: number | null | undefined; queue_position?: number | null | undefined }
  | { state: 'succeeded'; outputs: VideoOutputRef[] }
  | { state: 'failed'; code: string; message: string };

/** What a provider answered to a cancel: whether it still bills the operation, and its answer for the record. */
export interface CancelAnswer {
  billed: boolean;
  answer: string;
}

export interface SubmitOptions {
  /** Where the provider may call back when the operation ends (a verified callback makes the job poll at once). */
  callback_url?: string | undefined;
}

export interface VideoProvider {
  readonly name: string;
  /** `operation_id` is the adapter's own (at most 4096 characters), passed back to poll, fetchOutput and cancel. */
  submit(req: VideoSubmission, opts?: SubmitOptions): Promise<{ operation_id: string }>;
  poll(operation_id: string): Promise<VideoOperationStatus>;
  fetchOutput(operation_id: string, output: VideoOutputRef): Promise<Buffer>;
  /**
   * Asks the provider to stop the operation, and says whether the provider still bills it (an operation
   * that had already finished is billed). Throws when the provider could not be asked: the customer is
   * then refunded in full.
   */
  cancel(operation_id: string): Promise<CancelAnswer>;
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
