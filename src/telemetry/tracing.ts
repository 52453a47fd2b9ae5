// Tracing's implementation, loaded by startTelemetry only when an OTLP endpoint is configured. The
// project runs as ES modules, which require-in-the-middle does not see: import-in-the-middle's loader hook
// is registered first (for the modules the instrumentations name only), then the instrumentations, and
// only then does the entry point import the service (express, pg, http, undici are patched as they load).
//
// The exporter is OTLP, configured by the standard variables (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT,
// _PROTOCOL: http/protobuf by default, grpc or http/json; _HEADERS); the sampler by OTEL_TRACES_SAMPLER
// and OTEL_TRACES_SAMPLER_ARG (parent-based, always on, by default); the resource by OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES over this role's default service name.
//
// The traces are ours. An incoming request's trace context (traceparent, tracestate, baggage) is
// taken only from the callers TRACING_TRUSTED_CALLERS names (addresses or CIDR ranges, comma-separated;
// none by default): a client's context would otherwise choose our trace ids and, under the parent-based
// sampler, force (or refuse) sampling. Nothing of our traces goes out to customers: webhook attempts
// carry no trace context (withoutTracePropagation). And no span keeps a credential: the query strings of
// URLs (signed /v2/files links, providers' signed output URLs) and parameters named like one (signature,
// token, key, credential, ...) are removed from every attribute and event before export.
import { register } from 'node:module';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import {
  context,
  createContextKey,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api';
import { CompositePropagator, getRPCMetadata, RPCType, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { ExpressInstrumentation } from '@opentelemetry/instrumentation-express';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { defaultResource, detectResources, envDetector, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { VIDEO_JOB_ID_ATTRIBUTE, type JobSpan, type TelemetryRole, type TracingHooks } from './hooks.js';

/** The default service name of each role (OTEL_SERVICE_NAME overrides it). */
export const SERVICE_NAMES: Record<TelemetryRole, string> = {
  api: 'video-voice-api-api',
  worker: 'video-voice-api-worker',
  all: 'video-voice-api',
};

/** The workflow id of a video job (workflows/messages.ts, videoJobWorkflowId) and the job id in it. */
const VIDEO_JOB_WORKFLOW_ID = /^video-job-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The attributes that name a Temporal workflow: the interceptors' (temporalWorkflowId) and a workflow span's own info (workflowId). */
const WORKFLOW_ID_ATTRIBUTES = ['temporalWorkflowId', 'workflowId'];

/** The job a span's attributes name: its own attribute, else the video job workflow it is about. */
export function jobIdOf(attributes: Attributes | undefined): string | undefined {
  if (!attributes) return undefined;
  const own = attributes[VIDEO_JOB_ID_ATTRIBUTE];
  if (typeof own === 'string') return own;
  for (const key of WORKFLOW_ID_ATTRIBUTES) {
    const id = attributes[key];
    const m = typeof id === 'string' ? VIDEO_JOB_WORKFLOW_ID.exec(id) : null;
    if (m) return m[1];
  }
  return undefined;
}

/** The attributes of a span of this process (an SDK span); none for a remote or non-recording one. */
const attributesOf = (span: Span | undefined): Attributes | undefined =>
  (span as unknown as { attributes?: Attributes } | undefined)?.attributes;

/** The HTTP request's server span a context is part of (the instrumentation keeps it in the context). */
const serverSpanOf = (ctx: Context): Span | undefined => {
  const rpc = getRPCMetadata(ctx);
  return rpc?.type === RPCType.HTTP ? rpc.span : undefined;
};

/**
 * Gives every span of a job VIDEO_JOB_ID_ATTRIBUTE: a span started under a span of the job (or in an
 * HTTP request marked with it) inherits it; a span that names a video job's workflow gets it when it
 * ends (the Temporal spans, whose workflow id is set after they start, and the workflow's own spans,
 * which come through the workers' span sink).
 */
class JobAttributeProcessor implements SpanProcessor {
  constructor(private readonly next: SpanProcessor) {}

  onStart(span: Span & ReadableSpan, parent: Context): void {
    const job_id = jobIdOf(attributesOf(trace.getSpan(parent))) ?? jobIdOf(attributesOf(serverSpanOf(parent)));
    if (job_id && span.attributes[VIDEO_JOB_ID_ATTRIBUTE] === undefined) span.setAttribute(VIDEO_JOB_ID_ATTRIBUTE, job_id);
    this.next.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    const job_id = span.attributes[VIDEO_JOB_ID_ATTRIBUTE] === undefined ? jobIdOf(span.attributes) : undefined;
    // An ended span is read-only: a view of it with the attribute added is passed on.
    this.next.onEnd(
      job_id
        ? Object.create(span, { attributes: { value: { ...span.attributes, [VIDEO_JOB_ID_ATTRIBUTE]: job_id }, enumerable: true } })
        : span,
    );
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.next.shutdown();
  }
}

/** How many traces TraceAttributesExporter remembers (the oldest are forgotten first). */
const MARKED_TRACES_MAX = 10_000;

/**
 * The spans of an HTTP request that ended before its job's (or speech request's) id was known (its
 * middleware, the API key's lookup) are given the id's attribute when they are exported: the request's
 * trace is noted when the id is set on its server span. Spans exported before that (a request longer
 * than the export delay) keep none.
 */
class TraceAttributesExporter implements SpanExporter {
  private readonly marked = new Map<string, Attributes>();

  constructor(private readonly next: SpanExporter) {}

  noteTrace(trace_id: string, attribute: string, value: string): void {
    const attributes = { ...this.marked.get(trace_id), [attribute]: value };
    this.marked.delete(trace_id);
    this.marked.set(trace_id, attributes);
    if (this.marked.size > MARKED_TRACES_MAX) this.marked.delete(this.marked.keys().next().value!);
  }

  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    const withMarks = (span: ReadableSpan): ReadableSpan => {
      const marks = this.marked.get(span.spanContext().traceId);
      if (!marks || Object.keys(marks).every((k) => span.attributes[k] !== undefined)) return span;
      return Object.create(span, { attributes: { value: { ...marks, ...span.attributes }, enumerable: true } });
    };
    this.next.export(spans.map(withMarks), done);
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush?.() ?? Promise.resolve();
  }

  shutdown(): Promise<void> {
    return this.next.shutdown();
  }
}

/** A URL's query string (signed links carry their signature there). */
const URL_QUERY = /\b([a-z][a-z0-9+.-]*:\/\/[^\s?#"'<>]*)\?[^\s#"'<>]*/gi;
/** A parameter named like a credential, anywhere in a value (a relative signed link, an error message). */
const CREDENTIAL_PARAM = /\b([\w.-]*(?:signature|sig|token|credential|secret|password|api[_-]?key|key)[\w.-]*)=[^\s&#"'<>]+/gi;
/** Attributes that hold a request target or query without a scheme: their query string goes entirely. */
const TARGET_ATTRIBUTES = new Set(['http.target', 'url.path']);
const QUERY_ATTRIBUTES = new Set(['url.query']);
export const REDACTED = 'REDACTED';

/** `value` without URL query strings or credential-like parameters (for `key`, an attribute's name). */
export function redactedValue(key: string, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => redactedValue(key, v));
  if (typeof value !== 'string') return value;
  if (QUERY_ATTRIBUTES.has(key)) return REDACTED;
  const v = TARGET_ATTRIBUTES.has(key) && value.includes('?') ? `${value.slice(0, value.indexOf('?'))}?${REDACTED}` : value;
  return v.replace(URL_QUERY, `$1?${REDACTED}`).replace(CREDENTIAL_PARAM, `$1=${REDACTED}`);
}

export function redactedAttributes(attributes: Attributes): Attributes {
  let changed = false;
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) {
    const r = redactedValue(k, v) as Attributes[string];
    if (r !== v && JSON.stringify(r) !== JSON.stringify(v)) changed = true;
    out[k] = r;
  }
  return changed ? out : attributes;
}

/** Spans exported without credentials: their attributes, their events' (an exception's message) and their name. */
class RedactingExporter implements SpanExporter {
  constructor(private readonly next: SpanExporter) {}

  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    this.next.export(spans.map(redactedSpan), done);
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush?.() ?? Promise.resolve();
  }

  shutdown(): Promise<void> {
    return this.next.shutdown();
  }
}

function redactedSpan(span: ReadableSpan): ReadableSpan {
  const attributes = redactedAttributes(span.attributes);
  const events = span.events.map((e) => {
    const a = e.attributes ? redactedAttributes(e.attributes) : undefined;
    return a === e.attributes ? e : { ...e, attributes: a };
  });
  const name = redactedValue('', span.name) as string;
  if (attributes === span.attributes && name === span.name && events.every((e, i) => e === span.events[i])) return span;
  return Object.create(span, {
    attributes: { value: attributes, enumerable: true },
    events: { value: events, enumerable: true },
    name: { value: name, enumerable: true },
  });
}

/** Set in a context whose outgoing requests carry no trace context (withoutTracePropagation). */
const NO_PROPAGATION = createContextKey('video-voice-api no trace propagation');

/**
 * The W3C trace context and baggage propagators, except that nothing is injected in a context marked
 * NO_PROPAGATION, and nothing is extracted from the headers of an incoming request of an untrusted
 * caller (noted in `untrusted` just before the HTTP instrumentation extracts from them).
 */
class GuardedPropagator implements TextMapPropagator {
  private readonly inner = new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] });

  constructor(private readonly untrusted: WeakSet<object>) {}

  inject(ctx: Context, carrier: unknown, setter: TextMapSetter): void {
    if (ctx.getValue(NO_PROPAGATION)) return;
    this.inner.inject(ctx, carrier, setter);
  }

  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    if (carrier !== null && typeof carrier === 'object' && this.untrusted.has(carrier)) return ctx;
    return this.inner.extract(ctx, carrier, getter);
  }

  fields(): string[] {
    return this.inner.fields();
  }
}

