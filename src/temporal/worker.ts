// The Temporal worker: runs the workflows (bundled from workflows/) and this process's activities.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel } from '@temporalio/worker';

let runtimeInstalled = false;

/** The SDK's own logs: warnings and errors only, unless asked for more. */
export function installTemporalRuntime(level: LogLevel = 'WARN'): void {
  if (runtimeInstalled) return;
  Runtime.install({ logger: new DefaultLogger(level) });
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

export interface WorkerLimits {
  maxConcurrentActivityTaskExecutions: number;
  maxConcurrentWorkflowTaskExecutions: number;
}

export const DEFAULT_WORKER_LIMITS: WorkerLimits = {
  maxConcurrentActivityTaskExecutions: 100,
  maxConcurrentWorkflowTaskExecutions: 40,
};

export async function createWorker(opts: {
  address: string;
  namespace: string;
  taskQueue: string;
  activities: object;
  limits?: WorkerLimits;
}): Promise<{ worker: Worker; connection: NativeConnection }> {
  installTemporalRuntime();
  const connection = await NativeConnection.connect({ address: opts.address });
  const worker = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowsPath: workflowsPath(),
    activities: opts.activities,
    ...(opts.limits ?? DEFAULT_WORKER_LIMITS),
    shutdownGraceTime: '20 seconds',
    bundlerOptions: { ignoreModules: [] },
  });
  return { worker, connection };
}
