// Tracing (OpenTelemetry): on only when an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). This module imports nothing of OpenTelemetry: with tracing off,
// every function here is a no-op and no @opentelemetry module is ever loaded. With tracing on, an entry
// point calls startTelemetry before it imports the rest of the service (the instrumentations patch
// express, pg, http and undici as they are imported), and ./tracing.js installs the implementation.
//
// One trace per video job: the API's create request, the Temporal client's update-with-start, the
// workflow and its activities (the Temporal interceptors carry the context in headers), the providers'
// HTTP calls and the PostgreSQL queries made in them; the job's trace context is kept with its operation
// (video_jobs.trace_parent), so the workers' polls and the providers' callbacks, which run outside the
// workflow, are spans of the same trace. Every span of a job carries VIDEO_JOB_ID_ATTRIBUTE.
import { createRequire } from 'node:module';
import type { ClientInterceptors } from '@temporalio/client';
import type { ReplayWorkerOptions, WorkerOptions } from '@temporalio/worker';
import type { JobSpan, TelemetryRole, TracingHooks } from './hooks.js';

export { SPEECH_REQUEST_ID_ATTRIBUTE, VIDEO_JOB_ID_ATTRIBUTE, type JobSpan, type TelemetryRole, type TracingHooks } from './hooks.js';

let hooks: TracingHooks | null = null;

/** Whether tracing is configured: an OTLP endpoint is set (and the SDK not disabled). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return false;
  return Boolean(env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim() || env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim());
}

/** Whether tracing runs in this process. */
export function tracingOn(): boolean {
  return hooks !== null;
}

/**
 * Starts tracing if it is configured; to be awaited before the service's modules are imported. The
 * service name is OTEL_SERVICE_NAME, else video-voice-api-api (API), video-voice-api-worker (worker), or
 * video-voice-api for `npm start`, whose one process runs both.
 */
export async function startTelemetry(role: TelemetryRole): Promise<void> {
  if (hooks || !tracingConfigured()) return;
  const { startTracing } = await import('./tracing.js');
  hooks = await startTracing(role);
}

/** Sends the spans not yet exported, then stops tracing (at the end of a graceful shutdown). */
export async function shutdownTelemetry(): Promise<void> {
  const h = hooks;
  hooks = null;
  await h?.shutdown();
}

/** The fields a log line gets inside a span: trace_id and span_id (a pino mixin); none without tracing. */
export function traceLogFields(): Record<string, string> {
  return hooks ? hooks.logFields() : {};
}

/** The current trace context as a W3C traceparent, to be kept with a job; null without tracing. */
export function currentTraceParent(): string | null {
  return hooks ? hooks.traceParent() : null;
}

/** Runs `fn` in a span of the job's trace (a child of its kept context); just `fn` without tracing. */
export function inJobSpan<T>(span: JobSpan, fn: () => Promise<T>): Promise<T> {
  return hooks ? hooks.inJobSpan(span, fn) : fn();
}

/** Runs `fn` in a span of its own, a child of the current one; just `fn` without tracing. */
export function inSpan<T>(name: string, attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
  return hooks ? hooks.inSpan(name, attributes, fn) : fn();
}

/**
 * Sets `attribute` on the current span and on the HTTP request's server span it is part of; the other
 * spans of that request's trace get it when they are exported, and (for VIDEO_JOB_ID_ATTRIBUTE) every
 * span started under them from now on as it starts.
 */
export function markSpans(attribute: string, value: string): void {
  hooks?.markSpans(attribute, value);
}

/**
 * Runs `fn` so that the requests it starts carry nothing of our traces (no traceparent, tracestate or
 * baggage): for requests to customers' servers, such as webhooks. Just `fn` without tracing.
 */
export function withoutTracePropagation<T>(fn: () => T): T {
  return hooks ? hooks.withoutPropagation(fn) : fn();
}

/** The Temporal client's interceptors: the OpenTelemetry ones with tracing, none without. */
export function temporalClientOptions(): { interceptors?: ClientInterceptors } {
  return hooks ? { interceptors: hooks.clientInterceptors() } : {};
}

const require = createRequire(import.meta.url);

/** The workflow interceptors module of @temporalio/interceptors-opentelemetry (a path; nothing is loaded). */
export function tracingWorkflowModules(): string[] {
  return [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')];
}

/**
 * A worker's tracing options: activity interceptors, the workflow span sink, and the workflow interceptors
 * module for the bundle; none without tracing (the workflows then run without any interceptor).
 */
export function temporalWorkerOptions(): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  if (!hooks) return {};
  const options = hooks.workerOptions();
  return { ...options, interceptors: { ...options.interceptors, workflowModules: tracingWorkflowModules() } };
}

/**
 * The same workflow interceptors for a replay, with a sink that drops the spans (a replay exports none):
 * a history recorded with or without tracing replays with it, since the interceptors add no command.
 */
export function tracingReplayOptions(): Pick<ReplayWorkerOptions, 'interceptors' | 'sinks'> {
  return {
    interceptors: { workflowModules: tracingWorkflowModules() },
    sinks: { exporter: { export: { fn: () => undefined, callDuringReplay: false } } },
  };
}