/** Whether an address is one of TRACING_TRUSTED_CALLERS (addresses or CIDR ranges, comma-separated). */
export function trustedCallers(spec: string | undefined): (address: string | undefined) => boolean {
  const ranges = (spec ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      if (s.includes('/')) return ipaddr.parseCIDR(s);
      if (!isIP(s)) throw new Error(`TRACING_TRUSTED_CALLERS: ${s} is neither an address nor a CIDR range`);
      const a = ipaddr.parse(s);
      return [a, a.kind() === 'ipv4' ? 32 : 128] as [ipaddr.IPv4 | ipaddr.IPv6, number];
    });
  return (address) => {
    if (!address || ranges.length === 0 || !isIP(address)) return false;
    const a = ipaddr.process(address);
    return ranges.some(([net, bits]) => a.kind() === net.kind() && a.match([net, bits] as Parameters<typeof a.match>[0]));
  };
}

/** A workflow span as the Temporal interceptors' sink delivers it (built by an SDK of the 1.x line). */
type WorkflowSinkSpan = ReadableSpan & { parentSpanId?: string; instrumentationLibrary?: ReadableSpan['instrumentationScope'] };

/**
 * The workflow spans come from @temporalio/interceptors-opentelemetry's workflow isolate in the 1.x
 * SDK's shape (parentSpanId, instrumentationLibrary); this one reads parentSpanContext and
 * instrumentationScope. Converted here, they keep their parent and scope.
 */
