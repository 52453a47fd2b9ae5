// Copying a finished job's outputs from the provider into storage, under keys derived from the job: a retry
// overwrites, never duplicates; a passing fault is retried, a permanent one of one output never holds back the others.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { VIDEO_OUTPUT_BYTES_MAX, type VideoOutputRef, type VideoProvider } from '../providers/video/types.js';
import { mayPass } from '../providers/video/provider-errors.js';
import { isPermanentStorageError } from '../storage/local.js';
import type { StoredVideo } from '../../workflows/messages.js';
import type { Semaphore } from '../semaphore.js';
import { videoOutputKey } from '../storage/retention.js';
import { type VideoJobActivityDeps, providerFailure, withHeartbeat, providerFor } from './job-steps.js';

/**
 * Copies output `index` into storage under a key derived from the job: a retry overwrites, never duplicates.
 * At most CONCURRENT_OUTPUT_COPIES_MAX at once in this process (each holds a video in memory).
 */
export function copyOne(
  deps: VideoJobActivityDeps,
  outputCopies: Semaphore,
  provider: VideoProvider,
  output: { job_id: string; operation_id: string; index: number; ref: VideoOutputRef },
): Promise<StoredVideo> {
  const { job_id, operation_id, index, ref } = output;
  return withHeartbeat(index, () =>
    outputCopies.with(async () => {
      let body: Buffer;
      try {
        body = await provider.fetchOutput(operation_id, ref);
      } catch (err) {
        // The output is made and paid for: a refusal of our credentials (a key being rotated) is retried
        // as a passing fault is, not refunded at once.
        throw providerFailure(err, deps.logger, { job_id, operation_id, output: index }, false, mayPass);
      }
      if (body.length === 0 || body.length > VIDEO_OUTPUT_BYTES_MAX) {
        throw ApplicationFailure.create({
          type: 'ProviderError',
          message: `output ${index} has ${body.length} bytes`,
          nonRetryable: true,
          details: [{ code: 'invalid_output' }],
        });
      }
      const storage_key = videoOutputKey(job_id, index);
      try {
        await deps.storage.put(storage_key, body, ref.content_type);
      } catch (err) {
        throw ApplicationFailure.create({
          type: 'StorageError',
          message: `output ${index} could not be stored: ${(err as Error).message}`,
          nonRetryable: isPermanentStorageError(err),
          details: [{ code: 'storage_failed' }],
        });
      }
      return { storage_key, content_type: ref.content_type, bytes: body.length };
    }),
  );
}

/** What copyVideoOutputs is asked: the job's operation and its outputs, and the attempts it has. */
export interface CopyOutputsInput {
  backend: string;
  job_id: string;
  operation_id: string;
  outputs: VideoOutputRef[];
  max_attempts: number;
}

/**
 * Copies each output into storage and reports what it could not copy. A passing fault is retried (the
 * activity fails and Temporal retries it) until the last attempt, which delivers what was stored; a
 * permanent fault of one output never holds back the others.
 */
export async function copyVideoOutputs(
  deps: VideoJobActivityDeps,
  outputCopies: Semaphore,
  input: CopyOutputsInput,
): Promise<{ videos: StoredVideo[]; failed: number }> {
  const provider = providerFor(deps, input.backend);
  const last_attempt = Context.current().info.attempt >= input.max_attempts;
  const videos: StoredVideo[] = [];
  const failed: { index: number; code: string; retryable: boolean }[] = [];
  let passing: ApplicationFailure | null = null;
  for (const [index, ref] of input.outputs.entries()) {
    try {
      videos.push(await copyOne(deps, outputCopies, provider, { job_id: input.job_id, operation_id: input.operation_id, index, ref }));
    } catch (err) {
      const failure = err instanceof ApplicationFailure ? err : ApplicationFailure.create({ message: String(err) });
      const code = (failure.details?.[0] as { code?: string } | undefined)?.code ?? 'internal_error';
      failed.push({ index, code, retryable: !failure.nonRetryable });
      if (!failure.nonRetryable) passing ??= failure;
    }
  }
  if (passing && !last_attempt) throw passing;
  if (failed.length > 0)
    deps.logger.warn(
      { job_id: input.job_id, operation_id: input.operation_id, stored: videos.length, failed },
      'video outputs not stored; delivered as a shortfall',
    );
  return { videos, failed: failed.length };
}
