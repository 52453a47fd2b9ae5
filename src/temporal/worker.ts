// The Temporal worker: runs the workflows (bundled from workflows/) and this process's activities.
import fs from 'node:fs';
import v8 from 'node:v8';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker, makeTelemetryFilterString, type LogLevel } from '@temporalio/worker';
import { ConfigError } from '../config-error.js';
import { DEFAULT_WORKER_LIMITS, type WorkerLimits } from './worker-limits.js';
import type { TemporalConnectOptions } from './connection-config.js';
import { diagnoseConnectFailure } from './startup-errors.js';
import { temporalWorkerOptions } from '../telemetry/index.js';

export { DEFAULT_WORKER_LIMITS, type WorkerLimits };

let runtimeInstalled = false;

/**
 * The SDK's own logs: warnings and errors only, unless asked for more. With `metricsBindAddress`
 * (`host:port`, from WORKER_METRICS_PORT), the SDK's own metrics (`temporal_*`: task slots, polls,
 * latencies) are served in Prometheus format at http://<address>/metrics. Once per process.
 */
export function installTemporalRuntime(opts: { metricsBindAddress?: string | undefined; level?: LogLevel } = {}): void {
  if (runtimeInstalled) return;
  try {
    Runtime.install({
      logger: new DefaultLogger(opts.level ?? 'WARN'),
      // The native side's logs go through that logger (not straight to the console).
      telemetryOptions: {
        logging: { filter: makeTelemetryFilterString({ core: opts.level ?? 'WARN' }), forward: {} },
        ...(opts.metricsBindAddress ? { metrics: { prometheus: { bindAddress: opts.metricsBindAddress } } } : {}),
      },
    });
  } catch (err) {
    if (opts.metricsBindAddress && /address already in use/i.test((err as Error).message)) {
      throw new ConfigError(`${opts.metricsBindAddress} is already in use; set WORKER_METRICS_PORT to a free port`);
    }
    throw err;
  }
  runtimeInstalled = true;
}

export function workflowsPath(): string {
  // Built: dist/workflows/index.js beside dist/src; from source (tsx): workflows/index.ts.
  for (const candidate of ['../../workflows/index.js', '../../workflows/index.ts']) {
    const p = fileURLToPath(new URL(candidate, import.meta.url));
    if (fs.existsSync(p)) return p;
  }
  throw new Error('workflows/index not found');
}

/**
 * Where `npm run build` writes the workflow bundle (dist/workflow-bundle.js; with the tracing workflow
 * interceptors, dist/workflow-bundle-traced.js), when this module runs from the built output; null when
 * it runs from source (tsx), which bundles at start.
 */
export function builtWorkflowBundlePath(traced = false): string | null {
  const here = fileURLToPath(import.meta.url);
  if (!here.endsWith('.js')) return null;
  return fileURLToPath(new URL(traced ? '../../workflow-bundle-traced.js' : '../../workflow-bundle.js', import.meta.url));
}

/** Opens a worker connection (TLS, client certificate, API key as configured); a refusal becomes one clear line. */
export async function openNativeConnection(connect: TemporalConnectOptions): Promise<NativeConnection> {
  try {
    return await NativeConnection.connect(connect);
  } catch (err) {
    throw await diagnoseConnectFailure(err, connect);
  }
}

/**
 * The largest semi-space (MiB) of a workflow thread's young generation. V8 sizes a thread's young
 * generation from the machine's memory (here up to about 96 MiB: two 48 MiB semi-spaces) and grows it
 * while the thread allocates fast, as it does while jobs are created; a workflow thread then goes idle
 * while its jobs wait, so no scavenge ever shrinks it again, and a full GC does not either: the burst's
 * peak stayed resident for as long as the jobs pended. Its objects are short-lived (an activation's),
 * so a small young generation costs a few more cheap scavenges, not throughput.
 */
export const WORKFLOW_THREAD_SEMI_SPACE_MB = 8;

/** A semi-space limit given to this process (`--max-semi-space-size` in its flags or NODE_OPTIONS), if any. */
function givenSemiSpaceMb(): number | null {
  const m = /--max[-_]semi[-_]space[-_]size[= ](\d+)/.exec([...process.execArgv, process.env['NODE_OPTIONS'] ?? ''].join(' '));
  return m ? Number(m[1]) : null;
}

/**
 * Runs `create` (which starts the worker's workflow threads) with V8's semi-space limit set for the
 * isolates started meanwhile: the SDK starts its threads with no resource limits of ours, and V8 reads
 * the flag when a thread's heap is set up (the main thread's was set up at start and keeps its own).
 * Then the limit is what it was (the one given to the process, or 0: V8's own sizing) for isolates
 * started later.
 */
export async function withWorkflowThreadHeap<T>(create: () => Promise<T>): Promise<T> {
  const given = givenSemiSpaceMb();
  v8.setFlagsFromString(`--max-semi-space-size=${Math.min(given ?? Infinity, WORKFLOW_THREAD_SEMI_SPACE_MB)}`);
  try {
    return await create();
  } finally {
    v8.setFlagsFromString(`--max-semi-space-size=${given ?? 0}`);
  }
}

export async function createWorker(opts: {
  /** How to reach Temporal; unused when `connection` is given. */
  connect: TemporalConnectOptions;
  namespace: string;
  taskQueue: string;
  activities: object;
  limits?: WorkerLimits;
  /** Activities the whole task queue may start per second (a server-side rate limit); unset = none. */
  maxTaskQueueActivitiesPerSecond?: number;
  /** A connection to share (a second worker of the same process); else one is opened. */
  connection?: NativeConnection;
  /** `host:port` of the SDK's Prometheus exporter; unset = no exporter. */
  metricsBindAddress?: string | undefined;
  /** Workflow code bundled elsewhere; else the built bundle, or this code's workflows bundled now. */
  workflowBundle?: { code: string };
}): Promise<{ worker: Worker; connection: NativeConnection }> {
  installTemporalRuntime({ metricsBindAddress: opts.metricsBindAddress });
  const connection = opts.connection ?? (await openNativeConnection(opts.connect));
  // With tracing: the activity interceptors, the workflow span sink, and the workflow interceptors module
  // (bundled from source now, or the built bundle that has it).
  const { interceptors: { workflowModules, ...interceptors } = {}, sinks } = temporalWorkerOptions();
  const bundle = builtWorkflowBundlePath(workflowModules !== undefined);
  const bundled = opts.workflowBundle ?? (bundle && fs.existsSync(bundle) ? { codePath: bundle } : null);
  const workflows = bundled ? { workflowBundle: bundled } : { workflowsPath: workflowsPath(), bundlerOptions: { ignoreModules: [] } };
  const worker = await withWorkflowThreadHeap(() =>
    Worker.create({
      connection,
      namespace: opts.namespace,
      taskQueue: opts.taskQueue,
      ...workflows,
      activities: opts.activities,
      interceptors: { ...interceptors, ...(!bundled && workflowModules ? { workflowModules } : {}) },
      ...(sinks ? { sinks } : {}),
      ...(opts.limits ?? DEFAULT_WORKER_LIMITS),
      ...(opts.maxTaskQueueActivitiesPerSecond !== undefined
        ? { maxTaskQueueActivitiesPerSecond: opts.maxTaskQueueActivitiesPerSecond }
        : {}),
      shutdownGraceTime: '20 seconds',
    }),
  );
  return { worker, connection };
}
