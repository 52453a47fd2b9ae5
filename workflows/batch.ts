// One batch, from its first request to its end. Orchestration only: the batch's rows, money and files
// are the activities' (activities/batch.ts); the requests run as they would alone.
//
//   claim requests that may start (the workspace's batch concurrency, its pending-job cap) ──> run each:
//     video: the video job workflow as a child (its id the job's, fixed at creation: never started twice)
//     speech: one activity (speaks, keeps the audio, settles; idempotent)
//   ──> end each from what its job or speech recorded ──> claim again ... ──> end the batch (release, files, webhook)
//
// A stop (cancel, or the end of the completion window) starts nothing more; what runs finishes. Every
// RUN_ITEMS_MAX requests started (or a long history) the run waits for those running and continues as new,
// so a batch of 10,000 requests keeps a bounded history.
import {
  ApplicationFailure,
  ParentClosePolicy,
  WorkflowIdReusePolicy,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  sleep,
  startChild,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { BatchActivities } from '../activities/batch.js';
import type { ClaimedItem } from '../src/batches/items.js';
import {
  stopBatchSignal,
  videoJobStartSearchAttributes,
  videoJobWorkflowId,
  type BatchWorkflowInput,
  type JobError,
  type VideoJobInput,
  type VideoJobState,
} from './messages.js';
import type { videoJobWorkflow } from './video-job.js';

/** Requests started by one run before it continues as new (about 10 history events each). */
export const RUN_ITEMS_MAX = 200;
/** A run also continues as new past this many history events. */
const RUN_HISTORY_MAX = 4_000;
/** How long a claim that found no room waits before it looks again (another batch's request may end). */
const ROOM_WAIT = '2 seconds';
/** A batch job's charge may take this long (the database down, a worker lost) before it is refused. */
const BATCH_JOB_ACCEPT_WINDOW_MS = 10 * 60_000;

// Every step is idempotent and retried until it succeeds: a batch never stays half-run. Each is short (a
// transaction, or one speech): an attempt whose worker died is tried again after 30 s.
const steps = proxyActivities<BatchActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export async function batchWorkflow(input: BatchWorkflowInput): Promise<void> {
  let stopRequested = false;
  let expired = false;
  let stopped = false;
  let seq = input.claim_seq ?? 0;
  let startedThisRun = 0;
  let queued = 1;
  let ended = 0;
  const running = new Set<number>();
  setHandler(stopBatchSignal, () => {
    stopRequested = true;
  });
  // The completion window; the timer left running when the batch ends first costs no event.
  void sleep(Math.max(input.expires_at_ms - Date.now(), 1)).then(() => {
    expired = true;
  });

  const continuing = () =>
    startedThisRun >= RUN_ITEMS_MAX || workflowInfo().historyLength > RUN_HISTORY_MAX || workflowInfo().continueAsNewSuggested;

  for (;;) {
    if (expired && !stopped) {
      await steps.stopBatch({ batch_id: input.batch_id, ending: 'expired' });
      stopped = true;
    }
    if (stopRequested) stopped = true;
    if (!stopped && queued > 0 && !continuing()) {
      // A recovery run's first claim takes on what its earlier runs left running (started again: each is idempotent).
      const adopt = input.recovered === true && seq === (input.claim_seq ?? 0);
      const claim = await steps.claimBatchItems({ batch_id: input.batch_id, seq, ...(adopt ? { adopt_running: true } : {}) });
      seq++;
      queued = claim.queued;
      if (claim.stopping) stopped = true;
      for (const item of claim.items) {
        running.add(item.idx);
        startedThisRun++;
        void run(item).then(() => {
          running.delete(item.idx);
          ended++;
        });
      }
      if (queued === 0 && running.size === 0) break;
      if (claim.items.length === 0 && !stopped) {
        // No room: wait for one of ours to end, a stop, or a while (room elsewhere in the workspace).
        const before = ended;
        await condition(() => ended !== before || stopRequested || expired, ROOM_WAIT);
        continue;
      }
      if (running.size > 0 && queued > 0 && !stopped) {
        const before = ended;
        await condition(() => ended !== before || stopRequested || expired);
      }
      continue;
    }
    // Stopping, continuing as new, or nothing left to start: wait for what runs.
    if (running.size === 0) break;
    await condition(() => running.size === 0 || (stopRequested && !stopped) || (expired && !stopped));
  }

  if (!stopped && queued > 0) {
    await continueAsNew<typeof batchWorkflow>({ ...input, claim_seq: seq, recovered: false });
  }
  await steps.finishBatch({ batch_id: input.batch_id });

  async function run(item: ClaimedItem): Promise<void> {
    if (item.kind === 'speech') {
      await steps.runBatchSpeech({ batch_id: input.batch_id, idx: item.idx });
      return;
    }
    let refusal: JobError | null = null;
    try {
      const child = await startChild<typeof videoJobWorkflow>('videoJobWorkflow', {
        workflowId: videoJobWorkflowId(item.request_id),
        args: [videoJobInput(input, item)],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        // A job's workflow never runs twice: one that exists already (a recovery run's adopted request) is read from its row.
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        typedSearchAttributes: videoJobStartSearchAttributes(input.workspace_id, String(item.request['model'])),
      });
      const state: VideoJobState = await child.result();
      if (state.status !== 'succeeded' && state.status !== 'failed') refusal = state.error;
    } catch (err) {
      // The job's workflow failed or could not start: its row (settled, pending, or none) says how the request ended.
      if (err instanceof ApplicationFailure && err.nonRetryable) refusal = { code: 'not_started', message: err.message };
    }
    await steps.endBatchVideoItem({ batch_id: input.batch_id, idx: item.idx, refusal });
  }
}

/** The job's workflow input: the request as validated at creation, its times from now. */
function videoJobInput(input: BatchWorkflowInput, item: ClaimedItem): VideoJobInput {
  const now = Date.now();
  const request = item.request as unknown as Omit<
    VideoJobInput,
    'job_id' | 'workspace_id' | 'estimated_cost_micro_eur' | 'created_at_ms' | 'deadline_at_ms'
  >;
  return {
    ...request,
    job_id: item.request_id,
    workspace_id: input.workspace_id,
    estimated_cost_micro_eur: item.estimated_cost_micro_eur,
    created_at_ms: now,
    deadline_at_ms: now + input.job_timeout_ms,
    attempt_id: uuid4(),
    accept_by_ms: now + BATCH_JOB_ACCEPT_WINDOW_MS,
    sticky_refusal: false,
    batch_id: input.batch_id,
  };
}
