// Phase 2: history events of one job's workflow for a 1 s generation and a long one, with the product's
// default poll settings, and the provider polls each job made. The jobs run one after the other on a
// product process and database of their own, so the simulator's call counter (simulator.provider_calls)
// tells each job's polls.
import type { Infra } from '../test/helpers/infra.js';
import { createPool } from '../src/db/pool.js';
import { loadConfig } from '../src/config.js';
import { connectClient } from '../src/temporal/client.js';
import { providerCalls } from '../src/providers/simulator-usage.js';
import { videoJobWorkflowId } from '../workflows/messages.js';
import type { BenchConfig } from './bench-config.js';
import { awaitOutcome, createJob, operationDoneAtMs, productCustomer, simulatedJob } from './product-api.js';
import { spawnSubject } from './subject.js';
import { subjectEnv } from './subject-env.js';
import { workflowHistoryFigures, type WorkflowHistoryFigures } from './workflow-history.js';
import type { Log } from './log.js';

export interface JobHistory extends WorkflowHistoryFigures {
  generation_s: number;
  status: string;
  /** Calls of the simulator's poll while this job ran (it ran alone). */
  provider_polls: number;
  /** From the operation's completion to the first GET (every second here) showing the outcome. */
  done_to_seen_ms: number;
}

export interface HistoryEvents {
  jobs: JobHistory[];
  job_timeout_ms: number;
}

/** Time a job may take beyond its generation before the benchmark gives up on it. */
const OUTCOME_MARGIN_MS = 15 * 60_000;

export async function benchHistoryEvents(infra: Infra, cfg: BenchConfig, log: Log): Promise<HistoryEvents> {
  // Poll settings stay the product's defaults. Only a generation longer than the default job deadline
  // (30 min) gets a later one, or the job would fail instead of being measured.
  const configured = loadConfig(process.env);
  const job_timeout_ms = Math.max(configured.video.jobTimeoutMs, cfg.BENCH_LONG_GENERATION_S * 1000 + 10 * 60_000);
  const { env, databaseUrl } = await subjectEnv(infra, 'product', { VIDEO_JOB_TIMEOUT_MS: String(job_timeout_ms) });
  const db = createPool(databaseUrl, 2);
  const client = await connectClient({ address: infra.temporalAddress, namespace: 'default' });
  const product = await spawnSubject('product', env);
  try {
    const customer = await productCustomer(product.url);
    const jobs: JobHistory[] = [];
    for (const generation_s of [1, cfg.BENCH_LONG_GENERATION_S]) {
      log(`phase 2: a job with ${generation_s} s of simulated generation`);
      const polls_before = await providerCalls(db, 'video_poll');
      const created = await createJob(customer, simulatedJob(generation_s * 1000, `history ${generation_s}s`));
      if (!created.id) throw new Error(`create: ${created.error}`);
      const outcome = await awaitOutcome(customer, created.id, 1_000, generation_s * 1000 + OUTCOME_MARGIN_MS);
      const done_at_ms = await operationDoneAtMs(db, created.id);
      // The history is complete once the workflow has closed (settlement is shown before it does).
      const workflowId = videoJobWorkflowId(created.id);
      await client.workflow.getHandle(workflowId).result();
      const figures = await workflowHistoryFigures(client, workflowId);
      jobs.push({
        ...figures,
        generation_s,
        status: outcome.status,
        provider_polls: (await providerCalls(db, 'video_poll')) - polls_before,
        done_to_seen_ms: outcome.seen_at_ms - done_at_ms,
      });
    }
    return { jobs, job_timeout_ms };
  } finally {
    await product.stop();
    await client.connection.close();
    await db.end();
  }
}
