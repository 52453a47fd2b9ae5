// One video generation job, from charge to settlement. Orchestration only: every side effect
// (ledger, provider, storage) is an activity. Deterministic: time comes from the workflow clock.
//
//   charge ──refused (credits, too late, another attempt won)──> ends; nothing charged (the accept update fails)
//     │ok
//   submit and await the operation (one activity) ─> copy outputs ─> settle (keep what was delivered, refund the rest)
//
// Settlement also runs on provider failure, deadline and cancellation, in a non-cancellable scope.
//
// Versions (recorded histories of each are replayed in CI, test/histories/):
// - First release: polls in a loop of durable timers and poll activities, continuing as new every
//   `max_polls_per_run` polls (about 11 history events per poll). Kept below for runs it started.
// - PATCH_AWAIT_BY_RETRY: one activity awaits the operation, its retry policy being the polling loop, so
//   a job's history has a constant number of events whatever the generation time (Temporal's
//   "infrequent polling" pattern). Outputs are copied with partial delivery.
// - PATCH_CANCEL_OPERATION: a cancelled job (the cancelJob update, or a cancellation of the workflow)
//   cancels its provider operation and deletes what was copied before settling.
// - PATCH_SUBMIT_WITHIN_AWAIT (0.3.0): the awaiting activity submits in its first attempt (it finds the
//   job's operation recorded on every later one), so a job has no submit activity and one workflow task
//   less: the cost per create that issue 9 measured. Runs of 0.2.0 keep their submit activity.
// - PATCH_DECIDE_WHEN_LATE (0.4.0): a run whose charge step starts past the attempt's acceptance deadline
//   decides the attempt (decideVideoJobAcceptance) instead of refusing it unseen: a worker that charged and
//   then froze past its workflow task's timeout runs the task again late, and its job, charged and answered
//   202 by the API, goes on instead of being refunded by the reconciler. Only late runs call this patch.
// - PATCH_STATUS_AT_START (0.5.0): the API starts a job's workflow with its status search attribute already
//   "pending" (it was "charging"), so an accepted job's first workflow task upserts nothing but the patch's
//   own TemporalChangeVersion: one search attribute upsert (a history event and a visibility write) fewer
//   per create. This patch also stands for PATCH_SUBMIT_WITHIN_AWAIT, whose behaviour it keeps: a second
//   patch in the same task would add its own upsert back. Runs started "charging" keep upserting.
// - 0.6.0, no patch: the awaiting activity is scheduled with a heartbeat timeout and a start-to-close timeout
//   as long as its schedule-to-close one, and polls in the worker until the operation ends (Temporal's
//   frequent-polling pattern): a poll costs a provider call instead of a Temporal round trip (timer,
//   dispatch, a failed attempt), and a create no longer ends its first attempt as "still running". Its retries
//   now only take over from a worker that died or stopped. The activity tells the two apart by its heartbeat
//   timeout: attempts that runs of 0.5.x and earlier scheduled have none, and keep polling once per attempt.
// Changes that add no command (bounded acceptance, the cancelJob handler, arguments and timeouts of
// activities) need no patch: what a replay compares is the sequence of commands.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  TimeoutFailure,
  condition,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
  allHandlersFinished,
} from '@temporalio/workflow';
import { RetryState } from '@temporalio/common';
import type { VideoJobActivities } from '../activities/video-job.js';
import type { ChargeResult } from '../src/billing/video-job-billing.js';
import type { VideoGenerationRequest, VideoOperationStatus } from '../src/providers/video/types.js';
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
  OPERATION_RUNNING,
  POLL_BACKOFF,
  STATUS_AT_START,
  type JobError,
  type StoredVideo,
  type VideoJobInput,
  type VideoJobResume,
  type VideoJobState,
} from './messages.js';

