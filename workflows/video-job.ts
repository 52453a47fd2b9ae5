// One video generation job, from charge to settlement. Orchestration only: every side effect (ledger,
// provider, storage) is an activity, and time comes from the workflow clock.
//
//   charge ──refused (credits, key limit, pending jobs, too late, another attempt won)──> ends, nothing charged
//     │ accepted (the acceptJob update answers the API: early return)
//   submit ──> wait for the operationEnded signal (or the deadline) ──> copy outputs ──> settle
//
// Settlement keeps the charge for what was delivered and refunds the rest; it also runs on provider
// failure, deadline and cancellation, in a scope nothing can cancel. While the provider works, the job
// is a timer and a row the workers' poller reads (src/video-jobs/operation-poller.ts): nothing runs.
// How a change to this file ships is in docs/architecture.md ("Changing a workflow").
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  TimeoutFailure,
  allHandlersFinished,
  condition,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { RetryState, TimeoutType } from '@temporalio/common';
import type { VideoJobActivities } from '../activities/video-job.js';
import type { ChargeResult } from '../src/video-jobs/billing.js';
import {
  acceptJobUpdate,
  cancelJobUpdate,
  CHARGED_BY_ANOTHER_ATTEMPT,
  INSUFFICIENT_CREDITS,
  JOB_NOT_CANCELLABLE,
  JOB_STATUS_SA,
  jobStateQuery,
  KEY_SPEND_LIMIT_EXCEEDED,
  NOT_ACCEPTED_IN_TIME,
  operationEndedSignal,
  TOO_MANY_PENDING_JOBS,
  type JobError,
  type OperationEnded,
  type StoredVideo,
  type VideoJobInput,
  type VideoJobState,
} from './messages.js';

/** The charge decides the HTTP answer, so it runs as a local activity inside the first workflow task. */
function chargingWithin(window_ms: number) {
  return proxyLocalActivities<Pick<VideoJobActivities, 'chargeVideoJob'>>({
    startToCloseTimeout: '5 seconds',
    scheduleToCloseTimeout: Math.max(window_ms, 1),
    retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '2 seconds' },
  });
}

// Money steps retry until they succeed: they are idempotent, and a job must never stay half-billed.
// Settlement is a local activity (a short transaction): no task queue round trip, three events fewer.
const money = proxyLocalActivities<Pick<VideoJobActivities, 'settleVideoJob' | 'decideVideoJobAcceptance'>>({
  startToCloseTimeout: '40 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * Submission: one provider request (per backend tried); bounded attempts, and never past the job's deadline.
 * It heartbeats, so an attempt whose worker died, or whose result was lost in a Temporal outage, is retried
 * within 15 s (the retry finds the recorded operation). A cancel waits for a submission in flight to end,
 * so the operation it may have started is cancelled too.
 */
export const SUBMIT_ATTEMPTS_MAX = 5;
function submitting(remaining_ms: number) {
  return proxyActivities<Pick<VideoJobActivities, 'submitVideoJob'>>({
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    heartbeatTimeout: '15 seconds',
    startToCloseTimeout: '2 minutes',
    scheduleToCloseTimeout: remaining_ms,
    retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: SUBMIT_ATTEMPTS_MAX },
  });
}

// Copying downloads each output and stores it; it heartbeats, so a dead worker's copy moves on in 30 s.
const STORE_ATTEMPTS_MAX = 10;
const storage = proxyActivities<Pick<VideoJobActivities, 'copyVideoOutputs'>>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: STORE_ATTEMPTS_MAX },
});

// A cancelled job's clean-up is bounded: it never holds back the settlement for long.
const cleanup = proxyActivities<Pick<VideoJobActivities, 'cancelVideoOperation'>>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 3 },
});

