// The video provider interface: what every adapter (simulator, Vertex AI Veo, fal, Replicate) implements.
// Adapters throw ProviderError; `retryable` tells the workflow's activities whether to try again.
import type { IncomingHttpHeaders } from 'node:http';
import type { ImageMimeType, VideoParams } from '../../models/values.js';
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
  /**
   * When the job gives up, ms from the epoch. Adapters whose provider can cancel by itself at a deadline
   * (Replicate's Cancel-After) send it, so an operation nobody waits for any more stops costing.
   */
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
  | {
      state: 'running';
      /** 0-100 when the provider reports how far along it is; null or absent when it does not. */
      progress?: number | null | undefined;
      /** Requests ahead of this one in the provider's queue (fal's queue_position; 0 once it runs); null or absent when the provider does not say. */
      queue_position?: number | null | undefined;
    }
  | { state: 'succeeded'; outputs: VideoOutputRef[] }
  | { state: 'failed'; code: string; message: string };

/**
 * What a provider answered to a cancel, per request of the operation (one per video for fal and Replicate,
 * one for all n videos on Vertex AI), and its answer for the record. A request the provider bills
 * (`billed_units`) either had already ended (`ended_units`: its video, if any, is neither delivered nor
 * charged on a cancel) or was running and is stopped by the cancel: the customer pays for those alone.
 */
export interface CancelAnswer {
  /** Whether the provider bills requests that the cancel stopped while they ran (billed_units > ended_units). */
  billed: boolean;
  /** Requests the provider bills: those that had started (were running, or had ended) when cancelled. */
  billed_units: number;
  /** Of the billed requests, those that had already ended when cancelled. */
  ended_units: number;
  answer: string;
}

export interface SubmitOptions {
  /**
   * Where the provider should call back when the operation ends (fal's fal_webhook, Replicate's webhook).
   * A callback is only a nudge to poll: adapters whose provider does not call back ignore it.
   */
  callback_url?: string | undefined;
}

/** A provider's callback as it arrived: its headers and its body byte for byte (signatures cover the raw bytes). */
export interface ProviderCallback {
  headers: IncomingHttpHeaders;
  raw_body: Buffer;
}

/**
 * A callback that verified: which delivery it is (the same for a replay of it, so a repeated delivery
 * changes nothing) and which of the provider's requests it is about (fal's request id, Replicate's
 * prediction id), to be matched against the job's recorded operation.
 */
export interface VerifiedCallback {
  delivery_id: string;
  request_ref: string | null;
}

/** What a provider's callbacks are checked against before their body is read. */
export interface CallbackReception {
  /** The largest body this provider's callbacks carry, with margin; larger is refused unread (413). */
  body_bytes_max: number;
  /**
   * Throws CallbackRejected when the headers cannot be a delivery of this provider (signature headers
   * missing or malformed, a timestamp outside the tolerance, another account's user id): the body is then
   * never read.
   */
  checkHeaders(headers: IncomingHttpHeaders): void;
}

/** Longest operation id an adapter returns (it is stored with the job and travels in workflow history). */
export const OPERATION_ID_CHARS_MAX = 4096;

export interface VideoProvider {
  readonly name: string;
  /**
   * Starts the generation of `req.params.n` videos; `operation_id` is the adapter's own, passed back to
   * poll, fetchOutput and cancel. A provider that makes one video per request gets n requests, all or
   * nothing: when one is refused, those already made are cancelled (best effort) and the refusal is thrown.
   */
  submit(req: VideoSubmission, opts?: SubmitOptions): Promise<{ operation_id: string }>;
  poll(operation_id: string): Promise<VideoOperationStatus>;
  fetchOutput(operation_id: string, output: VideoOutputRef): Promise<Buffer>;
  /**
   * Asks the provider to stop the operation, and says how many of its requests the provider bills and how
   * many of those had already ended (see CancelAnswer). Throws when the provider could not be asked: the
   * customer is then refunded in full.
   */
  cancel(operation_id: string): Promise<CancelAnswer>;
  /**
   * Checks that a callback comes from the provider (its signature, its timestamp); throws CallbackRejected
   * when it does not. Absent for providers that never call back.
   */
  verifyCallback?(callback: ProviderCallback): Promise<VerifiedCallback>;
  /** Present with verifyCallback: the checks made before a callback's body is read, and its size bound. */
  readonly callbackReception?: CallbackReception;
  /** Whether a verified callback is about one of the requests of `operation_id` (the job's recorded operation). */
  callbackConcerns?(operation_id: string, callback: VerifiedCallback): boolean;
}

/** A provider callback that failed verification: it changes nothing and is answered 401. */
export class CallbackRejected extends Error {
  override name = 'CallbackRejected';
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

/**
 * Largest video file accepted from a provider (a copy holds it in memory: src/runtime/memory-bounds.ts).
 * Providers' 8 s clips are 5-30 MB at 1080p, some 100 MB at 4K.
 */
export const VIDEO_OUTPUT_BYTES_MAX = 256 * 1024 * 1024;
