// Activities of the video job workflow: the ledger, the provider and storage. Each is idempotent,
// so Temporal may retry any of them after a crash without double charging or double storing.
// Metrics count only real ledger changes (never an idempotent replay); logs carry job_id and workspace_id.
import { CompleteAsyncError, Context } from '@temporalio/activity';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import { creditsCharged, creditsRefunded, errorCodeLabel, videoJobsSettled, videoProviderPollDuration } from '../src/metrics.js';
import {
  chargeVideoJob,
  decideAcceptance,
  recordPollOutcome,
  recordVideoOperation,
  videoJobProgress,
  videoOperationOf,
  settleVideoJob,
  type AcceptanceDecision,
  type ChargeResult,
  type Settlement,
  type SettlementResult,
  type VideoJobCharge,
} from '../src/billing/video-job-billing.js';
import { estimateCostMicroEur, findVideoModel } from '../src/catalog.js';
import {
  ProviderError,
  MAX_VIDEO_OUTPUT_BYTES,
  type VideoGenerationRequest,
  type VideoOperationStatus,
  type VideoOutputRef,
  type VideoProvider,
  type VideoSubmission,
} from '../src/providers/video/types.js';
import { loadVideoJobInputs } from '../src/services/video-job-inputs.js';
import { isPermanentStorageError, type Storage } from '../src/storage/local.js';
import { OPERATION_RUNNING, videoJobWorkflowId, type StoredVideo } from '../workflows/messages.js';
import type { JobEventContext } from '../src/webhooks/events.js';
import { dispatchJobWebhooks } from '../src/webhooks/dispatch.js';
import { Semaphore } from '../src/semaphore.js';
import { registerAwait } from '../src/temporal/awaits-store.js';

export interface VideoJobActivityDeps {
  db: Db;
  storage: Storage;
  videoProviders: ReadonlyMap<string, VideoProvider>;
  logger: Logger;
  /** Webhooks (issue 10): how events present the job, and the first retry interval of deliveries. */
  webhookEvents?: { context: JobEventContext; retry_initial_ms: number };
}

/**
 * The signal that an attempt completes asynchronously, without a stack: it is control flow, never shown, and
 * the SDK reads its `stack` on every awaiting attempt (under tsx, source-mapped frame by frame, per create).
 */
function completeAsync(): CompleteAsyncError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new CompleteAsyncError();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** A job's operation being awaited; `known_failures`: its count of failed polls when known (spares resetting a 0). */
interface Awaiting {
  backend: string;
  job_id: string;
  operation_id: string;
  pacing: PollPacing;
  known_failures: number | undefined;
  /** The wait before the first poll: 0 for a retry taking over an operation submitted earlier. */
  first_poll_after_ms: number;
  /** The attempt's result is { operation_id, status } (submitAndAwaitVideoGeneration), else the status. */
  with_operation: boolean;
  /**
   * The operation was just submitted and is not yet recorded with the job: the attempt's row and the
   * operation are recorded by one statement (one round trip fewer per create).
   */
  record_operation: boolean;
}

/** How an awaiting activity paces its polls (the job's poll settings; absent in activities of 0.5 runs). */
export interface PollPacing {
  poll_interval_ms?: number;
  poll_max_interval_ms?: number;
}

/** The job id of the running activity's workflow (`video-job-<job id>`), for logs. */
function currentJobId(): string | undefined {
  try {
    const workflowId = Context.current().info.workflowExecution?.workflowId ?? '';
    const prefix = videoJobWorkflowId('');
    return workflowId.startsWith(prefix) ? workflowId.slice(prefix.length) : undefined;
  } catch {
    return undefined;
  }
}

/** Longest provider Retry-After honoured (the provider activities' retry policy caps its own backoff at 30 s). */
const MAX_RETRY_AFTER_MS = 60_000;

/**
 * What a job's error tells the customer about a provider call that failed. The provider's own text is
 * kept only where it is about the customer's request (a prompt the provider refuses); every other
 * failure (our credentials, our project's resources, transport errors, a bug) is described in general
 * terms, and the provider's text goes to the operator's log only: it can name our cloud project,
 * bucket or operation ids.
 */
const CUSTOMER_VISIBLE_CODES = new Set(['invalid_request']);
const GENERIC_MESSAGES: Record<string, string> = {
  provider_unauthenticated: "the video provider refused the service's credentials; the operator has been alerted",
  provider_permission_denied: "the video provider refused the service's credentials; the operator has been alerted",
};

