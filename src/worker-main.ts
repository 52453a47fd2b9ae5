// `npm run worker`: a Temporal worker process (scale out: run any number) against an existing
// Temporal (TEMPORAL_ADDRESS) and PostgreSQL (DATABASE_URL).
// Tracing starts before the service's modules are imported (it patches pg and http as they load).
import { shutdownTelemetry, startTelemetry } from './telemetry/index.js';

await startTelemetry('worker');
const { ConfigError, loadConfig } = await import('./config.js');
const { createLogger } = await import('./logger.js');
const { openDatabase } = await import('./runtime/database.js');
const { startWorker } = await import('./runtime/worker.js');
const { runMain } = await import('./process-lifecycle.js');
const { startMetricsServer } = await import('./metrics.js');

runMain('worker', async () => {
  const config = loadConfig();
  if (!config.databaseUrl) throw new ConfigError('DATABASE_URL is required for a worker process (npm start runs an embedded one)');
  if (!config.temporal.address) throw new ConfigError('TEMPORAL_ADDRESS is required for a worker process (npm start runs a dev server)');
  const logger = createLogger(config.logLevel, 'worker');
  const db = await openDatabase(config.databaseUrl, config, { gauges: false });
  // This process's own metrics (jobs settled, credits, provider polls): an API process serves them
  // on PORT, a worker-only process on APP_METRICS_PORT, by the API's rule: in production only behind
  // METRICS_TOKEN (without it, /metrics answers 404). The SDK's metrics are on WORKER_METRICS_PORT.
  // The same server answers the probes: /livez at once, /readyz once the worker runs.
  let ready: () => Promise<boolean> = async () => false;
  const metrics =
    config.appMetricsPort === undefined
      ? null
      : await startMetricsServer({
          port: config.appMetricsPort,
          host: config.host,
          token: config.metricsToken,
          serveMetrics: !config.production || config.metricsToken !== undefined,
          portVariable: 'APP_METRICS_PORT',
          ready: () => ready(),
        });
  const worker = await startWorker({ config, db, temporalAddress: config.temporal.address, logger });
  ready = () => worker.ready();
  logger.info({ task_queue: config.temporal.taskQueue, pid: process.pid, metrics_url: metrics?.url }, 'worker running');
  return async () => {
    await worker.shutdown();
    await db.end();
    await metrics?.close();
    await shutdownTelemetry();
  };
});
