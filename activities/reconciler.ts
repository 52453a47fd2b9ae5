// The reconciler's work (workflows/reconciler.ts). Idempotent: running it twice, or on two workers,
// settles nothing twice (a restarted job's workflow id is the job's, and settlement is once per job).
//
// A pending job whose workflow is closed (an operator's terminate, a run that failed) or gone (deleted,
// a lost namespace) is restarted as a recovery run (src/services/video-job-recovery.ts).
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import { releaseExpiredSpeechHolds, SPEECH_HOLD_TTL_MS } from '../src/billing/speech-billing.js';
import { videoJobWorkflowState } from '../src/temporal/workflow-states.js';
import { dispatchUndispatched } from '../src/webhooks/dispatch.js';
import { readVideoJob } from '../src/services/video-job-records.js';
import { restartVideoJob } from '../src/services/video-job-recovery.js';

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

export function createReconcilerActivities(deps: ReconcilerActivityDeps) {
  const settings = { taskQueue: deps.taskQueue, job_timeout_ms: deps.video.jobTimeoutMs };

  return {
    async reconcileMoney(): Promise<ReconcileReport> {
      const ctx = Context.current();
      const client = ctx.client;
      const pending = await deps.db.query<{ id: string }>(
        "SELECT id FROM video_jobs WHERE status = 'pending' ORDER BY reconciled_at NULLS FIRST, created_at LIMIT $1",
        [PENDING_PER_RUN],
      );
      const restarted: string[] = [];
      for (const { id } of pending.rows) {
        ctx.heartbeat(id);
        const state = await videoJobWorkflowState(client, id);
        const job = state === 'running' ? null : await readVideoJob(deps.db, id);
        if (job && job.status === 'pending' && (await restartVideoJob(client, job, settings))) {
          restarted.push(id);
          deps.logger.warn(
            { job_id: id, workspace_id: job.workspace_id, workflow: state, operation_id: job.operation_id },
            job.operation_id ? 'video job restarted: resuming its provider operation' : 'video job restarted: no provider operation known, refunding in full',
          );
        }
        await deps.db.query('UPDATE video_jobs SET reconciled_at = now() WHERE id = $1', [id]);
      }
      ctx.heartbeat('speech holds');
      const released = await releaseExpiredSpeechHolds(deps.db, SPEECH_HOLD_TTL_MS, HOLDS_PER_RUN);
      if (released > 0) deps.logger.warn({ released }, 'speech holds of requests that died were released');
      ctx.heartbeat('webhook deliveries');
      const deliveries = deps.webhookEvents
        ? await dispatchUndispatched({ client, db: deps.db, taskQueue: deps.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms }, DELIVERIES_PER_RUN)
        : 0;
      return { pending_checked: pending.rows.length, jobs_restarted: restarted, speech_holds_released: released, webhook_deliveries_started: deliveries };
    },
  };
}

export type ReconcilerActivities = ReturnType<typeof createReconcilerActivities>;
