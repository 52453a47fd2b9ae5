// Phase 3: time from done to seen at the product's default settings. Jobs with different simulated
// generation times run at once on a product process of their own; each is read with GET every 100 ms,
// and its figure is the time from the simulator's completion of its operation (submitted_at + delay,
// on the database clock of this machine) to the first answer showing the job finished.
import type { Infra } from '../test/helpers/infra.js';
import { createPool } from '../src/db/pool.js';
import type { BenchConfig } from './bench-config.js';
import { awaitOutcome, createJob, operationDoneAtMs, productCustomer, simulatedJob } from './product-api.js';
import { spawnSubject } from './subject.js';
import { subjectEnv } from './subject-env.js';
import type { Log } from './log.js';

export interface DoneToSeen {
  generation_s: number;
  status: string;
  done_to_seen_ms: number;
}

const GET_EVERY_MS = 100;
const OUTCOME_MARGIN_MS = 15 * 60_000;

export async function benchDoneToSeen(infra: Infra, cfg: BenchConfig, log: Log): Promise<DoneToSeen[]> {
  const { env, databaseUrl } = await subjectEnv(infra, 'product');
  const db = createPool(databaseUrl, 2);
  const product = await spawnSubject('product', env);
  try {
    const customer = await productCustomer(product.url);
    log(`phase 3: jobs of ${cfg.BENCH_SEEN_DELAYS_S.join(', ')} s of simulated generation, read every ${GET_EVERY_MS} ms`);
    return await Promise.all(
      cfg.BENCH_SEEN_DELAYS_S.map(async (generation_s) => {
        const created = await createJob(customer, simulatedJob(generation_s * 1000, `seen ${generation_s}s`));
        if (!created.id) throw new Error(`create: ${created.error}`);
        const outcome = await awaitOutcome(customer, created.id, GET_EVERY_MS, generation_s * 1000 + OUTCOME_MARGIN_MS);
        const done_at_ms = await operationDoneAtMs(db, created.id);
        return { generation_s, status: outcome.status, done_to_seen_ms: outcome.seen_at_ms - done_at_ms };
      }),
    );
  } finally {
    await product.stop();
    await db.end();
  }
}
