// Whether the workflows of video jobs are running, closed or gone: for the ledger audit and the
// reconciler, which both look for jobs whose money is unsettled although nothing will settle it.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { WorkflowState } from '../billing/audit.js';
import { videoJobWorkflowId } from '../../workflows/messages.js';

/** A task queue's name; it is written into the visibility query below, so plain characters only (the config checks TEMPORAL_TASK_QUEUE with it). */
export const TASK_QUEUE_NAME = /^[A-Za-z0-9._:-]{1,200}$/;

/** Job workflows listed per page, and at most in one listing (the ids of 200,000 jobs are about 15 MiB). */
const LIST_PAGE_SIZE = 1_000;
const LISTED_RUNNING_MAX = 200_000;
const LIST_TIMEOUT_MS = 60_000;
const WORKFLOW_ID_PREFIX = videoJobWorkflowId('');

/**
 * The jobs whose workflow Temporal's visibility store lists as running on `taskQueue`: one paged listing
 * instead of a call per pending job. Visibility trails the workflows by a moment, and a listing stops at
 * LISTED_RUNNING_MAX, so a job missing from the set is only a suspect: videoJobWorkflowState decides.
 */
export async function runningVideoJobIds(client: Client, taskQueue: string, onPage: () => void = () => {}): Promise<Set<string>> {
  if (!TASK_QUEUE_NAME.test(taskQueue)) throw new Error(`task queue ${JSON.stringify(taskQueue)} cannot be named in a visibility query`);
  const query = `WorkflowType = 'videoJobWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = '${taskQueue}'`;
  const running = new Set<string>();
  await client.connection.withDeadline(Date.now() + LIST_TIMEOUT_MS, async () => {
    for await (const wf of client.workflow.list({ query, pageSize: LIST_PAGE_SIZE })) {
      if (wf.workflowId.startsWith(WORKFLOW_ID_PREFIX)) running.add(wf.workflowId.slice(WORKFLOW_ID_PREFIX.length));
      if (running.size % LIST_PAGE_SIZE === 0) onPage();
      if (running.size >= LISTED_RUNNING_MAX) break;
    }
  });
  return running;
}

/** Describe calls in flight at once. */
const DESCRIBE_CONCURRENCY = 16;
const DESCRIBE_TIMEOUT_MS = 5_000;

export async function videoJobWorkflowState(client: Client, jobId: string): Promise<WorkflowState> {
  try {
    const d = await client.connection.withDeadline(Date.now() + DESCRIBE_TIMEOUT_MS, () =>
      client.workflow.getHandle(videoJobWorkflowId(jobId)).describe(),
    );
    return d.status.name === 'RUNNING' ? 'running' : 'closed';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'not_found';
    throw err;
  }
}

/**
 * The state of each job's workflow, each looked up on its own (exact at the moment of asking, unlike a
 * listing, which trails): for the audit. An unreachable Temporal is an error (never "not running").
 */
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
