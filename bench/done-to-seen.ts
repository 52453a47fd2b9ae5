// Phase 3: time from done to seen at the product's default settings. Jobs with different simulated
// generation times run at once on a product process of their own; each is read with GET every 100 ms,
// and its figure is the time from the simulator's completion of its operation (submitted_at + delay,
// on the database clock of this machine) to the first answer showing the job finished.
// Each generation time runs twice: once polled (the poller finds the end at its next poll), once with
// a provider callback: at the moment the operation completes, the bench does what a verified callback
// does (nudgePoll: the job's row made due at once), without the callback's HTTP request and verification.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Infra } from '../test/helpers/infra.js';
import { createPool, type Db } from '../src/db/pool.js';
import { nudgePoll, recordedOperation } from '../src/video-jobs/operation-polls.js';
import type { BenchConfig } from './bench-config.js';
import { awaitOutcome, createJob, operationDoneAtMs, productCustomer, simulatedJob } from './product-api.js';
import { spawnSubject } from './subject.js';
import { subjectEnv } from './subject-env.js';
import type { Log } from './log.js';

export type CompletionPath = 'polled' | 'callback';

export interface DoneToSeen {
  path: CompletionPath;
  generation_s: number;
  status: string;
  done_to_seen_ms: number;
  /** Callback path: false when the poller had already found the end (the callback then changes nothing). */
  nudged?: boolean;
}

const GET_EVERY_MS = 100;
const OUTCOME_MARGIN_MS = 15 * 60_000;
/** How often the bench looks for a job's submitted operation before it can time the callback. */
const SUBMITTED_EVERY_MS = 50;
/**
 * The callback is made this long after the operation's completion: the simulator reports it complete
 * only once its delay has passed, and a nudge that polls a moment early waits for the next poll.
 */
const CALLBACK_AFTER_DONE_MS = 5;

export async function benchDoneToSeen(infra: Infra, cfg: BenchConfig, log: Log): Promise<DoneToSeen[]> {
  const { env, databaseUrl } = await subjectEnv(infra, 'product');
  const db = createPool(databaseUrl, 4);
  const product = await spawnSubject('product', env);
  try {
    const customer = await productCustomer(product.url);
    log(
      `phase 3: jobs of ${cfg.BENCH_SEEN_DELAYS_S.join(', ')} s of simulated generation, polled and called back, read every ${GET_EVERY_MS} ms`,
    );
    const paths: CompletionPath[] = ['polled', 'callback'];
    return await Promise.all(
      paths.flatMap((path) =>
        cfg.BENCH_SEEN_DELAYS_S.map(async (generation_s) => {
          const created = await createJob(customer, simulatedJob(generation_s * 1000, `seen ${path} ${generation_s}s`));
          if (!created.id) throw new Error(`create: ${created.error}`);
          // Side by side, so a failed callback fails the phase at once (and the run stops its servers).
          const [outcome, nudged] = await Promise.all([
            awaitOutcome(customer, created.id, GET_EVERY_MS, generation_s * 1000 + OUTCOME_MARGIN_MS),
            path === 'callback' ? callBackWhenDone(db, created.id, generation_s * 1000 + OUTCOME_MARGIN_MS) : null,
          ]);
          const done_at_ms = await operationDoneAtMs(db, created.id);
          return {
            path,
            generation_s,
            status: outcome.status,
            done_to_seen_ms: outcome.seen_at_ms - done_at_ms,
            ...(nudged === null ? {} : { nudged }),
          };
        }),
      ),
    );
  } finally {
    await product.stop();
    await db.end();
  }
}

/**
 * Once the job's operation is submitted, waits for its completion and nudges the job's poll, as a
 * verified callback does; whether there was a poll to nudge.
 */
async function callBackWhenDone(db: Db, job_id: string, timeout_ms: number): Promise<boolean> {
  const deadline = Date.now() + timeout_ms;
  // The backend is the job's from its charge on; the operation is recorded once submitted.
  let recorded = await recordedOperation(db, job_id);
  while (!recorded?.operation_id || !recorded.backend) {
    if (Date.now() > deadline) throw new Error(`job ${job_id} was not submitted in time`);
    await sleep(SUBMITTED_EVERY_MS);
    recorded = await recordedOperation(db, job_id);
  }
  const backend = recorded.backend;
  await sleep(Math.max((await operationDoneAtMs(db, job_id)) + CALLBACK_AFTER_DONE_MS - Date.now(), 0));
  return nudgePoll(db, job_id, backend);
}
