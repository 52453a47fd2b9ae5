// Activities of the video job workflow: the ledger, the provider and storage. Each is idempotent, so
// Temporal may retry any of them after a crash without double charging, submitting or storing.
// Metrics count only real ledger changes (never an idempotent replay); logs carry job_id and workspace_id.
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import {
  creditsCharged,
  creditsRefunded,
  errorCodeLabel,
  observeProviderError,
  videoJobsRefunded,
  videoJobsSettled,
  videoJobsSettledByBackend,
} from '../src/metrics.js';
import * as billing from '../src/video-jobs/billing.js';
import {
  type AcceptanceDecision,
  type ChargeResult,
  type Settlement,
  type SettlementResult,
  type VideoJobCharge,
} from '../src/video-jobs/billing.js';
import { estimateCostMicroEur, findVideoModel } from '../src/models/catalog.js';
import {
  VIDEO_OUTPUT_BYTES_MAX,
  type CancelAnswer,
  type VideoGenerationRequest,
  type VideoOutputRef,
  type VideoProvider,
  type VideoSubmission,
} from '../src/providers/video/types.js';
import { describeAnyProviderError, mayPass, type DescribedProviderError } from '../src/providers/video/provider-errors.js';
import { loadVideoJobInputs } from '../src/video-jobs/images.js';
import { isPermanentStorageError, type Storage } from '../src/storage/local.js';
import type { StoredVideo } from '../workflows/messages.js';
import type { JobEventContext } from '../src/webhooks/events.js';
import { dispatchJobWebhooks } from '../src/webhooks/dispatch.js';
import { Semaphore } from '../src/semaphore.js';
import { videoOutputKey } from '../src/storage/retention.js';
import { recordedOperation, recordOperation, type PollPacing } from '../src/video-jobs/operation-polls.js';
import { providerCallbackUrl } from '../src/video-jobs/callbacks.js';
import { cancelAndRecord } from '../src/video-jobs/operation-cancel.js';

export interface VideoJobActivityDeps {
  db: Db;
  storage: Storage;
  videoProviders: ReadonlyMap<string, VideoProvider>;
  logger: Logger;
  /** How the workers' pollers pace a job's polls (VIDEO_POLL_INTERVAL_MS, VIDEO_POLL_MAX_INTERVAL_MS). */
  video: { pollIntervalMs: number; pollIntervalMsMax: number };
  /** Where providers that call back reach this service (PUBLIC_BASE_URL, else the API's own address). */
  callbackBaseUrl?: string;
  /** Webhooks: how events present the job, and the first retry interval of deliveries. */
  webhookEvents?: { context: JobEventContext; retry_initial_ms: number };
}

/** The longest wait between two fallback polls of a job whose backend calls back. */
export const CALLBACK_FALLBACK_POLL_INTERVAL_MS_MAX = 30_000;

/**
 * Videos copied from a provider into storage at once by one worker process (each is held in memory:
 * src/runtime/memory-bounds.ts checks them against the chart's limit), and copies left waiting.
 */
export const CONCURRENT_OUTPUT_COPIES_MAX = 2;
const WAITING_OUTPUT_COPIES_MAX = 10_000;
const HEARTBEAT_EVERY_MS = 5_000;
/** An accepted operation's record is tried this many times, RECORD_RETRY_MS apart and doubling (about 8 s in all), before it is cancelled. */
const RECORD_ATTEMPTS = 5;
const RECORD_RETRY_MS = 500;

/** What a submit attempt has done, in its heartbeat: the operation a provider accepted, and whether it was cancelled since. */
interface SubmitProgress {
  accepted: { backend: string; operation_id: string } | null;
  cancelled?: boolean;
}

/**
 * The error codes of a failed job whose provider operation may run on with nobody waiting for it
 * (workflows/video-job.ts): past its deadline, or a submission that ended without an answer of its own
 * (its last attempt lost with its worker, after it may have recorded the operation).
 */
const UNWATCHED_OPERATION_CODES: ReadonlySet<string> = new Set(['deadline_exceeded', 'submit_failed']);

/**
 * The provider error as the activity's failure: its code in details, the provider's Retry-After as the
 * next retry's delay; retried when `retried` says so of it (by default, when the provider said to try again).
 */
