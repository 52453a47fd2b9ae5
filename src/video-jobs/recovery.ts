// Restarting a charged job whose workflow ended or vanished (an operator's terminate, a lost run): a
// recovery run of the same workflow id, already charged, resumes the provider operation recorded with
// the job, or, when none was recorded, fails the job with a full refund. Used by the reconciler, and by
// a cancel that finds no workflow to cancel.
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { videoJobStartSearchAttributes, videoJobWorkflowId, type VideoJobInput } from '../../workflows/messages.js';
import type { VideoJobRecord } from './records.js';

export interface RecoverySettings {
  taskQueue: string;
  job_timeout_ms: number;
}

export function recoveryInput(job: VideoJobRecord, s: Pick<RecoverySettings, 'job_timeout_ms'>): VideoJobInput {
  return {
    job_id: job.job_id,
    workspace_id: job.workspace_id,
    model: job.model,
    // The backend that accepted the operation; a job never submitted has none, and its run only refunds it.
    backends: job.backend ? [job.backend] : [],
    prompt: job.prompt,
    params: job.params,
    estimated_cost_micro_eur: job.estimated_cost_micro_eur,
    created_at_ms: job.created_at_ms,
    request_fingerprint: job.request_fingerprint,
    deadline_at_ms: job.deadline_at_ms ?? job.created_at_ms + s.job_timeout_ms,
    recovery: { operation_id: job.operation_id },
  };
}

/** Starts the recovery run; false when a run of the job is already running (someone else restarted it). */
export async function restartVideoJob(client: Client, job: VideoJobRecord, s: RecoverySettings): Promise<boolean> {
  try {
    await client.workflow.start('videoJobWorkflow', {
      workflowId: videoJobWorkflowId(job.job_id),
      taskQueue: s.taskQueue,
      args: [recoveryInput(job, s)],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      // The same search attributes as the job's first run: listing a workspace's or a model's runs, and
      // the status the workflow keeps up to date, include recovery runs.
      typedSearchAttributes: videoJobStartSearchAttributes(job.workspace_id, job.model),
    });
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}