function toFailure(err: unknown, logger?: Logger): unknown {
  const job_id = currentJobId();
  if (err instanceof ProviderError) {
    const visible = CUSTOMER_VISIBLE_CODES.has(err.opts.code);
    if (!visible) logger?.warn({ job_id, code: err.opts.code, retryable: err.opts.retryable, provider_message: err.message }, 'video provider call failed');
    return ApplicationFailure.create({
      type: 'ProviderError',
      message: visible ? err.message : (GENERIC_MESSAGES[err.opts.code] ?? `the video provider call failed (${err.opts.code})`),
      nonRetryable: !err.opts.retryable,
      details: [{ code: err.opts.code }],
      // The provider's Retry-After replaces the policy's backoff for the next attempt, capped so a
      // far-off date cannot park the job.
      ...(err.opts.retryable && err.opts.retry_after_ms !== undefined
        ? { nextRetryDelay: Math.min(Math.max(err.opts.retry_after_ms, 1_000), MAX_RETRY_AFTER_MS) }
        : {}),
    });
  }
  if (err instanceof ApplicationFailure) return err;
  // Anything else (a bug, a database error in an adapter): retried, and described in general terms.
  logger?.error({ job_id, err }, 'video provider activity failed');
  return ApplicationFailure.create({ type: 'ProviderError', message: 'the video provider call failed (internal_error)', details: [{ code: 'internal_error' }] });
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
const HEARTBEAT_EVERY_MS = 5_000;

/** Videos copied from a provider into storage at once by one worker process (each is held in memory), and copies left waiting. */
export const MAX_CONCURRENT_OUTPUT_COPIES = 8;
const MAX_WAITING_OUTPUT_COPIES = 10_000;

/** Consecutive failed provider polls of one operation before the job fails with the last error. */
export const MAX_CONSECUTIVE_POLL_FAILURES = 20;

/** Attempts at submitting a job whose failures are passing ones, before the job fails with the last error. */
export const MAX_SUBMIT_ATTEMPTS = 5;

/**
 * "Still running": the polling loop's normal answer (the awaiting activity's retry policy is the loop), not
 * an error to debug. It carries no stack trace: formatting one (source-mapped, as the service runs) was
 * about 2 % of the worker's main-thread CPU in a bench profile, and Temporal kept it as the activity's last failure.
 */
function operationRunning(message: string): ApplicationFailure {
  const failure = ApplicationFailure.create({ type: OPERATION_RUNNING, message, category: ApplicationFailureCategory.BENIGN });
  failure.stack = `${failure.name}: ${message}`;
  return failure;
}

/** The poll interval when the activity's input has none (scheduled by a 0.5 run: it then polls once per attempt anyway). */
const DEFAULT_POLL_INTERVAL_MS = 5_000;

/** The same failure, made final: the job fails with it instead of retrying. */
const finalFailure = (failure: ApplicationFailure) =>
  ApplicationFailure.create({ type: failure.type ?? 'ProviderError', message: failure.message, nonRetryable: true, details: failure.details ?? [] });

/** A video whose copy failed, for the operator's log (the customer sees a shortfall, refunded). */
interface FailedOutput {
  index: number;
  code: string;
  retryable: boolean;
}

/** What polls a job's provider operation: the awaiting activities (0.5 attempts) and the workers' pollers. */
export type VideoOperationPollDeps = Pick<VideoJobActivityDeps, 'db' | 'videoProviders' | 'logger'>;

export function createVideoOperationPoll(deps: VideoOperationPollDeps) {
  const providerFor = (backend: string): VideoProvider => {
    const p = deps.videoProviders.get(backend);
    if (!p) {
      throw ApplicationFailure.create({ type: 'ProviderError', message: `video backend "${backend}" is not configured`, nonRetryable: true, details: [{ code: 'provider_not_configured' }] });
    }
    return p;
  };

  /**
   * One poll of the job's operation: its final status, or a retryable failure (OPERATION_RUNNING while it
   * runs). `poll_failures`, when the caller read it with the operation, spares resetting a count already 0.
   */
  const pollOnce = async (backend: string, job_id: string, operation_id: string, poll_failures?: number): Promise<VideoOperationStatus> => {
    const started = process.hrtime.bigint();
    const observe = (result: string) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      videoProviderPollDuration.observe({ backend, result }, seconds);
      deps.logger.debug({ job_id, backend, operation_id, result, duration_ms: seconds * 1000 }, 'video provider polled');
    };
    let status: VideoOperationStatus;
    try {
      status = await providerFor(backend).poll(operation_id);
    } catch (err) {
      observe('error');
      const failure = toFailure(err, deps.logger);
      if (failure instanceof ApplicationFailure && !failure.nonRetryable) {
        const failures = await recordPollOutcome(deps.db, job_id, false);
        if (failures >= MAX_CONSECUTIVE_POLL_FAILURES) throw finalFailure(failure);
      }
      throw failure;
    }
    observe(status.state);
    if (poll_failures !== 0) await recordPollOutcome(deps.db, job_id, true);
    if (status.state === 'running') {
      throw operationRunning('the video operation is still running');
    }
    return status;
  };

  return { providerFor, pollOnce };
}