type Outcome =
  | { kind: 'succeeded'; videos: StoredVideo[] }
  /**
   * `billed`: the provider bills requests the cancel stopped while they ran, so their share of the charge is
   * kept; `cancel_units` are the provider's counts (absent from an activity that gave none).
   */
  | { kind: 'failed'; error: JobError; billed?: boolean; cancel_units?: { billed_units: number; ended_units: number } };

const failed = (code: string, message: string): Outcome => ({ kind: 'failed', error: { code, message } });
const DEADLINE_EXCEEDED = failed('deadline_exceeded', 'the job did not finish within its deadline');

export async function videoJobWorkflow(input: VideoJobInput): Promise<VideoJobState> {
  const state = initialState(input);
  /** The provider operation, once submitted (or the one a recovery run resumes). */
  let operation_id: string | undefined = input.recovery?.operation_id ?? undefined;
  let ended: OperationEnded | undefined;
  let generation: CancellationScope | undefined;
  let cancelRequested = false;
  let settling = false;

  setHandler(jobStateQuery, () => state);
  setHandler(acceptJobUpdate, async () => {
    await condition(() => state.status !== 'charging');
    const refusal = refusalOf(state);
    if (refusal) {
      // The attempt is named: an API waiting on another attempt of the same Idempotency-Key may try again.
      throw ApplicationFailure.create({
        type: refusal,
        message: state.error?.message ?? refusal,
        nonRetryable: true,
        details: [{ attempt_id: input.attempt_id ?? null }],
      });
    }
    return state;
  });
  setHandler(
    cancelJobUpdate,
    async () => {
      cancelRequested = true;
      generation?.cancel();
      await condition(() => state.status === 'succeeded' || state.status === 'failed');
      return state;
    },
    {
      // Refused without a trace in history once the job settles: it is then charged for what it
      // delivered, or failed and refunded, never both.
      validator: () => {
        if (state.status !== 'pending' || settling) {
          throw ApplicationFailure.create({
            type: JOB_NOT_CANCELLABLE,
            message: `the job is ${settling ? 'finishing' : state.status}; it can no longer be cancelled`,
            nonRetryable: true,
          });
        }
      },
    },
  );
  // The first report of the job's operation counts; a report of another operation (or a repeat) changes nothing.
  setHandler(operationEndedSignal, (report) => {
    if (ended === undefined && (operation_id === undefined || report.operation_id === operation_id)) ended = report;
  });

  if (!input.recovery) {
    if (!(await charge(input, state))) {
      upsertSearchAttributes([{ key: JOB_STATUS_SA, value: state.status }]);
      await condition(allHandlersFinished);
      return state;
    }
    state.status = 'pending';
  }

  let outcome: Outcome;
  try {
    outcome = await CancellationScope.cancellable(async () => {
      generation = CancellationScope.current();
      if (cancelRequested) throw new CancelledFailure('the job was cancelled');
      return generate();
    });
  } catch (err) {
    if (!isCancellation(err)) throw err;
    outcome = await cancelled();
  }

  // Settle whatever happened, even if this workflow is being cancelled.
  settling = true;
  const settled = await CancellationScope.nonCancellable(() =>
    money.settleVideoJob({
      jobId: input.job_id,
      outcome: outcome.kind,
      delivered: outcome.kind === 'succeeded' ? outcome.videos.length : 0,
      videos: outcome.kind === 'succeeded' ? outcome.videos : [],
      error: outcome.kind === 'failed' ? outcome.error : null,
      billed_without_delivery: outcome.kind === 'failed' && outcome.billed === true,
      cancel_units: outcome.kind === 'failed' ? outcome.cancel_units : undefined,
      completed_at_ms: Date.now(),
    }),
  );
  state.status = settled.status;
  state.cost_micro_eur = settled.cost_micro_eur;
  state.refunded_micro_eur = settled.refunded_micro_eur;
  state.videos = settled.status === 'succeeded' && outcome.kind === 'succeeded' ? outcome.videos : [];
  state.error = settled.status === 'failed' ? (settled.error ?? null) : null;
  state.completed_at_ms = Date.now();
  upsertSearchAttributes([{ key: JOB_STATUS_SA, value: state.status }]);
  await condition(allHandlersFinished);
  return state;

  /** Submits (or finds the recorded operation), waits for its end until the deadline, copies the outputs. */
  async function generate(): Promise<Outcome> {
    if (input.recovery && !operation_id) {
      return failed('job_interrupted', 'the job was interrupted before it reached the video provider; it is refunded in full');
    }
    const remaining_ms = input.deadline_at_ms - Date.now();
    if (remaining_ms <= 0) return DEADLINE_EXCEEDED;
    try {
      const submitted = await submitting(remaining_ms).submitVideoJob({
        request: submission(input),
        backends: input.backends,
        max_attempts: SUBMIT_ATTEMPTS_MAX,
      });
      operation_id = submitted.operation_id;
      state.backend = submitted.backend;
    } catch (err) {
      if (isCancellation(err)) throw err;
      switch (submissionEnd(err)) {
        case 'lost_after_cancel':
          // A run started by 1.0.0 that reached this point settles as that release does: as past its deadline, with no clean-up activity.
          if (!patched(CANCEL_OF_LOST_SUBMISSION_PATCH)) return DEADLINE_EXCEEDED;
          throw new CancelledFailure('the job was cancelled');
        case 'deadline':
          return DEADLINE_EXCEEDED;
        case 'failed':
          return { kind: 'failed', error: providerError(err, 'submit_failed') };
      }
    }
    if (ended && ended.operation_id !== operation_id) ended = undefined;
    // The deadline's timer is left running when the signal wins: a timer still open when the run ends
    // costs no history event, a cancelled one would.
    const deadline = sleep(Math.max(input.deadline_at_ms - Date.now(), 1)).then(() => 'deadline' as const);
    const report = await Promise.race([condition(() => ended !== undefined).then(() => ended!), deadline]);
    if (report === 'deadline') return DEADLINE_EXCEEDED;
    if (report.end.state === 'failed') return failed(report.end.code, report.end.message);
    return copy(report.end.outputs);
  }

  /** Copies the outputs into storage: what was stored is delivered (and charged), the rest refunded as a shortfall. */
  async function copy(all: { ref: string; content_type: string }[]): Promise<Outcome> {
    // Never deliver (or bill) more videos than were asked for.
    const outputs = all.slice(0, input.params.n);
    if (outputs.length === 0) return failed('no_videos', 'the provider returned no videos');
    try {
      const copied = await storage.copyVideoOutputs({
        backend: state.backend!,
        job_id: input.job_id,
        operation_id: operation_id!,
        outputs,
        max_attempts: STORE_ATTEMPTS_MAX,
      });
      if (copied.videos.length > 0) return { kind: 'succeeded', videos: copied.videos };
    } catch (err) {
      if (isCancellation(err)) throw err;
    }
    return failed('storage_failed', 'the generated videos could not be stored');
  }

  /**
   * A cancelled job: asks the provider to stop its operation and deletes anything copied. Free before the
   * provider accepted the job; after that, the share of the charge of the requests the provider bills and
   * the cancel stopped while they ran is kept (its answer is recorded with the job); videos already made
   * are neither delivered nor charged.
   */
  async function cancelled(): Promise<Outcome> {
    const outcome: Outcome = { kind: 'failed', error: { code: 'cancelled', message: 'the job was cancelled' } };
    try {
      const answer = await CancellationScope.nonCancellable(() =>
        cleanup.cancelVideoOperation({
          backend: state.backend,
          job_id: input.job_id,
          operation_id: operation_id ?? null,
          n: input.params.n,
        }),
      );
      if (answer.billed) {
        const counted = typeof answer.billed_units === 'number' && typeof answer.ended_units === 'number';
        return {
          kind: 'failed',
          billed: true,
          ...(counted ? { cancel_units: { billed_units: answer.billed_units, ended_units: answer.ended_units } } : {}),
          error: {
            code: 'cancelled',
            message: 'the job was cancelled after the provider started it; the provider bills it, so it is charged',
          },
        };
      }
    } catch {
      // The provider could not be asked: nothing says it bills the operation, so the customer is refunded.
    }
    return outcome;
  }
}

