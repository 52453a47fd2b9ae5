// The video provider interface: what every adapter (simulator, Vertex AI Veo, ...) implements.
// Adapters throw ProviderError; `retryable` tells the workflow's activities whether to try again.
import type { VideoParams } from '../../catalog.js';

export interface VideoGenerationRequest {
  /** Our job id: adapters use it to make a resubmission after a crash idempotent where they can. */
  request_id: string;
  model: string;
  prompt: string;
  params: VideoParams;
  seed?: number;
  parameters?: Record<string, unknown>;
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
  submit(req: VideoGenerationRequest): Promise<{ operation_id: string }>;
  poll(operation_id: string): Promise<VideoOperationStatus>;
  fetchOutput(operation_id: string, output: VideoOutputRef): Promise<Buffer>;
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