export function createVideoJobActivities(deps: VideoJobActivityDeps) {
  const outputCopies = new Semaphore(MAX_CONCURRENT_OUTPUT_COPIES, MAX_WAITING_OUTPUT_COPIES);
  const { providerFor, pollOnce } = createVideoOperationPoll(deps);

  /** The job's workspace, for logs only: a failed lookup never fails the activity. */
  const workspaceOf = async (jobId: string): Promise<string | undefined> => {
    try {
      const r = await deps.db.query<{ workspace_id: string }>('SELECT workspace_id FROM video_jobs WHERE id = $1', [jobId]);
      return r.rows[0]?.workspace_id;
    } catch {
      return undefined;
    }
  };

  /**
   * Copies output `index` into storage under a key derived from the job: a retry overwrites, never duplicates.
   * At most MAX_CONCURRENT_OUTPUT_COPIES at once in this process (each holds a video in memory), whatever the
   * activity slots: those are many, since every job awaiting its provider holds one.
   */
  const copyOne = (provider: VideoProvider, job_id: string, operation_id: string, index: number, output: VideoOutputRef): Promise<StoredVideo> =>
    withHeartbeat(index, () => outputCopies.with(() => copyOneNow(provider, job_id, operation_id, index, output)));

  const copyOneNow = async (provider: VideoProvider, job_id: string, operation_id: string, index: number, output: VideoOutputRef): Promise<StoredVideo> => {
    let body: Buffer;
    try {
      body = await withHeartbeat(index, () => provider.fetchOutput(operation_id, output));
    } catch (err) {
      throw toFailure(err, deps.logger);
    }
    if (body.length === 0 || body.length > MAX_VIDEO_OUTPUT_BYTES) {
      throw ApplicationFailure.create({ type: 'ProviderError', message: `output ${index} has ${body.length} bytes`, nonRetryable: true, details: [{ code: 'invalid_output' }] });
    }
    const storage_key = `videos/${job_id}/${index}.mp4`;
    try {
      await withHeartbeat(index, () => deps.storage.put(storage_key, body, output.content_type));
    } catch (err) {
      throw ApplicationFailure.create({
        type: 'StorageError',
        message: `output ${index} could not be stored: ${(err as Error).message}`,
        nonRetryable: isPermanentStorageError(err),
        details: [{ code: 'storage_failed' }],
      });
    }
    return { storage_key, content_type: output.content_type, bytes: body.length };
  };

  /** The request with the job's images, read from where the API kept them (never from workflow history). */
  const withStoredImages = async (request: VideoGenerationRequest): Promise<VideoSubmission> => {
    if (!request.has_image) return request;
    const inputs = await loadVideoJobInputs(deps.db, request.request_id);
    if (!inputs || (request.has_last_frame && !inputs.last_frame)) {
      throw ApplicationFailure.create({
        type: 'ProviderError',
        message: 'the images of this job are missing',
        nonRetryable: true,
        details: [{ code: 'inputs_missing' }],
      });
    }
    return { ...request, image: inputs.image, ...(request.has_last_frame ? { last_frame: inputs.last_frame } : {}) };
  };

  /**
   * Submits the job to its provider. The caller records the operation with the job at once (so a lost
   * workflow can be resumed and a retried attempt polls instead of submitting again): alone, or with the
   * awaiting attempt's row (awaitOperation). `last_attempt` makes a passing failure final (the caller's
   * retry policy has no attempt bound of its own).
   */
  const submit = async (backend: string, request: VideoGenerationRequest, last_attempt: boolean, workspace_id?: string): Promise<{ operation_id: string }> => {
    const job_id = request.request_id;
    const submission = await withStoredImages(request);
    let submitted: { operation_id: string };
    try {
      submitted = await providerFor(backend).submit(submission);
    } catch (err) {
      deps.logger.warn({ job_id, backend, err_message: (err as Error)?.message, last_attempt }, 'video job submit failed');
      const failure = toFailure(err, deps.logger);
      if (last_attempt && failure instanceof ApplicationFailure && !failure.nonRetryable) throw finalFailure(failure);
      throw failure;
    }
    deps.logger.info({ job_id, workspace_id: workspace_id ?? (await workspaceOf(job_id)), backend, model: request.model, operation_id: submitted.operation_id }, 'video job submitted');
    return submitted;
  };

  /**
   * Awaits the job's operation. An attempt scheduled with a heartbeat timeout (0.6.0 on) records itself
   * with the job (video_job_awaits: its task token, what to poll and when) and returns without completing
   * (0.7.0): the workers' pollers (src/temporal/awaits-poller.ts) poll the operation and complete the
   * attempt by its token when it ends, heartbeating it meanwhile; a pending job holds no activity slot and
   * no state in any worker. An attempt scheduled without one (runs of 0.5.x and earlier) polls once: its
   * retries are the polling loop (Temporal's infrequent-polling pattern, as in 0.5).
   */
  const awaitOperation = async (a: Awaiting): Promise<VideoOperationStatus> => {
    const ctx = Context.current();
    if (!ctx.info.heartbeatTimeoutMs) {
      if (a.record_operation) await recordVideoOperation(deps.db, a.job_id, a.operation_id);
      if (a.first_poll_after_ms > 0) throw operationRunning(`the video operation ${a.operation_id} was submitted`);
      return pollOnce(a.backend, a.job_id, a.operation_id, a.known_failures);
    }
    const interval_ms = a.pacing.poll_interval_ms ?? DEFAULT_POLL_INTERVAL_MS;
    const heartbeat_every_ms = Math.max(Math.floor(ctx.info.heartbeatTimeoutMs / 2), 1_000);
    await registerAwait(deps.db, {
      job_id: a.job_id,
      task_token: ctx.info.taskToken,
      backend: a.backend,
      operation_id: a.operation_id,
      with_operation: a.with_operation,
      poll_interval_ms: interval_ms,
      poll_max_interval_ms: Math.max(a.pacing.poll_max_interval_ms ?? interval_ms, interval_ms),
      first_poll_after_ms: a.first_poll_after_ms,
      heartbeat_every_ms,
      first_heartbeat_at_ms: ctx.info.currentAttemptScheduledTimestampMs + heartbeat_every_ms,
      ends_at_ms: ctx.info.scheduleToCloseTimeoutMs > 0 ? ctx.info.scheduledTimestampMs + ctx.info.scheduleToCloseTimeoutMs : null,
      failures_known_zero: a.known_failures === 0,
      record_operation: a.record_operation,
    });
    throw completeAsync();
  };

  return {
    /** Prices the job from the catalog (never from the request) and charges it; see chargeVideoJob. */
    async chargeVideoJob(job: VideoJobCharge): Promise<ChargeResult> {
      const model = findVideoModel(job.model);
      if (!model) {
        throw ApplicationFailure.create({ type: 'UnknownModel', message: `model ${job.model} is not in this worker's catalog`, nonRetryable: true });
      }
      const priced = estimateCostMicroEur(model, job.params, { generateAudio: job.generateAudio });
      if (priced !== job.estimated_cost_micro_eur) {
        deps.logger.warn({ job_id: job.jobId, requested_micro_eur: job.estimated_cost_micro_eur, catalog_micro_eur: priced }, 'video job estimate differs from the catalog; charging the catalog price');
      }
      const result = await chargeVideoJob(deps.db, { ...job, estimated_cost_micro_eur: priced });
      const fields = { job_id: job.jobId, attempt_id: job.attemptId, workspace_id: job.workspaceId, model: job.model, estimated_cost_micro_eur: priced };
      if (!result.ok) {
        deps.logger.info({ ...fields, reason: result.reason }, 'video job not accepted; nothing charged');
      } else {
        if (!result.already_charged) creditsCharged.inc({ kind: 'video' }, priced);
        deps.logger.info({ ...fields, balance_micro_eur: result.balance_micro_eur, already_charged: result.already_charged }, 'video job charged');
      }
      return result;
    },

    /** Decides an attempt whose charge outcome is unknown: charged, or refused for good. */
    async decideVideoJobAcceptance(a: { jobId: string; attemptId: string; workspaceId: string; fingerprint: string }): Promise<AcceptanceDecision> {
      const decision = await decideAcceptance(deps.db, a);
      deps.logger.info({ job_id: a.jobId, attempt_id: a.attemptId, workspace_id: a.workspaceId, decision: decision.decision }, 'video job acceptance decided after its charge step failed');
      return decision;
    },

    async settleVideoJob(settlement: Settlement): Promise<SettlementResult> {
      const result = await settleVideoJob(deps.db, settlement, deps.webhookEvents?.context);
      // Webhooks: start the job's recorded deliveries after the commit (idempotent; a failure retries
      // this activity, whose settlement is then a no-op, and dispatches again).
      if (deps.webhookEvents) {
        const { client, info } = Context.current();
        await dispatchJobWebhooks({ client, db: deps.db, taskQueue: info.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms }, settlement.jobId);
      }
      const error_code = result.status === 'failed' ? (result.error?.code ?? settlement.error?.code ?? 'no_videos') : null;
      if (!result.already_settled) {
        videoJobsSettled.inc({ outcome: result.status, error_code: errorCodeLabel(error_code) });
        if (result.refunded_micro_eur > 0) creditsRefunded.inc({ kind: 'video' }, result.refunded_micro_eur);
      }
      deps.logger.info(
        {
          job_id: settlement.jobId,
          workspace_id: await workspaceOf(settlement.jobId),
          outcome: result.status,
          error_code,
          delivered: settlement.outcome === 'succeeded' ? settlement.delivered : 0,
          cost_micro_eur: result.cost_micro_eur,
          refunded_micro_eur: result.refunded_micro_eur,
          already_settled: result.already_settled,
        },
        'video job settled',
      );
      return result;
    },

    /** Submits to the provider and records the operation with the job, so a lost workflow can be resumed (0.2.0 runs). */
    async submitVideoGeneration(input: { backend: string; request: VideoGenerationRequest }): Promise<{ operation_id: string }> {
      // The job's workspace (for the log) is read first: nothing stands between the submit and its record.
      const submitted = await submit(input.backend, input.request, false, await workspaceOf(input.request.request_id));
      await recordVideoOperation(deps.db, input.request.request_id, submitted.operation_id);
      return submitted;
    },

    /**
     * Awaits an operation submitted earlier (runs of 0.2.0, recovery runs): see awaitOperation. Handed to
     * the workers' pollers when scheduled with a heartbeat timeout; otherwise polled once per attempt,
     * "still running" being a benign, retryable OPERATION_RUNNING, so the activity's retry policy is the
     * polling loop and no poll adds a history event. A provider error the provider calls passing is polled
     * again (after its Retry-After when it gives one) until MAX_CONSECUTIVE_POLL_FAILURES in a row; a final
     * one fails the job.
     */
    async awaitVideoGeneration(input: { backend: string; job_id: string; operation_id: string } & PollPacing): Promise<VideoOperationStatus> {
      return awaitOperation({ backend: input.backend, job_id: input.job_id, operation_id: input.operation_id, pacing: input, known_failures: undefined, first_poll_after_ms: 0, with_operation: false, record_operation: false });
    },

    /**
     * Submits the job, then awaits its operation like awaitVideoGeneration: one activity whose first
     * attempt submits and then awaits the operation (0.6.0 polled in process, 0.7.0 hands it to the
     * workers' pollers; in 0.5.x it ended "still running" and later attempts polled), one activity and
     * one workflow task per job fewer than a submit activity followed by an awaiting one. Each attempt
     * looks for the job's recorded operation first: once the operation is recorded, a later attempt (a
     * retry after a crash or a timed-out heartbeat) awaits it and never submits again.
     * A retryable submit failure is retried with the polls' policy up to MAX_SUBMIT_ATTEMPTS; a final one
     * fails the job with its code (as the submit activity did).
     */
    async submitAndAwaitVideoGeneration(input: { backend: string; request: VideoGenerationRequest } & PollPacing): Promise<{ operation_id: string; status: VideoOperationStatus }> {
      const job_id = input.request.request_id;
      const recorded = await videoJobProgress(deps.db, job_id);
      if (recorded?.operation_id) {
        const status = await awaitOperation({ backend: input.backend, job_id, operation_id: recorded.operation_id, pacing: input, known_failures: recorded.poll_failures, first_poll_after_ms: 0, with_operation: true, record_operation: false });
        return { operation_id: recorded.operation_id, status };
      }
      const { operation_id } = await submit(input.backend, input.request, Context.current().info.attempt >= MAX_SUBMIT_ATTEMPTS, recorded?.workspace_id);
      // The operation has just started: the first poll comes after the first interval.
      const status = await awaitOperation({ backend: input.backend, job_id, operation_id, pacing: input, known_failures: 0, first_poll_after_ms: input.poll_interval_ms ?? DEFAULT_POLL_INTERVAL_MS, with_operation: true, record_operation: true });
      return { operation_id, status };
    },

    /**
     * Copies each output into storage and reports what it could not copy. A passing fault is retried (the
     * activity fails and Temporal retries it) until the last attempt, which delivers what was stored; a
     * permanent fault of one output never holds back the others.
     */
    async copyVideoOutputs(input: { backend: string; job_id: string; operation_id: string; outputs: VideoOutputRef[]; max_attempts: number }): Promise<{ videos: StoredVideo[]; failed: number }> {
      const provider = providerFor(input.backend);
      const last_attempt = Context.current().info.attempt >= input.max_attempts;
      const videos: StoredVideo[] = [];
      const failed: FailedOutput[] = [];
      let passing: ApplicationFailure | null = null;
      for (const [i, output] of input.outputs.entries()) {
        try {
          videos.push(await copyOne(provider, input.job_id, input.operation_id, i, output));
        } catch (err) {
          const failure = err instanceof ApplicationFailure ? err : ApplicationFailure.create({ message: String(err) });
          const code = (failure.details?.[0] as { code?: string } | undefined)?.code ?? 'internal_error';
          failed.push({ index: i, code, retryable: !failure.nonRetryable });
          if (!failure.nonRetryable) passing ??= failure;
        }
      }
      if (passing && !last_attempt) throw passing;
      if (failed.length > 0) {
        deps.logger.warn({ job_id: input.job_id, operation_id: input.operation_id, stored: videos.length, failed }, 'video outputs not stored; delivered as a shortfall');
      }
      return { videos, failed: failed.length };
    },

    /**
     * A cancelled job: asks the provider to stop its operation (best effort, where the provider allows it)
     * and deletes whatever outputs were already copied, so nothing of it is stored. Never fails the job.
     */
    async cancelVideoGeneration(input: { backend: string; job_id: string; operation_id: string | null; n: number }): Promise<void> {
      // A workflow that submits inside its awaiting activity does not know the operation: the job's record does.
      const operation_id = input.operation_id ?? (await videoOperationOf(deps.db, input.job_id));
      if (operation_id !== null) {
        try {
          await providerFor(input.backend).cancel(operation_id);
          deps.logger.info({ job_id: input.job_id, operation_id }, 'video provider operation cancelled');
        } catch (err) {
          deps.logger.warn({ job_id: input.job_id, operation_id, err_message: (err as Error)?.message }, 'video provider operation could not be cancelled (best effort)');
        }
      }
      for (let i = 0; i < input.n; i++) await deps.storage.delete(`videos/${input.job_id}/${i}.mp4`);
    },

    /** First release: copies every output or fails (runs started by that release still call it). */
    async storeVideoOutputs(input: { backend: string; job_id: string; operation_id: string; outputs: VideoOutputRef[] }): Promise<StoredVideo[]> {
      const provider = providerFor(input.backend);
      const stored: StoredVideo[] = [];
      for (const [i, output] of input.outputs.entries()) stored.push(await copyOne(provider, input.job_id, input.operation_id, i, output));
      return stored;
    },

    /** First release: one poll (runs started by that release still call it). */
    async pollVideoGeneration(input: { backend: string; operation_id: string }): Promise<VideoOperationStatus> {
      const started = process.hrtime.bigint();
      const observe = (result: string) => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        videoProviderPollDuration.observe({ backend: input.backend, result }, seconds);
      };
      try {
        const status = await providerFor(input.backend).poll(input.operation_id);
        observe(status.state);
        return status;
      } catch (err) {
        observe('error');
        throw toFailure(err, deps.logger);
      }
    },
  };
}

export type VideoJobActivities = ReturnType<typeof createVideoJobActivities>;
