// Cancelling a job's provider operation: a customer's cancel (its answer recorded and the outputs already
// copied deleted), and the operation of a job refunded for a reason of ours, which nobody waits for any more.
import { type CancelAnswer } from '../providers/video/types.js';
import { videoOutputKey } from '../storage/retention.js';
import { recordedOperation } from './operation-polls.js';
import { cancelAndRecord } from './operation-cancel.js';
import { type VideoJobActivityDeps, providerFor } from './job-steps.js';

/**
 * The error codes of a failed job whose provider operation may run on with nobody waiting for it
 * (workflows/video-job.ts): past its deadline, or a submission that ended without an answer of its own
 * (its last attempt lost with its worker, after it may have recorded the operation).
 */
export const UNWATCHED_OPERATION_CODES: ReadonlySet<string> = new Set(['deadline_exceeded', 'submit_failed']);

/**
 * Asks the provider to stop the job's operation. What the workflow does not know (a submission
 * cancelled in flight that recorded its operation; a recovery run, which starts with the operation but
 * not its backend) is read from the job's record, so the cancel always reaches the provider that runs it.
 */
export async function cancelRecordedOperation(
  deps: VideoJobActivityDeps,
  input: { backend: string | null; job_id: string; operation_id: string | null },
): Promise<CancelAnswer> {
  const recorded = input.operation_id === null || input.backend === null ? await recordedOperation(deps.db, input.job_id) : null;
  const operation_id = input.operation_id ?? recorded?.operation_id ?? null;
  const backend = input.backend ?? recorded?.backend ?? null;
  if (operation_id === null || backend === null)
    return { billed: false, billed_units: 0, ended_units: 0, answer: 'cancelled before the provider accepted the job' };
  const answer = await providerFor(deps, backend).cancel(operation_id);
  deps.logger.info(
    { job_id: input.job_id, backend, operation_id, billed: answer.billed, billed_units: answer.billed_units, answer: answer.answer },
    'video provider operation cancelled',
  );
  return answer;
}

/**
 * A job past its deadline, or whose submission ended without an answer, was refunded in full: its
 * recorded provider operation, which nobody waits for any more, is asked to stop, as a customer's
 * cancel does (fal has no deadline of its own). Best effort and bounded in time: the settlement never
 * waits long on a provider; the answer, or the failure, is recorded with the job.
 */
export async function cancelUnwatched(deps: VideoJobActivityDeps, job_id: string): Promise<void> {
  await cancelAndRecord(deps, job_id, () => cancelRecordedOperation(deps, { backend: null, job_id, operation_id: null }));
}

/** What cancelVideoOperation is asked: the job's operation as the workflow knows it, and its output count. */
export interface CancelOperationInput {
  backend: string | null;
  job_id: string;
  operation_id: string | null;
  n: number;
}

/**
 * A cancelled job: asks the provider to stop its operation and deletes whatever outputs were already
 * copied. Before the provider accepted the job nothing is billed; after, the provider's answer says
 * whether it bills the operation, and is recorded with the job.
 */
export async function cancelVideoOperation(deps: VideoJobActivityDeps, input: CancelOperationInput): Promise<CancelAnswer> {
  const answer = await cancelRecordedOperation(deps, input);
  await deps.db.query('UPDATE video_jobs SET cancel_answer = $2 WHERE id = $1', [input.job_id, answer.answer.slice(0, 1000)]);
  for (let i = 0; i < input.n; i++) await deps.storage.delete(videoOutputKey(input.job_id, i));
  return answer;
}
