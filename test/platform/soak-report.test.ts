// The soak's own parts that need no service (soak/report.ts, soak/fuzz-corpus.ts, soak/chaos.ts): the
// money invariant flags what is wrong, 5xx other than 503 are counted as defects, the verdict line, the
// quantiles of the table, the fuzz corpus is the same for the same seed, and the chaos loop (on fake
// targets) takes one down at a time and stops. No servers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatReport, moneyProblems, quantile, RequestLog, verdictLine, type WorkspaceMoney } from '../../soak/report.js';
import { generateCorpus, nested } from '../../soak/fuzz-corpus.js';
import { startChaos } from '../../soak/chaos.js';
import { Rng } from '../../soak/rng.js';

const exact: WorkspaceMoney = {
  name: 'ws',
  credited_micro_eur: 10_000_000,
  ledger_credits_micro_eur: 10_000_000,
  job_costs_micro_eur: [400_000, 0, 200_000],
  other_net_charges_micro_eur: 150_000,
  balance_micro_eur: 10_000_000 - 600_000 - 150_000,
  pending_jobs: 0,
  lost_jobs: [],
};

test('exact money has no problem', () => {
  assert.deepEqual(moneyProblems(exact), []);
});

test('a balance one micro-euro off is flagged, with the sum it should have been', () => {
  const problems = moneyProblems({ ...exact, balance_micro_eur: exact.balance_micro_eur - 1 });
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /ws: balance 9249999 != credits 10000000 - job costs 600000 - other charges 150000 = 9250000 micro-EUR/);
});

test('a top-up counted twice, a job still pending and a lost job are each flagged', () => {
  const problems = moneyProblems({ ...exact, ledger_credits_micro_eur: 20_000_000, pending_jobs: 2, lost_jobs: ['j1'] });
  assert.equal(problems.length, 3, problems.join('\n'));
  assert.match(problems.join('\n'), /2 job\(s\) still pending/);
  assert.match(problems.join('\n'), /1 accepted job\(s\) lost \(j1\)/);
  assert.match(problems.join('\n'), /ledger credits 20000000 != credited 10000000/);
});

test('the verdict line: PASS without reasons, FAIL with every reason', () => {
  assert.equal(verdictLine([]), 'soak: PASS');
  assert.equal(verdictLine(['a', 'b']), 'soak: FAIL a; b');
});

test('a 500 is a defect, a 503, a 429 or no answer is not', () => {
  const log = new RequestLog();
  log.record('POST /x', 503, 10);
  log.record('POST /x', 429, 10);
  log.record('POST /x', 'no_answer', 30_000);
  log.record('POST /x', 202, 20);
  log.record('GET /y', 500, 5, '{"error":"boom"}');
  assert.deepEqual(log.serverErrors, [{ route: 'GET /y', status: 500, body: '{"error":"boom"}' }]);
  const x = log.rows().find((r) => r.route === 'POST /x')!;
  assert.deepEqual(x.byClass, { '2xx': 1, '4xx': 0, '429': 1, '503': 1, '5xx': 0, no_answer: 1 });
  assert.equal(x.p99_ms, 20, 'no answer is not a latency');
  const report = formatReport(log, [{ target: 'postgres', down_ms: 5_000, restart_ms: 800 }], ['summary line']);
  assert.match(report, /^route +requests +2xx +4xx +429 +503 +5xx +no_answer +p50 ms +p99 ms$/m);
  assert.match(report, /^postgres +1 +5\.0 +5\.0 +800 +800$/m);
  assert.match(report, /total requests: 5/);
  assert.ok(report.endsWith('summary line'));
});

test('quantiles by nearest rank', () => {
  const v = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(quantile(v, 0.5), 50);
  assert.equal(quantile(v, 0.99), 99);
  assert.equal(quantile([7], 0.99), 7);
  assert.ok(Number.isNaN(quantile([], 0.5)));
});

test('the fuzz corpus is the same for the same seed and another for another seed', () => {
  const digest = (seed: number) => generateCorpus(seed).map((c) => `${c.method} ${c.path} ${String(c.body).slice(0, 200)}`);
  assert.deepEqual(digest(1), digest(1));
  assert.notDeepEqual(digest(1), digest(2));
  assert.equal(nested(3, 'array'), '[[[1]]]');
  assert.equal(JSON.parse(nested(3, 'object')).a.a.a, 1);
});

test('the chaos loop takes down one target at a time, every kind in each round, and stops at its deadline', async () => {
  let down = 0;
  let most_down = 0;
  const killed: string[] = [];
  const targets = ['api-1', 'api-2', 'worker-1', 'postgres', 'temporal'].map((name) => ({
    name,
    async kill() {
      down++;
      most_down = Math.max(most_down, down);
      killed.push(name);
    },
    async restart() {
      down--;
    },
  }));
  const until_ms = Date.now() + 400;
  const chaos = startChaos(targets, new Rng(1), {
    until_ms,
    down_ms: { min: 1, max: 5 },
    calm_ms: { min: 1, max: 5 },
    max_faults: 1_000,
    log: () => {},
  });
  await chaos.done;
  assert.ok(Date.now() - until_ms < 200, 'ended at its deadline');
  assert.equal(most_down, 1);
  assert.equal(down, 0, 'everything it killed is back');
  assert.ok(chaos.faults.length >= 8, `${chaos.faults.length} faults`);
  const kinds = chaos.faults.map((f) => f.target);
  for (let round = 0; round + 4 <= kinds.length; round += 4)
    assert.deepEqual([...kinds.slice(round, round + 4)].sort(), ['api', 'postgres', 'temporal', 'worker']);
  assert.deepEqual(chaos.problems, []);
});

test('the chaos loop stops at a target it cannot restart, saying so', async () => {
  const targets = [{ name: 'postgres', kill: async () => {}, restart: async () => Promise.reject(new Error('port taken')) }];
  const chaos = startChaos(targets, new Rng(1), {
    until_ms: Date.now() + 60_000,
    down_ms: { min: 1, max: 1 },
    calm_ms: { min: 1, max: 1 },
    max_faults: 5,
    log: () => {},
    retry_wait_ms: 1,
  });
  await chaos.done;
  assert.equal(chaos.faults.length, 1);
  assert.deepEqual(chaos.problems, ['postgres could not be restarted after 3 tries']);
});
