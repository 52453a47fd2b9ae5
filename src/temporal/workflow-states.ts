// Whether the workflows of video jobs are running, closed or gone: for the ledger audit and the
// reconciler, which both look for jobs whose money is unsettled although nothing will settle it.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { WorkflowState } from '../billing/audit.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';

/** Describe calls in flight at once. */
const DESCRIBE_CONCURRENCY = 16;
const DESCRIBE_TIMEOUT_MS = 5_000;

export async function videoJobWorkflowState(client: Client, jobId: string): Promise<WorkflowState> {
  try {
    const d = await client.connection.withDeadline(Date.now() + DESCRIBE_TIMEOUT_MS, () => client.workflow.getHandle(videoJobWorkflowId(jobId)).describe());
    return d.status.name === 'RUNNING' ? 'running' : 'closed';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'not_found';
    throw err;
  }
}

/** The state of each job's workflow; an unreachable Temporal is an error (never "not running"). */
export function videoJobWorkflowStates(client: Client): (jobIds: string[]) => Promise<Map<string, WorkflowState>> {
  return async (jobIds) => {
    const states = new Map<string, WorkflowState>();
    let next = 0;
    const worker = async () => {
      while (next < jobIds.length) {
        const id = jobIds[next++]!;
        states.set(id, await videoJobWorkflowState(client, id));
      }
    };
    await Promise.all(Array.from({ length: Math.min(DESCRIBE_CONCURRENCY, jobIds.length) }, worker));
    return states;
  };
}
