// `npm run build` (after tsc): bundles the workflows once into dist/workflow-bundle.js, which a built
// worker loads as it is (WorkerOptions.workflowBundle) instead of running webpack at every start. The
// bundle is what a deployment ships: every worker of a release runs the very same workflow code.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { builtWorkflowBundlePath, workflowsPath } from './worker.js';
import { tracingWorkflowModules } from '../telemetry/index.js';

// Two bundles: a worker with tracing on loads the one with the tracing workflow interceptors, one with
// tracing off the other (its workflows then run without any interceptor).
for (const traced of [false, true]) {
  const target = builtWorkflowBundlePath(traced);
  if (!target) throw new Error('run from the built output (dist/), after tsc');
  const { code } = await bundleWorkflowCode({
    workflowsPath: workflowsPath(),
    ignoreModules: [],
    ...(traced ? { workflowInterceptorModules: tracingWorkflowModules() } : {}),
  });
  fs.writeFileSync(target, code);
  process.stdout.write(
    `workflow bundle: ${target} (${(code.length / 1024).toFixed(0)} KiB) from ${fileURLToPath(new URL('../../workflows/', import.meta.url))}\n`,
  );
}