export const PATCH_AWAIT_BY_RETRY = 'await-operation-by-activity-retry';
/** A cancelled job's provider operation is cancelled (best effort) and any copied output deleted. */
export const PATCH_CANCEL_OPERATION = 'cancel-provider-operation';
/** The awaiting activity's first attempt submits: no separate submit activity, one workflow task fewer. */
export const PATCH_SUBMIT_WITHIN_AWAIT = 'submit-within-await';
/** A run that starts its charge step past the acceptance deadline decides the attempt instead of refusing it unseen. */
export const PATCH_DECIDE_WHEN_LATE = 'decide-acceptance-when-late';
/** The start set the job's status search attribute to "pending": an accepted job upserts none (implies PATCH_SUBMIT_WITHIN_AWAIT). */
export const PATCH_STATUS_AT_START = 'status-pending-from-start';

// The charge decides the HTTP answer (early return), so it runs as a local activity inside the first
// workflow task: one server round trip for the whole create. It is idempotent per job and attempt, so a
// replay after a worker crash re-running it charges nothing twice. Jobs of the first release (no
// acceptance deadline) retry it without a bound, as they did.
const chargingUnbounded = proxyLocalActivities<Pick<VideoJobActivities, 'chargeVideoJob'>>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds' },
});

/** The charge of an attempt with an acceptance deadline: bounded by what is left of its window. */
function chargingWithin(window_ms: number) {
  return proxyLocalActivities<Pick<VideoJobActivities, 'chargeVideoJob'>>({
    startToCloseTimeout: '5 seconds',
    scheduleToCloseTimeout: Math.max(window_ms, 1),
    retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '2 seconds' },
  });
}

// Money steps retry until they succeed: they are idempotent, and a job must never stay half-billed.
const money = proxyActivities<Pick<VideoJobActivities, 'settleVideoJob' | 'decideVideoJobAcceptance'>>({
  startToCloseTimeout: '40 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

// A cancelled job's clean-up is best effort and bounded: it never holds back the refund for long.
const cleanup = proxyActivities<Pick<VideoJobActivities, 'cancelVideoGeneration'>>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumAttempts: 3 },
});

// Provider calls are single HTTP requests: a short start-to-close timeout also bounds how long a job
// waits when the worker running the call dies (Temporal retries it on another worker after that).
// Runs of 0.1.0 and 0.2.0 submit with it; the first release also polls with it.
const provider = proxyActivities<Pick<VideoJobActivities, 'submitVideoGeneration' | 'pollVideoGeneration'>>({
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});

const STORE_MAX_ATTEMPTS = 10;
const storage = proxyActivities<Pick<VideoJobActivities, 'storeVideoOutputs' | 'copyVideoOutputs'>>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: STORE_MAX_ATTEMPTS },
});

/** Consecutive failed poll activities (each already retried) tolerated before the job fails (first release). */
const MAX_CONSECUTIVE_POLL_FAILURES = 10;

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
  };
}

type Outcome = { kind: 'succeeded'; videos: StoredVideo[] } | { kind: 'failed'; error: JobError };

const failed = (code: string, message: string): Outcome => ({ kind: 'failed', error: { code, message } });
const DEADLINE_EXCEEDED = failed('deadline_exceeded', 'the job did not finish within its deadline');
const CANCELLED = failed('cancelled', 'the job was cancelled');

