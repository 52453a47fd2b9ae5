// Phase 1: create throughput and latency of three subjects, same servers, same run, same client:
//   bare Express (the HTTP floor), the engine's floor (update-with-start + a local-activity pg charge),
//   the product's POST /v2/videos/generations (without and with an Idempotency-Key).
// Each subject is warmed up, then the subjects take turns, round after round. The product's jobs stay
// pending while creates are measured (a long simulated generation), and are cancelled after each turn.
import path from 'node:path';
import type { Infra } from '../test/helpers/infra.js';
import { ADMIN_TOKEN, http } from '../test/helpers/stack.js';
import { createPool } from '../src/db/pool.js';
import { connectClient } from '../src/temporal/client.js';
import { videoJobWorkflowId } from '../workflows/messages.js';
import type { BenchConfig } from './bench-config.js';
import { inPool, runLoad, type LoadResult } from './load.js';
import { BARE_CREATE_PATH } from './bare-express.js';
import { FLOOR_CREATE_PATH } from './floor-server.js';
import { cancelJobs, createJob, productCustomer, simulatedJob, type Customer } from './product-api.js';
import { spawnSubject, type SubjectProcess } from './subject.js';
import { cpuDelta, cpuProbe, waitUntilQuiet, type CpuDelta } from './process-cpu.js';
import { subjectEnv } from './subject-env.js';
import type { Log } from './log.js';
import { turnOrder, type CreateSubject } from './turn-order.js';

/** Long enough that no job finishes while creates are measured. */
const PENDING_DELAY_MS = 10 * 60_000;
/** The longest wait for the machine to settle between turns. */
const QUIET_MAX_MS = 30_000;

/** One subject's turn: its creates, and the CPU each party spent meanwhile (null where not measurable). */
export interface Turn {
  load: LoadResult;
  cpu: CpuDelta | null;
}

export interface CreateThroughput {
  rounds: Record<CreateSubject, Turn>[];
  ledger_audit_ok: boolean;
}

export async function benchCreates(infra: Infra, cfg: BenchConfig, log: Log): Promise<CreateThroughput> {
  const floorEnv = await subjectEnv(infra, 'floor');
  const productEnv = await subjectEnv(infra, 'product');
  const started: SubjectProcess[] = [];
  const db = createPool(productEnv.databaseUrl, 4);
  const temporal = await connectClient({ address: infra.temporalAddress, namespace: 'default' });
  try {
    log('phase 1: starting bare Express, the floor and the product (each builds its workflow bundle)');
    const spawn = async (...args: Parameters<typeof spawnSubject>) => {
      const s = await spawnSubject(...args);
      started.push(s);
      return s;
    };
    const profDir = process.env['BENCH_CPU_PROF_DIR'];
    const [bare, floor, product] = await Promise.all([
      spawn('bare', process.env),
      spawn('floor', floorEnv.env, { cpuProfDir: profDir && path.join(profDir, 'floor') }),
      spawn('product', productEnv.env, { cpuProfDir: profDir && path.join(profDir, 'product') }),
    ]);
    const customer = await productCustomer(product.url);

    // Every subject gets the same request body: the product's.
    const body = (i: number) => simulatedJob(PENDING_DELAY_MS, String(i));
    const probe = cpuProbe(infra);
    /**
     * Runs `load(n)` on `subject`, with the CPU every party spent meanwhile, right after an unmeasured
     * `load(BENCH_PRIMER)`; `after` runs once that is measured.
     */
    const turn = async (subject: SubjectProcess, load: (n: number) => Promise<LoadResult>, n: number, after?: () => Promise<void>): Promise<Turn> => {
      // What the previous turn left to the servers (closing its workflows) is done before this one starts.
      const settled = await waitUntilQuiet(QUIET_MAX_MS);
      if (!settled.quiet) log(`phase 1: the machine stayed busy for ${settled.waited_ms} ms before a turn; its figures include that work`);
      if (cfg.BENCH_PRIMER > 0) {
        const primer = await load(cfg.BENCH_PRIMER);
        if (primer.errors > 0) throw new Error(`phase 1: a primer create failed: ${primer.first_error}`);
      }
      const before = probe?.sample(subject.pid);
      const result = await load(n);
      const cpu = probe && before ? cpuDelta(before, probe.sample(subject.pid)) : null;
      await after?.();
      return { load: result, cpu };
    };
    const post = (subject: SubjectProcess, path: string) => (n: number) =>
      turn(
        subject,
        (k) =>
          runLoad(k, cfg.BENCH_CONCURRENCY, async (i) => {
            const r = await http(subject.url, 'POST', path, { json: body(i) });
            return r.status === 202 ? null : `${r.status} ${JSON.stringify(r.body)}`;
          }),
        n,
      );
    const create = (idempotencyKey: boolean) => (n: number) => {
      const ids: string[] = [];
      const load = (k: number) =>
        runLoad(k, cfg.BENCH_CONCURRENCY, async (i) => {
          const created = await createJob(customer, body(i), { idempotencyKey });
          if (created.id) ids.push(created.id);
          return created.error;
        });
      // Cancelled, and their workflows closed, before the next turn starts: nothing spills into it.
      const cancel = async () => {
        await cancelJobs(customer, db, ids, cfg.BENCH_CONCURRENCY);
        await inPool(ids.length, cfg.BENCH_CONCURRENCY, (i) => temporal.workflow.getHandle(videoJobWorkflowId(ids[i]!)).result());
      };
      return turn(product, load, n, cancel);
    };
    const turns: Record<CreateSubject, (n: number) => Promise<Turn>> = {
      bare: post(bare, BARE_CREATE_PATH),
      floor: post(floor, FLOOR_CREATE_PATH),
      product: create(false),
      product_keyed: create(true),
    };

    log(`phase 1: warming up each subject with ${cfg.BENCH_WARMUP} creates`);
    for (const run of Object.values(turns)) await run(cfg.BENCH_WARMUP);

    const rounds: Record<CreateSubject, Turn>[] = [];
    for (let r = 1; r <= cfg.BENCH_ROUNDS; r++) {
      const round = {} as Record<CreateSubject, Turn>;
      const order = turnOrder(r);
      for (const subject of order) round[subject] = await turns[subject](cfg.BENCH_JOBS);
      rounds.push(round);
      log(`phase 1: round ${r} of ${cfg.BENCH_ROUNDS} done (${order.join(', ')})`);
    }
    const ledger_audit_ok = await ledgerAuditOk(customer);
    return { rounds, ledger_audit_ok };
  } finally {
    await Promise.all(started.map((s) => s.stop()));
    await temporal.connection.close();
    await db.end();
  }
}

async function ledgerAuditOk(c: Customer): Promise<boolean> {
  const r = await http(c.baseUrl, 'GET', '/admin/v1/ledger/audit', { token: ADMIN_TOKEN });
  return r.status === 200 && r.body.ok === true;
}
