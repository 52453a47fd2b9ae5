// A video-job workflow started directly, as the API would start it, for paths only a direct start reaches
// (a second attempt of a job, a run that starts late, inputs the API refuses).
import { randomUUID } from 'node:crypto';
import {
  JOB_STATUS_SA,
  videoJobStartSearchAttributes,
  videoJobWorkflowId,
  type VideoJobInput,
  type VideoJobStatus,
} from '../../workflows/messages.js';
import type { Db } from '../../src/db/pool.js';
import { chargeVideoJob, type ChargeResult } from '../../src/video-jobs/billing.js';
import type { Stack } from './stack.js';

/** The input the API would give a job, for paths only a direct start reaches. */
export function directInput(workspace_id: string, job_id: string, extra: Partial<VideoJobInput> = {}): VideoJobInput {
  const now = Date.now();
  return {
    job_id,
    workspace_id,
    model: 'sim-video-1',
    backends: ['simulator'],
    prompt: 'p',
    params: { durationSeconds: 4, resolution: '720p', aspectRatio: '16:9', n: 1 },
    estimated_cost_micro_eur: 200_000,
    created_at_ms: now,
    request_fingerprint: 'x',
    deadline_at_ms: now + 60_000,
    attempt_id: randomUUID(),
    accept_by_ms: now + 2_000,
    ...extra,
  };
}

/** Starts the run with the API's search attributes; `status` overrides the status one. */
export async function startDirect(s: Stack, input: VideoJobInput, status?: VideoJobStatus) {
  return s.api.temporal.workflow.start('videoJobWorkflow', {
    workflowId: videoJobWorkflowId(input.job_id),
    taskQueue: s.config.temporal.taskQueue,
    args: [input],
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    typedSearchAttributes: videoJobStartSearchAttributes(input.workspace_id, input.model).map((sa) =>
      status !== undefined && sa.key.name === JOB_STATUS_SA.name ? { ...sa, value: status } : sa,
    ),
  });
}

/** Charges a direct input's attempt as its run's charge step would (a worker that charged, then froze). */
export function chargeDirect(db: Db, input: VideoJobInput): Promise<ChargeResult> {
  return chargeVideoJob(db, {
    jobId: input.job_id,
    attemptId: input.attempt_id,
    workflowId: videoJobWorkflowId(input.job_id),
    workspaceId: input.workspace_id,
    model: input.model,
    prompt: input.prompt,
    params: input.params,
    estimated_cost_micro_eur: input.estimated_cost_micro_eur,
    created_at_ms: input.created_at_ms,
    request_fingerprint: input.request_fingerprint,
    accept_by_ms: input.accept_by_ms,
    backend: input.backends[0],
    deadline_at_ms: input.deadline_at_ms,
  });
}