export async function videoJobWorkflow(input: VideoJobInput, resume?: VideoJobResume): Promise<VideoJobState> {
  const state: VideoJobState = resume?.state ?? initialState(input);
  const progress: Progress = { operation_id: resume?.operation_id ?? input.recovery?.operation_id ?? undefined };
  let generation: CancellationScope | undefined;
  let cancelRequested = false;
  let settling = false;
  let statusFromStart = false;

  setHandler(jobStateQuery, () => state);
  setHandler(acceptJobUpdate, async () => {
    await condition(() => state.status !== 'charging');
    const refusal = refusalOf(state);
    if (refusal) {
      // The attempt is named: an API waiting on another attempt of the same Idempotency-Key may try again.
      throw ApplicationFailure.create({ type: refusal, message: state.error?.message ?? refusal, nonRetryable: true, details: [{ attempt_id: input.attempt_id ?? null }] });
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
          throw ApplicationFailure.create({ type: JOB_NOT_CANCELLABLE, message: `the job is ${settling ? 'finishing' : state.status}; it can no longer be cancelled`, nonRetryable: true });
        }
      },
    },
  );

  if (!resume && !input.recovery) {
    const accepted = await acceptAndCharge(input, state);
    if (!accepted) {
      upsertSearchAttributes([{ key: JOB_STATUS_SA, value: state.status }]);
      await condition(allHandlersFinished);
      return state;
    }
    state.status = 'pending';
    // Whether the start's search attribute says so is part of the run's first event: deterministic.
    statusFromStart = workflowInfo().typedSearchAttributes.get(JOB_STATUS_SA) === STATUS_AT_START && patched(PATCH_STATUS_AT_START);
    if (!statusFromStart) upsertSearchAttributes([{ key: JOB_STATUS_SA, value: 'pending' }]);
  }

  let outcome: Outcome;
  try {
    outcome = await CancellationScope.cancellable(async () => {
      generation = CancellationScope.current();
      if (cancelRequested) throw new CancelledFailure('the job was cancelled');
      return generate(input, state, resume, progress, statusFromStart);
    });
  } catch (err) {
    if (!isCancellation(err)) throw err;
    outcome = CANCELLED;
    if (patched(PATCH_CANCEL_OPERATION)) {
      // Best effort, and never in the way of the refund: a provider that cannot cancel still settles.
      await CancellationScope.nonCancellable(() =>
        cleanup.cancelVideoGeneration({ backend: input.backend, job_id: input.job_id, operation_id: progress.operation_id ?? null, n: input.params.n }),
      ).catch(() => undefined);
    }
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
      completed_at_ms: Date.now(),
    }),
  );
  state.status = settled.status;
  state.cost_micro_eur = settled.cost_micro_eur;
  state.refunded_micro_eur = settled.refunded_micro_eur;
  state.videos = settled.status === 'succeeded' && outcome.kind === 'succeeded' ? outcome.videos : [];
  state.error =
    settled.status === 'failed'
      ? (settled.error ?? (outcome.kind === 'failed' ? outcome.error : { code: 'no_videos', message: 'the provider returned no videos' }))
      : null;
  state.completed_at_ms = Date.now();
  upsertSearchAttributes([{ key: JOB_STATUS_SA, value: state.status }]);
  await condition(allHandlersFinished);
  return state;
}

/** The provider operation of the job, once known (for a cancellation to cancel it). */
interface Progress {
  operation_id: string | undefined;
}

/** The failure type of the accept update for a refused attempt, or null when it was accepted. */
function refusalOf(state: VideoJobState): string | null {
  switch (state.status) {
    case 'rejected':
      return state.error?.code === 'key_spend_limit_exceeded' ? KEY_SPEND_LIMIT_EXCEEDED : INSUFFICIENT_CREDITS;
    case 'not_accepted':
      return NOT_ACCEPTED_IN_TIME;
    case 'duplicate':
      return CHARGED_BY_ANOTHER_ATTEMPT;
    default:
      return null;
  }
}

/**
 * The charge step. Returns whether the job was accepted (charged); otherwise sets the refusal on `state`.
 * Not cancellable: a charge that happened must reach settlement, so cancellation waits for it.
 */