function providerFailure(
  err: unknown,
  logger: Logger,
  fields: Record<string, unknown>,
  final = false,
  retried: (e: DescribedProviderError) => boolean = (e) => e.retryable,
): ApplicationFailure {
  const e = describeAnyProviderError(err);
  if (!e.visible)
    logger.warn(
      { ...fields, code: e.code, retryable: e.retryable, provider_message: (err as Error)?.message },
      'video provider call failed',
    );
  return ApplicationFailure.create({
    type: 'ProviderError',
    message: e.message,
    nonRetryable: final || !retried(e),
    details: [{ code: e.code }],
    ...(e.retry_after_ms !== undefined ? { nextRetryDelay: e.retry_after_ms } : {}),
  });
}

/** Heartbeats every few seconds while `work` runs, so a long download or upload is not taken for a dead worker. */
async function withHeartbeat<T>(detail: unknown, work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  ctx.heartbeat(detail);
  const timer = setInterval(() => ctx.heartbeat(detail), HEARTBEAT_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

/** What a job's logs and metrics are labelled with. */
interface JobLabels {
  workspace_id: string;
  model: string;
  backend: string | null;
}

/** Counts a settlement in the metrics (once: a retry that finds the job settled counts nothing) and logs it. */
function reportSettlement(logger: Logger, settlement: Settlement, result: SettlementResult, job: JobLabels | undefined): void {
  const error_code = result.status === 'failed' ? (result.error?.code ?? 'no_videos') : null;
  if (!result.already_settled) {
    videoJobsSettled.inc({ outcome: result.status, error_code: errorCodeLabel(error_code) });
    const by = { model: job?.model ?? 'unknown', backend: job?.backend ?? 'none' };
    videoJobsSettledByBackend.inc({ outcome: result.status, ...by });
    if (result.refunded_micro_eur > 0) {
      creditsRefunded.inc({ kind: 'video' }, result.refunded_micro_eur);
      videoJobsRefunded.inc(by);
    }
  }
  logger.info(
    {
      job_id: settlement.jobId,
      workspace_id: job?.workspace_id,
      outcome: result.status,
      error_code,
      delivered: settlement.outcome === 'succeeded' ? settlement.delivered : 0,
      cost_micro_eur: result.cost_micro_eur,
      refunded_micro_eur: result.refunded_micro_eur,
      already_settled: result.already_settled,
    },
    'video job settled',
  );
}

/** The provider of a configured backend; a backend not configured fails the activity for good. */
function providerFor(deps: VideoJobActivityDeps, backend: string): VideoProvider {
  const p = deps.videoProviders.get(backend);
  if (!p) {
    throw ApplicationFailure.create({
      type: 'ProviderError',
      message: `video backend "${backend}" is not configured`,
      nonRetryable: true,
      details: [{ code: 'provider_not_configured' }],
    });
  }
  return p;
}

/** How the workers' pollers pace a job's polls. */
function pollPacing(deps: VideoJobActivityDeps): PollPacing {
  return { interval_ms: deps.video.pollIntervalMs, max_interval_ms: deps.video.pollIntervalMsMax };
}

/** A backend that calls back when an operation ends is polled only as a fallback: its polls back off further. */
function pacingOf(deps: VideoJobActivityDeps, provider: VideoProvider): PollPacing {
  const pacing = pollPacing(deps);
  return provider.verifyCallback
    ? { ...pacing, max_interval_ms: Math.max(pacing.max_interval_ms, CALLBACK_FALLBACK_POLL_INTERVAL_MS_MAX) }
    : pacing;
}

/** The job's workspace, for logs only: a failed lookup never fails the activity. */
async function jobOf(db: Db, jobId: string): Promise<JobLabels | undefined> {
  try {
    const r = await db.query<JobLabels>('SELECT workspace_id, model, backend FROM video_jobs WHERE id = $1', [jobId]);
    return r.rows[0];
  } catch {
    return undefined;
  }
}

/** The request with the job's images, read from where the API kept them (never from workflow history). */
async function withStoredImages(deps: VideoJobActivityDeps, request: VideoGenerationRequest): Promise<VideoSubmission> {
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
 * Copies output `index` into storage under a key derived from the job: a retry overwrites, never duplicates.
 * At most CONCURRENT_OUTPUT_COPIES_MAX at once in this process (each holds a video in memory).
 */
function copyOne(
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

/**
 * Records an operation the provider just accepted, trying again for a while (PostgreSQL restarting);
 * when it still cannot be recorded, the operation is cancelled at the provider (nobody would poll or
 * cancel it otherwise) and the attempt fails, to be retried: a new submission then replaces it. An
 * operation that could be neither recorded nor cancelled stays in the attempt's heartbeat for the retry.
 */
async function recordOrCancel(
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
async function acceptedByEarlierAttempt(
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

/**
 * Asks the provider to stop the job's operation. What the workflow does not know (a submission
 * cancelled in flight that recorded its operation; a recovery run, which starts with the operation but
 * not its backend) is read from the job's record, so the cancel always reaches the provider that runs it.
 */
async function cancelRecordedOperation(
  deps: VideoJobActivityDeps,
  input: { backend: string | null; job_id: string; operation_id: string | null },
): Promise<CancelAnswer> {
  const recorded = input.operation_id === null || input.backend === null ? await recordedOperation(deps.db, input.job_id) : null;
  const operation_id = input.operation_id ?? recorded?.operation_id ?? null;
  const backend = input.backend ?? recorded?.backend ?? null;
  if (operation_id === null || backend === null)
    return { billed: false, billed_units: 0, ended_units: 0, answer: 'cancelled before the provider accepted the job' };
  const answer = await providerFor(deps, backend).cancel(operation_id);
  deps.logger.info(
    { job_id: input.job_id, backend, operation_id, billed: answer.billed, billed_units: answer.billed_units, answer: answer.answer },
    'video provider operation cancelled',
  );
  return answer;
}

/**
 * A job past its deadline, or whose submission ended without an answer, was refunded in full: its
 * recorded provider operation, which nobody waits for any more, is asked to stop, as a customer's
 * cancel does (fal has no deadline of its own). Best effort and bounded in time: the settlement never
 * waits long on a provider; the answer, or the failure, is recorded with the job.
 */
async function cancelUnwatched(deps: VideoJobActivityDeps, job_id: string): Promise<void> {
  await cancelAndRecord(deps, job_id, () => cancelRecordedOperation(deps, { backend: null, job_id, operation_id: null }));
}

/** The job's price from this worker's catalog (never from the request); a different estimate is logged. */
function catalogPrice(deps: VideoJobActivityDeps, job: VideoJobCharge): number {
  const model = findVideoModel(job.model);
  if (!model)
    throw ApplicationFailure.create({
      type: 'UnknownModel',
      message: `model ${job.model} is not in this worker's catalog`,
      nonRetryable: true,
    });
  const priced = estimateCostMicroEur(model, job.params, { generateAudio: job.generateAudio });
  if (priced !== job.estimated_cost_micro_eur) {
    deps.logger.warn(
      { job_id: job.jobId, requested_micro_eur: job.estimated_cost_micro_eur, catalog_micro_eur: priced },
      'video job estimate differs from the catalog; charging the catalog price',
    );
  }
  return priced;
}

/** Prices the job from the catalog (never from the request) and charges it; see billing's chargeVideoJob. */
async function chargeVideoJob(deps: VideoJobActivityDeps, job: VideoJobCharge): Promise<ChargeResult> {
  const priced = catalogPrice(deps, job);
  const result = await billing.chargeVideoJob(deps.db, { ...job, estimated_cost_micro_eur: priced });
  const fields = {
    job_id: job.jobId,
    attempt_id: job.attemptId,
    workspace_id: job.workspaceId,
    model: job.model,
    estimated_cost_micro_eur: priced,
  };
  if (!result.ok) {
    deps.logger.info({ ...fields, reason: result.reason }, 'video job not accepted; nothing charged');
  } else {
    if (!result.already_charged) creditsCharged.inc({ kind: 'video' }, priced);
    deps.logger.info(
      { ...fields, balance_micro_eur: result.balance_micro_eur, already_charged: result.already_charged },
      'video job charged',
    );
  }
  return result;
}

/** An attempt whose charge outcome is unknown. */
interface AcceptanceQuestion {
  jobId: string;
  attemptId: string;
  workspaceId: string;
  fingerprint: string;
}

/** Decides an attempt whose charge outcome is unknown: charged, or refused for good. */
async function decideVideoJobAcceptance(deps: VideoJobActivityDeps, a: AcceptanceQuestion): Promise<AcceptanceDecision> {
  const decision = await billing.decideAcceptance(deps.db, a);
  deps.logger.info(
    { job_id: a.jobId, attempt_id: a.attemptId, workspace_id: a.workspaceId, decision: decision.decision },
    'video job acceptance decided after its charge step failed',
  );
  return decision;
}

/**
 * Keeps the charge for what was delivered and refunds the rest, once (its poll row goes with it); then
 * starts the job's recorded webhook deliveries (idempotent: a retry after the commit settles nothing
 * twice and dispatches again).
 */
async function settleVideoJob(deps: VideoJobActivityDeps, settlement: Settlement): Promise<SettlementResult> {
  const result = await billing.settleVideoJob(deps.db, settlement, deps.webhookEvents?.context);
  if (settlement.outcome === 'failed' && UNWATCHED_OPERATION_CODES.has(settlement.error?.code ?? ''))
    await cancelUnwatched(deps, settlement.jobId);
  if (deps.webhookEvents) {
    const { client, info } = Context.current();
    await dispatchJobWebhooks(
      { client, db: deps.db, taskQueue: info.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms },
      settlement.jobId,
    );
  }
  reportSettlement(deps.logger, settlement, result, await jobOf(deps.db, settlement.jobId));
  return result;
}

/** What submitVideoJob is asked: the job's request, its backends in order, and the attempts it has. */
interface SubmitInput {
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
async function submitToFirstBackend(
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
async function submitVideoJob(deps: VideoJobActivityDeps, input: SubmitInput): Promise<{ operation_id: string; backend: string }> {
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

/** What copyVideoOutputs is asked: the job's operation and its outputs, and the attempts it has. */
interface CopyOutputsInput {
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
async function copyVideoOutputs(
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

/** What cancelVideoOperation is asked: the job's operation as the workflow knows it, and its output count. */
interface CancelOperationInput {
  backend: string | null;
  job_id: string;
  operation_id: string | null;
  n: number;
}

/**
 * A cancelled job: asks the provider to stop its operation and deletes whatever outputs were already
 * copied. Before the provider accepted the job nothing is billed; after, the provider's answer says
 * whether it bills the operation, and is recorded with the job.
 */
async function cancelVideoOperation(deps: VideoJobActivityDeps, input: CancelOperationInput): Promise<CancelAnswer> {
  const answer = await cancelRecordedOperation(deps, input);
  await deps.db.query('UPDATE video_jobs SET cancel_answer = $2 WHERE id = $1', [input.job_id, answer.answer.slice(0, 1000)]);
  for (let i = 0; i < input.n; i++) await deps.storage.delete(videoOutputKey(input.job_id, i));
  return answer;
}

/** The activities of the video job workflow, bound to this process's dependencies (one output-copy limit per process). */
export function createVideoJobActivities(deps: VideoJobActivityDeps) {
  const outputCopies = new Semaphore(CONCURRENT_OUTPUT_COPIES_MAX, WAITING_OUTPUT_COPIES_MAX);
  return {
    chargeVideoJob: (job: VideoJobCharge): Promise<ChargeResult> => chargeVideoJob(deps, job),
    decideVideoJobAcceptance: (a: AcceptanceQuestion): Promise<AcceptanceDecision> => decideVideoJobAcceptance(deps, a),
    settleVideoJob: (settlement: Settlement): Promise<SettlementResult> => settleVideoJob(deps, settlement),
    submitVideoJob: (input: SubmitInput): Promise<{ operation_id: string; backend: string }> => submitVideoJob(deps, input),
    copyVideoOutputs: (input: CopyOutputsInput): Promise<{ videos: StoredVideo[]; failed: number }> =>
      copyVideoOutputs(deps, outputCopies, input),
    cancelVideoOperation: (input: CancelOperationInput): Promise<CancelAnswer> => cancelVideoOperation(deps, input),
  };
}

export type VideoJobActivities = ReturnType<typeof createVideoJobActivities>;
