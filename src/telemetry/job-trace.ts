// The spans of a job's work that runs outside its workflow: the workers' polls of its provider operation
// and the providers' callbacks about it. Each is a child of the job's trace context kept with the job
// (video_jobs.trace_parent: the submit activity's, written with the operation), so the job's one trace
// shows them after its submission; the span that was current when one began (a callback's HTTP
// request, in a trace of its own) is linked. Without tracing, the work runs as it is, with no query.
import type { Db } from '../db/pool.js';
import { prepared } from '../db/pool.js';
import { inJobSpan, markSpans, tracingOn, VIDEO_JOB_ID_ATTRIBUTE } from './index.js';

const TRACE_PARENT = prepared('video-job-trace-parent', 'SELECT trace_parent FROM video_jobs WHERE id = $1');

/** The job's kept trace context; null without tracing, for an unknown job or one kept without it. */
export async function jobTraceParent(db: Db, job_id: string): Promise<string | null> {
  if (!tracingOn()) return null;
  return (await db.query<{ trace_parent: string | null }>({ ...TRACE_PARENT, values: [job_id] })).rows[0]?.trace_parent ?? null;
}

/** A poll of a job's provider operation (span "video operation poll"). */
export async function traceOperationPoll<T>(
  db: Db,
  row: { job_id: string; backend: string; operation_id: string },
  poll: () => Promise<T>,
): Promise<T> {
  if (!tracingOn()) return poll();
  const trace_parent = await jobTraceParent(db, row.job_id);
  return inJobSpan(
    {
      name: 'video operation poll',
      job_id: row.job_id,
      trace_parent,
      attributes: { 'video_job.backend': row.backend, 'video_job.operation_id': row.operation_id },
    },
    poll,
  );
}

/**
 * A provider's verified callback about a job (span "provider callback"); the callback's HTTP request
 * span is marked with the job too.
 */
export async function traceProviderCallback<T>(
  db: Db,
  c: { job_id: string; backend: string; delivery: { delivery_id: string } },
  nudge: () => Promise<T>,
): Promise<T> {
  if (!tracingOn()) return nudge();
  markSpans(VIDEO_JOB_ID_ATTRIBUTE, c.job_id);
  const trace_parent = await jobTraceParent(db, c.job_id);
  return inJobSpan(
    {
      name: 'provider callback',
      job_id: c.job_id,
      trace_parent,
      attributes: { 'video_job.backend': c.backend, 'provider_callback.delivery_id': c.delivery.delivery_id },
    },
    async () => {
      const result = await nudge();
      if (typeof result === 'string') markSpans('provider_callback.result', result);
      return result;
    },
  );
}