function initialState(input: VideoJobInput): VideoJobState {
  return {
    job_id: input.job_id,
    workspace_id: input.workspace_id,
    status: input.recovery ? 'pending' : 'charging',
    model: input.model,
    params: input.params,
    created_at_ms: input.created_at_ms,
    completed_at_ms: null,
    estimated_cost_micro_eur: input.estimated_cost_micro_eur,
    cost_micro_eur: null,
    refunded_micro_eur: 0,
    videos: [],
    error: null,
    request_fingerprint: input.request_fingerprint,
    // A recovery run resumes the operation of the backend that accepted it (its only backend).
    backend: input.recovery ? (input.backends[0] ?? null) : null,
    progress: null,
    queue_position: null,
  };
}

/** The failure type of the accept update for a refused attempt, or null when it was accepted. */
function refusalOf(state: VideoJobState): string | null {
  switch (state.status) {
    case 'rejected':
      return state.error?.code === 'key_spend_limit_exceeded' ? KEY_SPEND_LIMIT_EXCEEDED : INSUFFICIENT_CREDITS;
    case 'limited':
      return TOO_MANY_PENDING_JOBS;
    case 'not_accepted':
      return NOT_ACCEPTED_IN_TIME;
    case 'duplicate':
      return CHARGED_BY_ANOTHER_ATTEMPT;
    default:
      return null;
  }
}