async function acceptAndCharge(input: VideoJobInput, state: VideoJobState): Promise<boolean> {
  const bounded = input.accept_by_ms !== undefined && input.attempt_id !== undefined;
  let charge: ChargeResult;
  if (bounded && Date.now() >= input.accept_by_ms!) {
    // This run's task started after the API stopped waiting for it: no worker, a backlog, or a worker that
    // charged and then froze past its workflow task's timeout (its task is run again, later).
    if (patched(PATCH_DECIDE_WHEN_LATE)) {
      // Its charge may have committed: decide (find it, or refuse the attempt for good), never guess.
      charge = await decidedAcceptance(input);
    } else {
      charge = { ok: false, reason: 'not_accepted_in_time' }; // runs of 0.3.x and earlier: refused unseen
    }
  } else {
    const request = {
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
      backend: input.backend,
      deadline_at_ms: input.deadline_at_ms,
    };
    const charging = bounded ? chargingWithin(input.accept_by_ms! - Date.now()) : chargingUnbounded;
    try {
      charge = await CancellationScope.nonCancellable(() => charging.chargeVideoJob(request));
    } catch (err) {
      if (!bounded) throw err;
      // The charge's outcome is unknown (timed out, failed): decide it.
      charge = await decidedAcceptance(input);
    }
  }
  if (charge.ok) {
    // Priced by the charge from the catalog (first-release results do not say: the input's estimate).
    state.estimated_cost_micro_eur = charge.estimated_cost_micro_eur ?? state.estimated_cost_micro_eur;
    return true;
  }
  switch (charge.reason) {
    case 'insufficient_credits':
      state.status = 'rejected';
      state.error = { code: 'insufficient_credits', message: 'the workspace balance does not cover the estimated cost of this job' };
      break;
    case 'key_spend_limit_exceeded':
      state.status = 'rejected';
      state.error = { code: 'key_spend_limit_exceeded', message: "the API key's spend limit does not cover the estimated cost of this job" };
      break;
    case 'not_accepted_in_time':
      state.status = 'not_accepted';
      state.error = { code: 'not_accepted_in_time', message: 'the job could not be accepted in time; nothing was charged' };
      break;
    case 'charged_by_another_attempt':
      state.status = 'duplicate';
      state.error = { code: 'charged_by_another_attempt', message: 'another request with this Idempotency-Key created the job' };
      break;
  }
  return false;
}

/** An attempt's acceptance decided under the job's lock, for good: its charge found, or the attempt refused. */
async function decidedAcceptance(input: VideoJobInput): Promise<ChargeResult> {
  const decided = await CancellationScope.nonCancellable(() =>
    money.decideVideoJobAcceptance({ jobId: input.job_id, attemptId: input.attempt_id!, workspaceId: input.workspace_id, fingerprint: input.request_fingerprint }),
  );
  return decided.decision === 'charged'
    ? { ok: true, balance_micro_eur: 0, already_charged: true, estimated_cost_micro_eur: decided.estimated_cost_micro_eur }
    : { ok: false, reason: decided.decision === 'refused' ? 'not_accepted_in_time' : 'charged_by_another_attempt' };
}

/**
 * Submits (unless resuming a known operation), awaits the operation, copies outputs. Returns the outcome; never
 * settles. `submitWithinAwait`: PATCH_STATUS_AT_START was taken, which stands for PATCH_SUBMIT_WITHIN_AWAIT.
 */
async function generate(input: VideoJobInput, state: VideoJobState, resume: VideoJobResume | undefined, progress: Progress, submitWithinAwait: boolean): Promise<Outcome> {
  let operation_id = progress.operation_id;
  if (!operation_id) {
    if (input.recovery) {
      return failed('job_interrupted', 'the job was interrupted before it reached the video provider; it is refunded in full');
    }
    if (Date.now() >= input.deadline_at_ms) return DEADLINE_EXCEEDED;
    const request = submission(input);
    if (submitWithinAwait || patched(PATCH_SUBMIT_WITHIN_AWAIT)) return submitAwaitAndCopy(input, request, progress);
    try {
      ({ operation_id } = await provider.submitVideoGeneration({ backend: input.backend, request }));
    } catch (err) {
      if (isCancellation(err)) throw err;
      return { kind: 'failed', error: providerError(err, 'submit_failed') };
    }
    progress.operation_id = operation_id;
  }
  if (patched(PATCH_AWAIT_BY_RETRY)) return awaitAndCopy(input, operation_id);
  return pollLoopFirstRelease(input, state, resume, operation_id);
}