class WorkflowSpanProcessor implements SpanProcessor {
  constructor(private readonly next: SpanProcessor) {}

  onStart(): void {}

  onEnd(span: WorkflowSinkSpan): void {
    const parentSpanContext =
      span.parentSpanContext ??
      (span.parentSpanId
        ? { traceId: span.spanContext().traceId, spanId: span.parentSpanId, traceFlags: span.spanContext().traceFlags }
        : undefined);
    const instrumentationScope = span.instrumentationScope ?? span.instrumentationLibrary ?? { name: '@temporalio/interceptor-workflow' };
    this.next.onEnd(
      Object.create(span, { parentSpanContext: { value: parentSpanContext }, instrumentationScope: { value: instrumentationScope } }),
    );
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** OTLP over the protocol the standard variables name (http/protobuf unless told otherwise). */
async function otlpExporter(env: NodeJS.ProcessEnv): Promise<SpanExporter> {
  const protocol = (env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'] ?? 'http/protobuf').trim();
  if (protocol === 'grpc') return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
  if (protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
}

/** Requests that are not part of any job and would only be noise: the probes and the metrics scrapes. */
const UNTRACED_PATHS = /^\/(livez|readyz|metrics)(\/|\?|$)/;

/** Runs `fn` and ends the span with it (an error recorded on it). */
async function ended<T>(span: Span, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

export async function startTracing(role: TelemetryRole, env: NodeJS.ProcessEnv = process.env): Promise<TracingHooks> {
  const { provider, exporter, processor, resource } = await startPipeline(role, env);
  const tracer = trace.getTracer('video-voice-api');
  const workflowSpans = new WorkflowSpanProcessor(processor);
  const jobMarking = jobMarkingInterceptor((job_id) => hooks.markSpans(VIDEO_JOB_ID_ATTRIBUTE, job_id));

  const hooks: TracingHooks = {
    logFields(): Record<string, string> {
      const ctx = trace.getActiveSpan()?.spanContext();
      return ctx && trace.isSpanContextValid(ctx) ? { trace_id: ctx.traceId, span_id: ctx.spanId } : {};
    },
    traceParent() {
      const carrier: Record<string, string> = {};
      propagation.inject(context.active(), carrier);
      return carrier['traceparent'] ?? null;
    },
    inJobSpan(s: JobSpan, fn) {
      const parent = s.trace_parent ? propagation.extract(ROOT_CONTEXT, { traceparent: s.trace_parent }) : ROOT_CONTEXT;
      // The span that was current (an HTTP request's, the poller's none) is linked: it is in another trace.
      const current = trace.getActiveSpan()?.spanContext();
      const links: Link[] = current && trace.isSpanContextValid(current) ? [{ context: current }] : [];
      const attributes = { ...s.attributes, [VIDEO_JOB_ID_ATTRIBUTE]: s.job_id };
      return tracer.startActiveSpan(s.name, { kind: SpanKind.INTERNAL, attributes, links }, parent, (span) => ended(span, fn));
    },
    inSpan(name, attributes, fn) {
      return tracer.startActiveSpan(name, { attributes }, (span) => ended(span, fn));
    },
    markSpans(attribute, value) {
      const ctx = context.active();
      trace.getSpan(ctx)?.setAttribute(attribute, value);
      const server = serverSpanOf(ctx);
      server?.setAttribute(attribute, value);
      if (server) exporter.noteTrace(server.spanContext().traceId, attribute, value);
    },
    clientInterceptors() {
      return { workflow: [new OpenTelemetryWorkflowClientInterceptor({ tracer }), jobMarking] };
    },
    workerOptions: () => tracingWorkerOptions(tracer, workflowSpans, resource),
    withoutPropagation(fn) {
      return context.with(context.active().setValue(NO_PROPAGATION, true), fn);
    },
    async shutdown() {
      await provider.shutdown();
    },
  };
  return hooks;
}

/**
 * Registers import-in-the-middle's loader hook, then the tracer provider (this role's resource, the
 * OTLP exporter behind a batch processor and the job attribute's processor) and the instrumentations
 * of HTTP, Express, pg and undici; resolves once the hook has taken them all in, so that the modules
 * imported afterwards are patched.
 */
async function startPipeline(role: TelemetryRole, env: NodeJS.ProcessEnv) {
  const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
  register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);

  const resource: Resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: SERVICE_NAMES[role] }))
    .merge(detectResources({ detectors: [envDetector] }));
  const exporter = new TraceAttributesExporter(new RedactingExporter(await otlpExporter(env)));
  const exporting = new BatchSpanProcessor(exporter);
  const processor = new JobAttributeProcessor(exporting);
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  const untrusted = new WeakSet<object>();
  const trusted = trustedCallers(env['TRACING_TRUSTED_CALLERS']);
  provider.register({ propagator: new GuardedPropagator(untrusted) });
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => {
          if (UNTRACED_PATHS.test(req.url ?? '')) return true;
          // Called just before the request's context is extracted from its headers: an untrusted caller's is not.
          if (!trusted(req.socket?.remoteAddress)) untrusted.add(req.headers);
          return false;
        },
        // Outgoing calls outside any trace (storage housekeeping, the exporter's own) start none.
        requireParentforOutgoingSpans: true,
      }),
      new ExpressInstrumentation(),
      // The poller's claim queries and other background statements run outside any job: no trace of their own.
      new PgInstrumentation({ requireParentSpan: true }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
    ],
  });
  await waitForAllMessagesAcknowledged();
  return { provider, exporter, processor, resource };
}