const REFUSALS: Record<Exclude<ChargeResult, { ok: true }>['reason'], { status: VideoJobState['status']; error: JobError }> = {
  insufficient_credits: {
    status: 'rejected',
    error: { code: 'insufficient_credits', message: 'the workspace balance does not cover the estimated cost of this job' },
  },
  key_spend_limit_exceeded: {
    status: 'rejected',
    error: { code: 'key_spend_limit_exceeded', message: "the API key's spend limit does not cover the estimated cost of this job" },
  },
  too_many_pending_jobs: {
    status: 'limited',
    error: { code: 'too_many_pending_jobs', message: 'the workspace has its maximum of pending jobs; wait for one to finish' },
  },
  not_accepted_in_time: {
    status: 'not_accepted',
    error: { code: 'not_accepted_in_time', message: 'the job could not be accepted in time; nothing was charged' },
  },
  charged_by_another_attempt: {
    status: 'duplicate',
    error: { code: 'charged_by_another_attempt', message: 'another request with this Idempotency-Key created the job' },
  },
};

/**
 * The charge step: whether the job was accepted (charged); otherwise sets the refusal on `state`. Not
 * cancellable: a charge that happened must reach settlement. A run whose task starts after the API
 * stopped waiting (no worker in time, a worker that charged and froze) decides the attempt instead: its
 * charge found, or the attempt refused for good.
 */
