// The job lifecycle beyond create and status: list, cancel, delete. Only the caller's
// workspace: another workspace's job is a 404, as an id that never existed.
//
// Cancel goes through the job's workflow (the cancelJob update): the generation stops, the provider's
// operation is cancelled where the provider allows it, and the job is settled as failed/cancelled with a
// full refund, or, if the job is already settling, the cancel is refused (409): a job is either charged for
// what it delivered or cancelled and refunded, never both. A pending job whose workflow is gone (an
// operator's terminate) is restarted as a recovery run first, then cancelled the same way.
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../db/pool.js';
import type { Storage } from '../storage/local.js';
import { thumbnailKey } from '../storage/retention.js';
import { ApiError, notFound } from '../errors.js';
import { findVideoModel } from '../models/catalog.js';
import { videoJobWorkflowState } from '../temporal/workflow-states.js';
import { cancelJobUpdate, JOB_NOT_CANCELLABLE, videoJobWorkflowId, type VideoJobState } from '../../workflows/messages.js';
import { listVideoJobs, markVideoJobDeleted, readVideoJob, type JobListQuery, type VideoJobRecord } from './records.js';
import { restartVideoJob, type RecoverySettings } from './recovery.js';
import { deleteVideoJobInputs } from './images.js';
import { isUuid } from '../ids.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';

/** A cancel waits this long for the job to settle before answering 503 (the cancel still happens). */
const CANCEL_TIMEOUT_MS = 30_000;

export interface VideoJobLifecycleDeps {
  db: Db;
  temporal: Client;
  storage: Storage;
  recovery: RecoverySettings;
}

const notCancellable = (status: string) =>
  new ApiError(
    409,
    'invalid_request_error',
    'job_not_cancellable',
    `the job has ${status === 'pending' ? 'started settling' : status}; only a pending job can be cancelled`,
    'id',
  );

export class VideoJobLifecycle {
  constructor(private readonly deps: VideoJobLifecycleDeps) {}

  /** The caller's job, not deleted, or a 404. */
  private async ownJob(principal: ApiKeyPrincipal, job_id: string): Promise<VideoJobRecord> {
    const job = isUuid(job_id) ? await readVideoJob(this.deps.db, job_id) : null;
    if (!job || job.deleted || job.workspace_id !== principal.workspace_id)
      throw notFound('job_not_found', `no video generation job ${job_id}`, 'id');
    return job;
  }

  async list(principal: ApiKeyPrincipal, q: JobListQuery): Promise<{ jobs: VideoJobState[]; has_more: boolean }> {
    // A retired model id filters as its replacement (jobs record the model they ran as).
    const model = q.model === undefined ? undefined : (findVideoModel(q.model)?.id ?? q.model);
    const page = await listVideoJobs(this.deps.db, principal.workspace_id, { ...q, model });
    if (!page)
      throw notFound('job_not_found', `after names no job of this workspace (give the id of the last job of the previous page)`, 'after');
    return page;
  }

  async cancel(principal: ApiKeyPrincipal, job_id: string): Promise<VideoJobState> {
    const job = await this.ownJob(principal, job_id);
    if (job.status !== 'pending') throw notCancellable(job.status);
    const handle = this.deps.temporal.workflow.getHandle(videoJobWorkflowId(job_id));
    const deadline_ms = Date.now() + CANCEL_TIMEOUT_MS;
    for (let restarted = false; ; restarted = true) {
      try {
        const ended = await this.deps.temporal.connection.withDeadline(deadline_ms, () => handle.executeUpdate(cancelJobUpdate));
        // The job finished on its own while the cancel was on its way (its last poll already had the
        // videos): it is charged for them, so the cancel did not happen.
        if (ended.status !== 'failed' || ended.error?.code !== 'cancelled') throw notCancellable(ended.status);
        return ended;
      } catch (err) {
        if (err instanceof ApiError) throw err;
        if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === JOB_NOT_CANCELLABLE) {
          const now = await readVideoJob(this.deps.db, job_id);
          throw notCancellable(now?.status ?? 'pending');
        }
        // No running workflow to take the cancel (terminated, lost): restart the job, then cancel it.
        if (restarted || (await videoJobWorkflowState(this.deps.temporal, job_id)) === 'running') throw err;
        const current = await readVideoJob(this.deps.db, job_id);
        if (current?.status !== 'pending') throw notCancellable(current?.status ?? 'pending');
        await restartVideoJob(this.deps.temporal, current, this.deps.recovery);
      }
    }
  }

  /** Deletes a finished job's stored videos and thumbnail (their URLs stop working) and the job from the API; its ledger entries stay. */
  async delete(principal: ApiKeyPrincipal, job_id: string): Promise<{ id: string; object: 'video.generation_job'; deleted: true }> {
    const job = await this.ownJob(principal, job_id);
    if (job.status === 'pending') {
      throw new ApiError(
        409,
        'invalid_request_error',
        'job_pending',
        'the job is still pending: cancel it first (POST /v2/videos/generations/{id}/cancel)',
        'id',
      );
    }
    for (const video of job.videos) await this.deps.storage.delete(video.storage_key);
    await this.deps.storage.delete(thumbnailKey(job_id));
    await markVideoJobDeleted(this.deps.db, job_id);
    await deleteVideoJobInputs(this.deps.db, this.deps.storage, job_id);
    return { id: job_id, object: 'video.generation_job', deleted: true };
  }
}
