// Submitting a video job to its provider: the first backend that accepts it, the accepted operation recorded
// with the job (or cancelled: it never runs on unseen), and what an earlier attempt left in its heartbeat.
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { observeProviderError } from '../metrics.js';
import { type VideoGenerationRequest, type VideoSubmission } from '../providers/video/types.js';
import { describeAnyProviderError } from '../providers/video/provider-errors.js';
import { loadVideoJobInputs } from './images.js';
import { recordedOperation, recordOperation } from './operation-polls.js';
import { providerCallbackUrl } from './callbacks.js';
import {
  type VideoJobActivityDeps,
  HEARTBEAT_EVERY_MS,
  RECORD_ATTEMPTS,
  RECORD_RETRY_MS,
  providerFailure,
  providerFor,
  pollPacing,
  pacingOf,
} from './job-steps.js';

/** What a submit attempt has done, in its heartbeat: the operation a provider accepted, and whether it was cancelled since. */
export interface SubmitProgress {
  accepted: { backend: string; operation_id: string } | null;
  cancelled?: boolean;
}

/** The request with the job's images, read from where the API kept them (never from workflow history). */
export async function withStoredImages(deps: VideoJobActivityDeps, request: VideoGenerationRequest): Promise<VideoSubmission> {
  if (!request.has_image) return request;
  const inputs = await loadVideoJobInputs(deps.db, deps.storage, request.request_id);
  if (!inputs || (request.has_last_frame && !inputs.last_frame)) {
    throw ApplicationFailure.create({
      type: 'ProviderError',
      message: 'the images of this job are missing',
      nonRetryable: true,
      details: [{ code: 'inputs_missing' }],
    });
  }
  return { ...request, image: inputs.image, ...(request.has_last_frame ? { last_frame: inputs.last_frame } : {}) };
}

/**
 * Records an operation the provider just accepted, trying again for a while (PostgreSQL restarting);
 * when it still cannot be recorded, the operation is cancelled at the provider (nobody would poll or
 * cancel it otherwise) and the attempt fails, to be retried: a new submission then replaces it. An
 * operation that could be neither recorded nor cancelled stays in the attempt's heartbeat for the retry.
 */
export async function recordOrCancel(
  deps: VideoJobActivityDeps,
  op: { job_id: string; backend: string; operation_id: string },
  cancelled: () => void,
): Promise<void> {
  const provider = providerFor(deps, op.backend);
  let failure: unknown;
  let settled = false;
  for (let i = 0; i < RECORD_ATTEMPTS && !settled; i++) {
    try {
      const first_poll_after_ms = deps.video.pollIntervalMs;
      if (await recordOperation(deps.db, { ...op, pacing: pacingOf(deps, provider), first_poll_after_ms })) return;
      // The job settled meanwhile (its run was terminated and the job refunded): nobody waits for this operation.
      settled = true;
      failure = new Error('the job is no longer pending');
    } catch (err) {
      failure = err;
      deps.logger.warn({ ...op, err: (err as Error).message, try: i + 1 }, 'an accepted video operation could not be recorded yet');
      if (i + 1 < RECORD_ATTEMPTS) await sleep(RECORD_RETRY_MS * 2 ** i);
    }
  }
  try {
    const answer = await provider.cancel(op.operation_id);
    cancelled();
    deps.logger.error(
      { ...op, answer: answer.answer },
      'an accepted video operation could not be recorded: cancelled at the provider; the submission is retried',
    );
  } catch (err) {
    deps.logger.error(
      { ...op, err: (err as Error).message },
      'an accepted video operation could be neither recorded nor cancelled; the retry looks for it in the heartbeat',
    );
  }
  throw ApplicationFailure.create({
    type: 'RecordFailed',
    message: `the operation could not be recorded: ${(failure as Error)?.message ?? failure}`,
    nonRetryable: settled,
    details: [{ code: 'record_failed' }],
  });
}

/**
 * The operation an earlier attempt of this submission had accepted but not recorded (it died, or could
 * not reach PostgreSQL), from that attempt's last heartbeat: recorded now, unless it was cancelled or
 * has ended (then a new submission replaces it).
 */
export async function acceptedByEarlierAttempt(
  deps: VideoJobActivityDeps,
  job_id: string,
  earlier: SubmitProgress | undefined,
): Promise<{ operation_id: string; backend: string } | null> {
  const accepted = earlier?.accepted;
  if (!accepted || earlier?.cancelled || !deps.videoProviders.has(accepted.backend)) return null;
  const provider = providerFor(deps, accepted.backend);
  const status = await provider.poll(accepted.operation_id).catch(() => null);
  if (status?.state === 'failed') return null;
  await recordOrCancel(deps, { job_id, ...accepted }, () => {});
  deps.logger.info({ job_id, ...accepted }, 'video operation accepted by an earlier attempt found and recorded; not submitted again');
  return accepted;
}