async function charge(input: VideoJobInput, state: VideoJobState): Promise<boolean> {
  if (input.attempt_id === undefined || input.accept_by_ms === undefined)
    throw ApplicationFailure.nonRetryable('a job run without an attempt to charge');
  let result: ChargeResult;
  if (Date.now() >= input.accept_by_ms) {
    result = await decidedAcceptance(input);
  } else {
    try {
      result = await CancellationScope.nonCancellable(() =>
        chargingWithin(input.accept_by_ms! - Date.now()).chargeVideoJob({
          jobId: input.job_id,
          attemptId: input.attempt_id,
          workflowId: workflowInfo().workflowId,
          workspaceId: input.workspace_id,
          model: input.model,
          prompt: input.prompt,
          params: input.params,
          estimated_cost_micro_eur: input.estimated_cost_micro_eur,
          generateAudio: input.generate_audio,
          created_at_ms: input.created_at_ms,
          request_fingerprint: input.request_fingerprint,
          accept_by_ms: input.accept_by_ms,
          sticky_refusal: input.sticky_refusal,
          apiKeyId: input.api_key_id,
          backend: input.backends[0],
          deadline_at_ms: input.deadline_at_ms,
          ...(input.batch_id !== undefined ? { batchId: input.batch_id } : {}),
        }),
      );
    } catch {
      // The charge's outcome is unknown (timed out, failed): decide it.
      result = await decidedAcceptance(input);
    }
  }
  if (result.ok) {
    state.estimated_cost_micro_eur = result.estimated_cost_micro_eur; // priced by the charge, from the catalog
    return true;
  }
  const refusal = REFUSALS[result.reason];
  state.status = refusal.status;
  state.error = refusal.error;
  return false;
}

/** An attempt's acceptance decided under the job's lock, for good: its charge found, or the attempt refused. */
async function decidedAcceptance(input: VideoJobInput): Promise<ChargeResult> {
  const decided = await CancellationScope.nonCancellable(() =>
    money.decideVideoJobAcceptance({
      jobId: input.job_id,
      attemptId: input.attempt_id!,
      workspaceId: input.workspace_id,
      fingerprint: input.request_fingerprint,
    }),
  );
  if (decided.decision === 'charged')
    return { ok: true, balance_micro_eur: 0, already_charged: true, estimated_cost_micro_eur: decided.estimated_cost_micro_eur };
  return { ok: false, reason: decided.decision === 'refused' ? 'not_accepted_in_time' : 'charged_by_another_attempt' };
}

/** What the provider is asked to generate (images are loaded by the activity, from the job's record). */
function submission(input: VideoJobInput) {
  return {
    request_id: input.job_id,
    model: input.model,
    prompt: input.prompt,
    params: input.params,
    seed: input.seed,
    parameters: input.parameters,
    generate_audio: input.generate_audio,
    negative_prompt: input.negative_prompt,
    has_image: input.has_image,
    has_last_frame: input.has_last_frame,
    deadline_at_ms: input.deadline_at_ms,
  };
}

/**
 * How a failed submission ends the job. At the job's deadline: its schedule-to-close timeout (the time
 * left to the deadline), or an attempt that timed out with no time left for another. An attempt that
 * timed out earlier (its worker died, its completion was lost) is retried by Temporal within the
 * deadline, as any passing failure is; one still failing after the last attempt is a failed submission.
 * Temporal retries no attempt of an activity whose cancel was requested: a lost attempt's timeout then
 * ends it, and the job is cancelled (its recorded operation, if any, cancelled too).
 */
export function submissionEnd(err: unknown): 'deadline' | 'lost_after_cancel' | 'failed' {
  if (!(err instanceof ActivityFailure && err.cause instanceof TimeoutFailure)) return 'failed';
  if (err.retryState === RetryState.CANCEL_REQUESTED) return 'lost_after_cancel';
  if (err.cause.timeoutType === TimeoutType.SCHEDULE_TO_CLOSE || err.retryState === RetryState.TIMEOUT) return 'deadline';
  return 'failed';
}

/** A cancelled job whose submission was lost goes through the cancel's clean-up (one activity more than 1.0.0 ran). */
const CANCEL_OF_LOST_SUBMISSION_PATCH = 'cancel-of-lost-submission';

function providerError(err: unknown, fallbackCode: string): JobError {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure)
    return { code: fallbackCode, message: 'the submission to the video provider did not complete in any of its attempts' };
  if (cause instanceof ApplicationFailure) {
    const details = cause.details?.[0] as { code?: string } | undefined;
    return { code: details?.code ?? fallbackCode, message: cause.message };
  }
  return { code: fallbackCode, message: 'the video provider could not be reached' };
}