/** Marks the spans of a Temporal call about a video job's workflow with the job (`mark`), the job id read from the workflow id. */
function jobMarkingInterceptor(mark: (job_id: string) => void): WorkflowClientInterceptor {
  /** Sets the job's attribute on the spans of a Temporal call about a video job's workflow. */
  const markJobCall = (workflow_id: string | undefined) => {
    const job_id = workflow_id ? VIDEO_JOB_WORKFLOW_ID.exec(workflow_id)?.[1] : undefined;
    if (job_id) mark(job_id);
  };
  return {
    start: (input, next) => (markJobCall(input.options.workflowId), next(input)),
    startWithDetails: (input, next) => (markJobCall(input.options.workflowId), next(input)),
    startUpdateWithStart: (input, next) => (markJobCall(input.workflowStartOptions.workflowId), next(input)),
    startUpdate: (input, next) => (markJobCall(input.workflowExecution.workflowId), next(input)),
    signal: (input, next) => (markJobCall(input.workflowExecution.workflowId), next(input)),
  };
}

/** A worker's activity interceptors (spans of its activities) and the sink that exports its workflows' spans. */
function tracingWorkerOptions(
  tracer: Tracer,
  workflowSpans: WorkflowSpanProcessor,
  resource: Resource,
): ReturnType<TracingHooks['workerOptions']> {
  return {
    interceptors: {
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    // Typed by the 1.x line (the interceptors' own SDK): the processor converts its spans, and they carry this provider's resource.
    sinks: {
      exporter: makeWorkflowExporter(
        workflowSpans as unknown as Parameters<typeof makeWorkflowExporter>[0],
        resource as unknown as Parameters<typeof makeWorkflowExporter>[1],
      ),
    },
  };
}
