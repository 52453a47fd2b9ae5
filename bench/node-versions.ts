// Phase 7: status reads on two Node LTS lines side by side. The same product (API + worker) runs twice on
// one database, once on the bench's own Node and once on the other line (Node 24 beside 20, or 20 beside
// 24), with the status read's floor; with BENCH_READ_PENDING jobs pending, the three take turns of GETs of
// random pending jobs at each concurrency of BENCH_READ_CONCURRENCY, round after round, as phase 6 does.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Infra } from '../test/helpers/infra.js';
import { createPool } from '../src/db/pool.js';
import type { BenchConfig } from './bench-config.js';
import { cancelJobs, productCustomer } from './product-api.js';
import { spawnSubject, type SubjectProcess } from './subject.js';
import { subjectEnv } from './subject-env.js';
import { cpuProbe } from './process-cpu.js';
import { createPending, readTurn, waitSubmitted, type ReadTurn } from './status-reads.js';
import type { Log } from './log.js';

const WARMUP_JOBS = 20;

export type NodeSubject = 'floor' | 'this_node' | 'other_node';

export interface NodeVersions {
  /** `node --version` of the bench's own Node and of the other. */
  this_version: string;
  other_version: string;
  pending: number;
  series: { concurrency: number; rounds: Record<NodeSubject, ReadTurn>[] }[];
  turn_s: number;
  cpus: number;
}

const major = (version: string) => Number(/^v(\d+)\./.exec(version)?.[1] ?? 0);

function versionOf(node: string): string | null {
  try {
    return execFileSync(node, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
  } catch {
    return null;
  }
}

/** The other Node line's binary and version, or why there is none. */
export function otherNode(cfg: BenchConfig): { path: string; version: string } | string {
  const candidates = cfg.BENCH_OTHER_NODE
    ? [cfg.BENCH_OTHER_NODE]
    : major(process.version) < 24
      ? [path.join(process.env['XDG_CACHE_HOME'] ?? path.join(os.homedir(), '.cache'), 'video-api', 'node-24.x', 'bin', 'node')]
      : ['/usr/bin/node', '/usr/local/bin/node'];
  for (const candidate of candidates) {
    if (!fs.existsSync(candidate)) continue;
    const version = versionOf(candidate);
    if (version && major(version) !== major(process.version)) return { path: candidate, version };
  }
  return major(process.version) < 24
    ? 'no Node 24 beside this one (bash scripts/install-node24.sh, or BENCH_OTHER_NODE)'
    : 'no older Node on this machine (BENCH_OTHER_NODE names one)';
}

export async function benchNodeVersions(
  infra: Infra,
  cfg: BenchConfig,
  other: { path: string; version: string },
  log: Log,
): Promise<NodeVersions> {
  const { env, databaseUrl } = await subjectEnv(infra, 'product');
  const db = createPool(databaseUrl, 2);
  const probe = cpuProbe(infra);
  const started: SubjectProcess[] = [];
  try {
    log(`phase 7: starting the product on ${process.version} and on ${other.version}, and the status read floor`);
    const [thisNode, otherNodeProduct, floor] = await Promise.all([
      spawnSubject('product', env),
      spawnSubject('product', env, { nodePath: other.path }),
      spawnSubject('rowread', env),
    ]);
    started.push(thisNode, otherNodeProduct, floor);
    const subjects: Record<NodeSubject, SubjectProcess> = { floor, this_node: thisNode, other_node: otherNodeProduct };
    const customer = await productCustomer(thisNode.url);
    const warm = await createPending(customer, WARMUP_JOBS, cfg.BENCH_CONCURRENCY, 'warm');
    for (const s of Object.values(subjects)) await readTurn(s, customer, warm, 4, 2_000, null);
    await cancelJobs(customer, db, warm, cfg.BENCH_CONCURRENCY);
    log(`phase 7: creating ${cfg.BENCH_READ_PENDING} pending jobs`);
    const pending = await createPending(customer, cfg.BENCH_READ_PENDING, cfg.BENCH_CONCURRENCY, 'pending');
    await waitSubmitted(db, pending.length);
    const series: NodeVersions['series'] = [];
    const orders: NodeSubject[][] = [
      ['floor', 'this_node', 'other_node'],
      ['other_node', 'floor', 'this_node'],
      ['this_node', 'other_node', 'floor'],
    ];
    for (const concurrency of cfg.BENCH_READ_CONCURRENCY) {
      const rounds: Record<NodeSubject, ReadTurn>[] = [];
      for (let r = 0; r < cfg.BENCH_READ_ROUNDS; r++) {
        // Each subject takes each place in the order in turn, so the servers' bursts fall on all three.
        const round = {} as Record<NodeSubject, ReadTurn>;
        for (const s of orders[r % orders.length]!)
          round[s] = await readTurn(subjects[s], customer, pending, concurrency, cfg.BENCH_READ_S * 1000, probe);
        rounds.push(round);
        log(`phase 7: C=${concurrency}, round ${r + 1} of ${cfg.BENCH_READ_ROUNDS} done`);
      }
      series.push({ concurrency, rounds });
    }
    return {
      this_version: process.version,
      other_version: other.version,
      pending: pending.length,
      series,
      turn_s: cfg.BENCH_READ_S,
      cpus: os.cpus().length,
    };
  } finally {
    log('phase 7: stopping the products and the floor');
    await Promise.all(started.map((s) => s.stop()));
    await db.end();
  }
}
