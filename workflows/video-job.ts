// One video generation job, from charge to settlement. Orchestration only: every side effect
// (ledger, provider, storage) is an activity. Deterministic: time comes from the workflow clock.
//
//   charge ──insufficient──> rejected (nothing charged; the accept update fails with 402)
//     │ok
//   submit ─> sleep/poll (backoff, deadline, continue-as-new) ─> copy outputs ─> settle
//                                                                   (keep delivered, refund rest)
// Settlement also runs on provider failure, deadline and cancellation, in a non-cancellable scope.
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
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
import type { VideoJobActivities } from '../activities/video-job.js';
import {
  acceptJobUpdate,
  INSUFFICIENT_CREDITS,
  JOB_STATUS_SA,
  jobStateQuery,
  type JobError,
  type StoredVideo,
  type VideoJobInput,
  type VideoJobResume,
  type VideoJobState,
} from './messages.js';

// The charge decides the HTTP answer (early return), so it runs as a local activity inside the first
// workflow task: one server round trip for the whole create. It is idempotent per job, so a replay
// after a worker crash re-running it charges nothing twice.
const charging = proxyLocalActivities<Pick<VideoJobActivities, 'chargeVideoJob'>>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '5 seconds' },
});

// Settlement retries until it succeeds: it is idempotent, and a job must never stay half-billed.
const settling = proxyActivities<Pick<VideoJobActivities, 'settleVideoJob'>>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

// Provider calls are single HTTP requests: a short start-to-close timeout also bounds how long a job
// waits when the worker running the call dies (Temporal retries it on another worker after that).
const provider = proxyActivities<Pick<VideoJobActivities, 'submitVideoGeneration' | 'pollVideoGeneration'>>({
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});

const storage = proxyActivities<Pick<VideoJobActivities, 'storeVideoOutputs'>>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

/** Consecutive failed poll activities (each already retried) tolerated before the job fails. */
const MAX_CONSECUTIVE_POLL_FAILURES = 10;
const POLL_BACKOFF = 1.5;

function initialState(input: VideoJobInput): VideoJobState {
  return {
    job_id: input.job_id,
    workspace_id: input.workspace_id,
    status: 'charging',
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

export async function videoJobWorkflow(input: VideoJobInput, resume?: VideoJobResume): Promise<VideoJobState> {
  const state: VideoJobState = resume?.state ?? initialState(input);

  setHandler(jobStateQuery, () => state);
  setHandler(acceptJobUpdate, async () => {
    await condition(() => state.status !== 'charging');
    if (state.status === 'rejected') {
      throw ApplicationFailure.create({ type: INSUFFICIENT_CREDITS, message: state.error?.message ?? 'insufficient credits', nonRetryable: true });
    }
    return state;
  });

  if (!resume) {
    // Not cancellable: a charge that happened must reach settlement, so cancellation waits for it.
    const charge = await CancellationScope.nonCancellable(() => charging.chargeVideoJob({
      jobId: input.job_id,
      workflowId: workflowInfo().workflowId,
      workspaceId: input.workspace_id,
      model: input.model,
      prompt: input.prompt,
      params: input.params,
      estimated_cost_micro_eur: input.estimated_cost_micro_eur,
      created_at_ms: input.created_at_ms,
      request_fingerprint: input.request_fingerprint,
    }));
    if (!charge.ok) {
      state.status = 'rejected';
      state.error = { code: 'insufficient_credits', message: 'the workspace balance does not cover the estimated cost of this job' };
      upsertSearchAttributes([{ key: JOB_STATUS_SA, value: 'rejected' }]);
      await condition(allHandlersFinished);
      return state;
    }
    state.status = 'pending';
    upsertSearchAttributes([{ key: JOB_STATUS_SA, value: 'pending' }]);
  }

  let outcome: Outcome;
  try {
    outcome = await generate(input, state, resume);
  } catch (err) {
    if (isCancellation(err)) outcome = { kind: 'failed', error: { code: 'cancelled', message: 'the job was cancelled' } };
    else throw err;
  }

  // Settle whatever happened, even if this workflow is being cancelled.
  const settled = await CancellationScope.nonCancellable(() =>
    settling.settleVideoJob({
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
  state.error = settled.status === 'failed' ? (outcome.kind === 'failed' ? outcome.error : { code: 'no_videos', message: 'the provider returned no videos' }) : null;
  state.completed_at_ms = Date.now();
  upsertSearchAttributes([{ key: JOB_STATUS_SA, value: state.status }]);
  await condition(allHandlersFinished);
  return state;
}

/** Submits, polls until done or deadline, copies outputs. Returns the outcome; never settles. */
async function generate(input: VideoJobInput, state: VideoJobState, resume: VideoJobResume | undefined): Promise<Outcome> {
  let operation_id = resume?.operation_id;
  if (!operation_id) {
    try {
      ({ operation_id } = await provider.submitVideoGeneration({
        backend: input.backend,
        request: {
          request_id: input.job_id,
          model: input.model,
          prompt: input.prompt,
          params: input.params,
          seed: input.seed,
          parameters: input.parameters,
          // Issue 11: audio, negative prompt and the job's stored images (loaded by the activity).
          ...(patched('video-job-inputs')
            ? { generate_audio: input.generate_audio, negative_prompt: input.negative_prompt, has_image: input.has_image, has_last_frame: input.has_last_frame }
            : {}),
        },
      }));
    } catch (err) {
      if (isCancellation(err)) throw err;
      return { kind: 'failed', error: providerError(err, 'submit_failed') };
    }
  }

  let interval_ms = resume?.next_poll_interval_ms ?? input.poll_interval_ms;
  let polls_total = resume?.polls_total ?? 0;
  let polls_this_run = 0;
  let consecutive_failures = 0;
  for (;;) {
    const remaining_ms = input.deadline_at_ms - Date.now();
    if (remaining_ms <= 0) {
      return { kind: 'failed', error: { code: 'deadline_exceeded', message: `the job did not finish within its deadline` } };
    }
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
    if (status.state === 'failed') return { kind: 'failed', error: { code: status.code, message: status.message } };
    // Never deliver (or bill) more videos than were asked for.
    const outputs = status.outputs.slice(0, input.params.n);
    if (outputs.length === 0) return { kind: 'failed', error: { code: 'no_videos', message: 'the provider returned no videos' } };
    try {
      const videos = await storage.storeVideoOutputs({ backend: input.backend, job_id: input.job_id, operation_id, outputs });
      return { kind: 'succeeded', videos };
    } catch (err) {
      if (isCancellation(err)) throw err;
      return { kind: 'failed', error: { code: 'storage_failed', message: 'the generated videos could not be stored' } };
    }
  }
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
