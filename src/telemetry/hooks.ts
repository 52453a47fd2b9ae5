// What ./index.ts (always loaded, no OpenTelemetry) and ./tracing.ts (the implementation it loads when
// tracing is on) share: the span attributes, a job's span, the process's role and the hooks the
// implementation installs. Kept apart so that the implementation never imports the module that loads it.
import type { ClientInterceptors } from '@temporalio/client';
import type { WorkerOptions } from '@temporalio/worker';

/** Which processes' parts run here: `npm run api`, `npm run worker`, or both (`npm start`). */
export type TelemetryRole = 'api' | 'worker' | 'all';

/** The attribute naming the public id of the video job a span is part of. */
export const VIDEO_JOB_ID_ATTRIBUTE = 'video_job.id';
/** The attribute naming the id of the speech request a span is part of. */
export const SPEECH_REQUEST_ID_ATTRIBUTE = 'speech_request.id';

/** A span started by the service's own code (a poll, a callback), in a job's trace. */
export interface JobSpan {
  /** The span's name. */
  name: string;
  job_id: string;
  /** The job's trace context (W3C traceparent) as kept with the job; null: a trace of its own. */
  trace_parent: string | null;
  attributes?: Record<string, string | number | boolean>;
}

/** What ./tracing.js installs once tracing has started. */
export interface TracingHooks {
  logFields(): Record<string, string>;
  traceParent(): string | null;
  inJobSpan<T>(span: JobSpan, fn: () => Promise<T>): Promise<T>;
  inSpan<T>(name: string, attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T>;
  markSpans(attribute: string, value: string): void;
  clientInterceptors(): ClientInterceptors;
  workerOptions(): Pick<WorkerOptions, 'interceptors' | 'sinks'>;
  withoutPropagation<T>(fn: () => T): T;
  shutdown(): Promise<void>;
}