/** What submitVideoJob is asked: the job's request, its backends in order, and the attempts it has. */
export interface SubmitInput {
  request: VideoGenerationRequest;
  backends: string[];
  max_attempts: number;
}

/** The attempt's heartbeat detail: what it has submitted so far. */
interface SubmitHeartbeat {
  progress: SubmitProgress;
}

/**
 * Submits the job to each backend in turn until one accepts it, then records (or cancels) the accepted
 * operation. A passing refusal moves on to the next backend; a final one (or, on the last attempt, any)
 * fails the activity.
 */
export async function submitToFirstBackend(
  deps: VideoJobActivityDeps,
  beat: SubmitHeartbeat,
  job: { request: VideoGenerationRequest; backends: string[]; workspace_id: string | undefined; last_attempt: boolean },
): Promise<{ operation_id: string; backend: string }> {
  const ctx = Context.current();
  const job_id = job.request.request_id;
  const submission = await withStoredImages(deps, job.request);
  let failure: ApplicationFailure | undefined;
  for (const backend of job.backends) {
    const fields = { job_id, workspace_id: job.workspace_id, backend, model: job.request.model };
    let accepted: { operation_id: string } | undefined;
    try {
      const callback_url = deps.callbackBaseUrl ? providerCallbackUrl(deps.callbackBaseUrl, backend, job_id) : undefined;
      const provider = providerFor(deps, backend);
      accepted = await provider.submit(submission, { callback_url });
    } catch (err) {
      if (err instanceof ApplicationFailure) throw err;
      observeProviderError(backend, 'submit', describeAnyProviderError(err));
      failure = providerFailure(err, deps.logger, fields, job.last_attempt);
      deps.logger.warn({ ...fields, code: failure.details?.[0], final: failure.nonRetryable }, 'video job submission refused');
      if (failure.nonRetryable && !job.last_attempt) throw failure;
      continue;
    }
    beat.progress = { accepted: { backend, operation_id: accepted.operation_id } };
    ctx.heartbeat(beat.progress);
    await recordOrCancel(deps, { job_id, backend, operation_id: accepted.operation_id }, () => {
      beat.progress = { ...beat.progress, cancelled: true };
      ctx.heartbeat(beat.progress);
    });
    deps.logger.info({ ...fields, operation_id: accepted.operation_id }, 'video job submitted');
    return { operation_id: accepted.operation_id, backend };
  }
  throw (
    failure ??
    ApplicationFailure.create({
      type: 'ProviderError',
      message: 'no video backend serves this job',
      nonRetryable: true,
      details: [{ code: 'provider_not_configured' }],
    })
  );
}

/**
 * Submits the job to the first backend that accepts it and records the operation with the job (with its
 * row for the workers' pollers) at once. A job whose operation is already recorded (a retry after a
 * crash, a recovery run) is not submitted again: its recorded operation is returned and polled at once.
 * A passing refusal (429, 5xx, unreachable) moves on to the next backend at the same price; a final one
 * fails the job; the last attempt's passing failure is final too.
 *
 * An operation the provider accepted is recorded, or cancelled: it never runs on unseen. It is kept in
 * the attempt's heartbeat the moment it is accepted, so a retry after this worker died before recording
 * it finds it there (unless it has ended) and records it instead of submitting again; recording that
 * keeps failing (PostgreSQL unreachable) cancels it at the provider before the attempt fails.
 */
export async function submitVideoJob(deps: VideoJobActivityDeps, input: SubmitInput): Promise<{ operation_id: string; backend: string }> {
  const ctx = Context.current();
  const job_id = input.request.request_id;
  // The attempt's heartbeat: what it has submitted (sent every few seconds, so a dead or lost attempt is
  // retried within the heartbeat timeout). Its first beat is the accepted operation's, sent at once.
  const beat: SubmitHeartbeat = { progress: { accepted: null } };
  const timer = setInterval(() => ctx.heartbeat(beat.progress), HEARTBEAT_EVERY_MS);
  try {
    const recorded = await recordedOperation(deps.db, job_id);
    if (recorded?.operation_id && recorded.backend) {
      await recordOperation(deps.db, {
        job_id,
        backend: recorded.backend,
        operation_id: recorded.operation_id,
        pacing: pollPacing(deps),
        first_poll_after_ms: 0,
      });
      return { operation_id: recorded.operation_id, backend: recorded.backend };
    }
    const found = await acceptedByEarlierAttempt(deps, job_id, ctx.info.heartbeatDetails as SubmitProgress | undefined);
    if (found) return found;
    return await submitToFirstBackend(deps, beat, {
      request: input.request,
      backends: input.backends,
      workspace_id: recorded?.workspace_id,
      last_attempt: ctx.info.attempt >= input.max_attempts,
    });
  } finally {
    clearInterval(timer);
  }
}