/** What the provider is asked to generate (images are loaded by the activity, from the job's record). */
function submission(input: VideoJobInput): VideoGenerationRequest {
  return {
    request_id: input.job_id,
    model: input.model,
    prompt: input.prompt,
    params: input.params,
    seed: input.seed,
    parameters: input.parameters,
    // Arguments of a scheduled activity are not part of what a replay compares: no patch needed.
    generate_audio: input.generate_audio,
    negative_prompt: input.negative_prompt,
    has_image: input.has_image,
    has_last_frame: input.has_last_frame,
  };
}

/** Without a heartbeat for this long, the awaiting activity's attempt is given to another worker (the default). */
const AWAIT_HEARTBEAT_TIMEOUT_MS = 30_000;

/**
 * The activity that awaits the job's operation until its deadline, polling it in the worker. One attempt
 * lasts until the operation ends; a retry (after the poll interval) takes over from a worker that died
 * (no heartbeat) or stopped, and finds the operation recorded with the job.
 */
function awaitingUntil(input: VideoJobInput, remaining_ms: number) {
  return proxyActivities<Pick<VideoJobActivities, 'awaitVideoGeneration' | 'submitAndAwaitVideoGeneration'>>({
    // The deadline: when it passes, the awaiting (and its retries) stop and the job fails, refunded.
    scheduleToCloseTimeout: remaining_ms,
    startToCloseTimeout: remaining_ms,
    heartbeatTimeout: input.await_heartbeat_timeout_ms ?? AWAIT_HEARTBEAT_TIMEOUT_MS,
    retry: { initialInterval: input.poll_interval_ms, backoffCoefficient: POLL_BACKOFF, maximumInterval: input.poll_max_interval_ms },
  });
}

/** How the awaiting activity paces its polls. */
const pacing = (input: VideoJobInput) => ({ poll_interval_ms: input.poll_interval_ms, poll_max_interval_ms: input.poll_max_interval_ms });

/** Submits and awaits the operation in one activity (its first attempt submits), then copies what it produced. */
async function submitAwaitAndCopy(input: VideoJobInput, request: VideoGenerationRequest, progress: Progress): Promise<Outcome> {
  let result: { operation_id: string; status: VideoOperationStatus };
  try {
    result = await awaitingUntil(input, input.deadline_at_ms - Date.now()).submitAndAwaitVideoGeneration({ backend: input.backend, request, ...pacing(input) });
  } catch (err) {
    if (isCancellation(err)) throw err;
    if (ranOutOfTime(err)) return DEADLINE_EXCEEDED;
    return { kind: 'failed', error: providerError(err, 'submit_failed') };
  }
  progress.operation_id = result.operation_id;
  return copyOutputs(input, result.operation_id, result.status);
}

/** Awaits the operation with one activity whose retries are the polls, then copies what it produced. */
async function awaitAndCopy(input: VideoJobInput, operation_id: string): Promise<Outcome> {
  const remaining_ms = input.deadline_at_ms - Date.now();
  if (remaining_ms <= 0) return DEADLINE_EXCEEDED;
  let status: VideoOperationStatus;
  try {
    status = await awaitingUntil(input, remaining_ms).awaitVideoGeneration({ backend: input.backend, job_id: input.job_id, operation_id, ...pacing(input) });
  } catch (err) {
    if (isCancellation(err)) throw err;
    if (ranOutOfTime(err)) return DEADLINE_EXCEEDED;
    return { kind: 'failed', error: providerError(err, 'poll_failed') };
  }
  return copyOutputs(input, operation_id, status);
}

