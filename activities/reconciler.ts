// The reconciler's work (workflows/reconciler.ts). Idempotent: running it twice, or on two workers,
// settles nothing twice (a restarted job's workflow id is the job's, and settlement is once per job).
//
// A pending job whose workflow is closed (an operator's terminate, a run that failed) or gone (deleted,
// a lost namespace) is restarted as a recovery run of the same workflow id: already charged, it resumes
// the provider operation recorded with the job, or, when none was recorded, fails with a full refund.
import { Context } from '@temporalio/activity';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import { releaseExpiredSpeechHolds, SPEECH_HOLD_TTL_MS } from '../src/billing/speech-billing.js';
import { videoJobWorkflowState } from '../src/temporal/workflow-states.js';
import { dispatchUndispatched } from '../src/webhooks/dispatch.js';
import { videoJobWorkflowId, type VideoJobInput, type VideoParams } from '../workflows/messages.js';

export interface ReconcilerActivityDeps {
  db: Db;
  logger: Logger;
  taskQueue: string;
  video: { pollIntervalMs: number; pollMaxIntervalMs: number; jobTimeoutMs: number };
  /** Webhook deliveries: recorded but not started ones (a crash between commit and start) are started here. */
  webhookEvents?: { retry_initial_ms: number };
}

export interface ReconcileReport {
  pending_checked: number;
  jobs_restarted: string[];
  speech_holds_released: number;
  webhook_deliveries_started: number;
}

const DELIVERIES_PER_RUN = 500;
/** Pending jobs looked at per run, least recently checked first. */
const PENDING_PER_RUN = 500;
const HOLDS_PER_RUN = 500;

interface PendingJobRow {
  id: string;
  workspace_id: string;
  model: string;
  backend: string | null;
  prompt: string;
  params: VideoParams;
  estimated_cost_micro_eur: number;
  request_fingerprint: string;
  operation_id: string | null;
  created_at_ms: number;
  deadline_at_ms: number | null;
}

export function createReconcilerActivities(deps: ReconcilerActivityDeps) {
  const recoveryInput = (job: PendingJobRow): VideoJobInput => ({
    job_id: job.id,
    workspace_id: job.workspace_id,
    model: job.model,
    // Jobs of the first release did not record their backend; they have no operation either, so the
    // recovery run only refunds them and never reaches a provider.
    backend: job.backend ?? 'simulator',
    prompt: job.prompt,
    params: job.params,
    estimated_cost_micro_eur: job.estimated_cost_micro_eur,
    created_at_ms: job.created_at_ms,
    request_fingerprint: job.request_fingerprint,
    poll_interval_ms: deps.video.pollIntervalMs,
    poll_max_interval_ms: deps.video.pollMaxIntervalMs,
    deadline_at_ms: job.deadline_at_ms ?? job.created_at_ms + deps.video.jobTimeoutMs,
    max_polls_per_run: 200,
    recovery: { operation_id: job.operation_id },
  });

  return {
    async reconcileMoney(): Promise<ReconcileReport> {
      const ctx = Context.current();
      const client = ctx.client;
      const pending = await deps.db.query<PendingJobRow>(
        `SELECT id, workspace_id, model, backend, prompt, params, estimated_cost_micro_eur, request_fingerprint, operation_id,
                (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms,
                (extract(epoch FROM deadline_at) * 1000)::bigint AS deadline_at_ms
           FROM video_jobs
          WHERE status = 'pending'
          ORDER BY reconciled_at NULLS FIRST, created_at
          LIMIT $1`,
        [PENDING_PER_RUN],
      );
      const restarted: string[] = [];
      for (const job of pending.rows) {
        ctx.heartbeat(job.id);
        const state = await videoJobWorkflowState(client, job.id);
        if (state !== 'running') {
          try {
            await client.workflow.start('videoJobWorkflow', {
              workflowId: videoJobWorkflowId(job.id),
              taskQueue: deps.taskQueue,
              args: [recoveryInput(job)],
              workflowIdReusePolicy: 'ALLOW_DUPLICATE',
            });
            restarted.push(job.id);
            deps.logger.warn(
              { job_id: job.id, workspace_id: job.workspace_id, workflow: state, operation_id: job.operation_id },
              job.operation_id ? 'video job restarted: resuming its provider operation' : 'video job restarted: no provider operation known, refunding in full',
            );
          } catch (err) {
            if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
          }
        }
        await deps.db.query('UPDATE video_jobs SET reconciled_at = now() WHERE id = $1', [job.id]);
      }
      const released = await releaseExpiredSpeechHolds(deps.db, SPEECH_HOLD_TTL_MS, HOLDS_PER_RUN);
      if (released > 0) deps.logger.warn({ released }, 'speech holds of requests that died were released');
      const deliveries = deps.webhookEvents
        ? await dispatchUndispatched({ client, db: deps.db, taskQueue: deps.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms }, DELIVERIES_PER_RUN)
        : 0;
      return { pending_checked: pending.rows.length, jobs_restarted: restarted, speech_holds_released: released, webhook_deliveries_started: deliveries };
    },
  };
}

export type ReconcilerActivities = ReturnType<typeof createReconcilerActivities>;