/** Copies the outputs of a finished operation into storage: what was stored is delivered, the rest is a shortfall. */
async function copyOutputs(input: VideoJobInput, operation_id: string, status: VideoOperationStatus): Promise<Outcome> {
  if (status.state === 'failed') return failed(status.code, status.message);
  if (status.state !== 'succeeded') return failed('poll_failed', 'the video provider answered with an unknown state');
  // Never deliver (or bill) more videos than were asked for.
  const outputs = status.outputs.slice(0, input.params.n);
  if (outputs.length === 0) return failed('no_videos', 'the provider returned no videos');
  try {
    const copied = await storage.copyVideoOutputs({
      backend: input.backend,
      job_id: input.job_id,
      operation_id,
      outputs,
      max_attempts: STORE_MAX_ATTEMPTS,
    });
    // Partial delivery: what was stored is delivered (and charged), the rest refunded as a shortfall.
    if (copied.videos.length > 0) return { kind: 'succeeded', videos: copied.videos };
    return failed('storage_failed', 'the generated videos could not be stored');
  } catch (err) {
    if (isCancellation(err)) throw err;
    return failed('storage_failed', 'the generated videos could not be stored');
  }
}

/** The first release's polling: durable timers and one poll activity per poll, continuing as new every max_polls_per_run. */
async function pollLoopFirstRelease(input: VideoJobInput, state: VideoJobState, resume: VideoJobResume | undefined, operation_id: string): Promise<Outcome> {
  let interval_ms = resume?.next_poll_interval_ms ?? input.poll_interval_ms;
  let polls_total = resume?.polls_total ?? 0;
  let polls_this_run = 0;
  let consecutive_failures = 0;
  for (;;) {
    const remaining_ms = input.deadline_at_ms - Date.now();
    if (remaining_ms <= 0) return DEADLINE_EXCEEDED;
    if (polls_this_run >= input.max_polls_per_run || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof videoJobWorkflow>(input, { state, operation_id, next_poll_interval_ms: interval_ms, polls_total });
    }
    await sleep(Math.min(interval_ms, remaining_ms));
    interval_ms = Math.min(Math.ceil(interval_ms * POLL_BACKOFF), input.poll_max_interval_ms);
    polls_this_run++;
    polls_total++;
    let status;
    try {
      status = await provider.pollVideoGeneration({ backend: input.backend, operation_id });
      consecutive_failures = 0;
    } catch (err) {
      if (isCancellation(err)) throw err;
      if (!isRetryableFailure(err) || ++consecutive_failures >= MAX_CONSECUTIVE_POLL_FAILURES) {
        return { kind: 'failed', error: providerError(err, 'poll_failed') };
      }
      continue;
    }
    if (status.state === 'running') continue;
    if (status.state === 'failed') return failed(status.code, status.message);
    const outputs = status.outputs.slice(0, input.params.n);
    if (outputs.length === 0) return failed('no_videos', 'the provider returned no videos');
    try {
      const videos = await storage.storeVideoOutputs({ backend: input.backend, job_id: input.job_id, operation_id, outputs });
      return { kind: 'succeeded', videos };
    } catch (err) {
      if (isCancellation(err)) throw err;
      return failed('storage_failed', 'the generated videos could not be stored');
    }
  }
}

/**
 * Whether the awaiting ended at its deadline: its schedule-to-close timeout fired, or the server did not
 * retry because the next attempt would be past it (then the last failure, "still running", comes back).
 */
function ranOutOfTime(err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false;
  if (err.cause instanceof TimeoutFailure || err.retryState === RetryState.TIMEOUT) return true;
  return err.cause instanceof ApplicationFailure && err.cause.type === OPERATION_RUNNING;
}

function isRetryableFailure(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return !(cause instanceof ApplicationFailure && cause.nonRetryable);
}

function providerError(err: unknown, fallbackCode: string): JobError {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    const details = cause.details?.[0] as { code?: string } | undefined;
    return { code: details?.code ?? fallbackCode, message: cause.message };
  }
  return { code: fallbackCode, message: 'the video provider could not be reached' };
}
