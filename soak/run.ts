// `npm run soak`: SOAK_MINUTES (default 10) of mixed load against the service running as separate
// processes (PostgreSQL, Temporal, API and worker processes; SOAK_TEMPORAL: `dev` for the CLI's dev
// server, `server` for temporal-server on PostgreSQL with mTLS and the videos on MinIO), while a chaos loop kills
// them with SIGKILL and starts them again. Then the chaos stops, every job must end, and the money must
// be exact: the ledger audit ok, each workspace's balance = what was credited - the costs the API
// reports, no 5xx other than 503. Prints a table of requests, faults and latencies; the last line is
// `soak: PASS` or `soak: FAIL <reasons>`, and the exit status is 0 only on PASS.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, isOk, microOf, sleep } from './client.js';
import { startCluster, SOAK_ADMIN_TOKEN, type Cluster } from './cluster.js';
import { startChaos } from './chaos.js';
import { generateCorpus } from './fuzz-corpus.js';
import { CustomerLoop, newFindings, paced, sendFuzzCase, setUpWorkspace, topUp, type Workspace } from './load.js';
import { startReceivers, type Receivers } from './receivers.js';
import { formatReport, moneyProblems, RequestLog, requestTable, verdictLine, type WorkspaceMoney } from './report.js';
import { Rng } from './rng.js';
import { CallbackAbuse, type CallbackAbuseFindings } from './callback-abuse.js';
import { FalFake } from '../test/fakes/fal-fake.js';
import { ReplicateFake } from '../test/fakes/replicate-fake.js';

function intEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  const v = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(v) || v < min || v > max) throw new Error(`${name} must be a number from ${min} to ${max}, not ${raw}`);
  return v;
}

const MINUTES = intEnv('SOAK_MINUTES', 10, 0.5, 24 * 60);
const SEED = intEnv('SOAK_SEED', 27, 0, 2 ** 31);
const APIS = intEnv('SOAK_APIS', 2, 1, 4);
const WORKERS = intEnv('SOAK_WORKERS', 2, 1, 4);
const WORKSPACES = intEnv('SOAK_WORKSPACES', 3, 1, 10);
const TEMPORAL = (() => {
  const v = process.env['SOAK_TEMPORAL'] || 'dev';
  if (v !== 'dev' && v !== 'server') throw new Error(`SOAK_TEMPORAL must be dev or server, not ${v}`);
  return v;
})();
/** How long the end waits for every job to be terminal (jobs time out after 2 minutes). */
const DRAIN_TIMEOUT_MS = 240_000;
/** Everything (start-up, load, drain, checks) must be over by then, or the soak fails. */
const HARD_LIMIT_MS = MINUTES * 60_000 + 15 * 60_000;
const CREDITS_IN_EURO = 500;

const log = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

/** Every item of a paginated list (`data`, `has_more`, `after` = the last item's id); null if it could not be read. */
async function listAll(client: Client, route: string, basePath: string, token: string): Promise<any[] | null> {
  const items: any[] = [];
  for (let page = 0; page < 1_000; page++) {
    const after = items.length ? `&after=${items[items.length - 1].id}` : '';
    const a = await client.sendUntilOk({ method: 'GET', route, path: `${basePath}?limit=100${after}`, token });
    if (!isOk(a)) return null;
    items.push(...a.body.data);
    if (!a.body.has_more) return items;
  }
  return null;
}

const listJobs = (client: Client, w: Workspace) => listAll(client, 'GET /v2/videos/generations', '/v2/videos/generations', w.key);

/** A drain in which no job settled for this long looks at Temporal (see drain). */
const DRAIN_STALL_MS = 60_000;

/**
 * Waits until no job is pending (at most DRAIN_TIMEOUT_MS) and answers how many still are. The
 * Temporal dev server keeps its store in SQLite, and after a SIGKILL and restart it can stop serving
 * while its process runs (every store operation then fails with SQLITE_INTERRUPT, "interrupted (9)",
 * a fault of the SQLite driver fixed in later server releases); a production Temporal keeps its store in
 * PostgreSQL or Cassandra. When no job settles for DRAIN_STALL_MS, the drain restarts Temporal once,
 * as the chaos loop does, and says so: what the soak checks is that the service recovers from it.
 */
async function drain(
  client: Client,
  workspaces: Workspace[],
  restartTemporal: () => Promise<void>,
): Promise<{ pending: number; temporal_restarted: boolean }> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  let last_pending = Infinity;
  let last_change_ms = Date.now();
  let temporal_restarted = false;
  for (;;) {
    let pending = 0;
    for (const w of workspaces) {
      const jobs = await listJobs(client, w);
      pending += jobs === null ? Infinity : jobs.filter((j) => j.status === 'pending').length;
    }
    if (pending === 0 || Date.now() > deadline) return { pending, temporal_restarted };
    if (pending !== last_pending) {
      last_pending = pending;
      last_change_ms = Date.now();
    } else if (!temporal_restarted && Date.now() - last_change_ms > DRAIN_STALL_MS) {
      log(`drain: no job settled for ${DRAIN_STALL_MS / 1000} s; restarting Temporal once`);
      await restartTemporal();
      temporal_restarted = true;
      last_change_ms = Date.now();
    }
    log(`drain: ${pending} job(s) still pending`);
    await sleep(3_000);
  }
}

async function moneyOf(client: Client, w: Workspace): Promise<WorkspaceMoney | string> {
  const jobs = await listJobs(client, w);
  const ledger = await listAll(client, 'GET /v2/ledger', '/v2/ledger', w.key);
  const ws = await client.sendUntilOk({
    method: 'GET',
    route: 'GET /admin/v1/workspaces/{id}',
    path: `/admin/v1/workspaces/${w.id}`,
    token: SOAK_ADMIN_TOKEN,
  });
  if (!jobs || !ledger || !isOk(ws)) return `${w.name}: could not read its jobs, ledger or balance`;
  const listed = new Map(jobs.map((j) => [j.id as string, j]));
  const deletedCosts = [...w.costAtDelete.entries()].filter(([id]) => !listed.has(id)).map(([, cost]) => cost);
  const lost = [...w.jobs.keys()].filter((id) => !listed.has(id) && !w.costAtDelete.has(id));
  let credits = 0;
  let other = 0;
  let speech = 0;
  for (const e of ledger) {
    const amount = microOf(e.amount_in_euro);
    if (e.type === 'credit') credits += amount;
    else if (e.job_id === null) {
      other += e.type === 'charge' ? amount : -amount;
      if (e.speech_request_id !== null) speech += e.type === 'charge' ? amount : -amount;
    }
  }
  const reported = [...w.speechCosts.values()].reduce((s, c) => s + c, 0);
  if (reported > speech) return `${w.name}: the API reported ${reported} micro-EUR of speech, the ledger charged ${speech}`;
  return {
    name: w.name,
    credited_micro_eur: [...w.topups.values()].reduce((s, c) => s + c, 0),
    ledger_credits_micro_eur: credits,
    job_costs_micro_eur: [...jobs.map((j) => microOf(j.cost_in_euro ?? 0)), ...deletedCosts],
    other_net_charges_micro_eur: other,
    balance_micro_eur: microOf(ws.body.balance_in_euro),
    pending_jobs: jobs.filter((j) => j.status === 'pending').length,
    lost_jobs: lost,
  };
}

/**
 * Consent recordings left on disk beyond the live consents' (the churn deletes each consent it uploads;
 * a deletion removes its recording, the reconciler what a kill left): at most one per loop and kill of
 * an API process or PostgreSQL, and none without kills.
 */
async function consentRecordingsLeft(
  client: Client,
  workspaces: Workspace[],
  storageDir: string,
): Promise<{ on_disk: number; live: number } | null> {
  let live = 0;
  for (const w of workspaces) {
    const consents = await listAll(client, 'GET /v1/audio/voice_consents', '/v1/audio/voice_consents', w.key);
    if (!consents) return null;
    live += consents.length;
  }
  const dir = path.join(storageDir, 'consents');
  const on_disk = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => !f.endsWith('.tmp')).length : 0;
  return { on_disk, live };
}

/** The soak's data and the processes' logs: kept when it fails (or with SOAK_DIR / SOAK_KEEP_DATA). */
const root = process.env['SOAK_DIR'] ?? fs.mkdtempSync(path.join(os.tmpdir(), 'soak-'));

/** How long the end waits for the events of every finished job to reach the prompt receivers. */
const WEBHOOK_WAIT_MS = 90_000;

/** `workspace/job` of each finished job whose event has not reached its workspace's prompt receiver (waits, bounded). */
async function webhooksMissing(client: Client, workspaces: Workspace[], receivers: Receivers): Promise<string[]> {
  const finished = new Map<Workspace, string[]>();
  for (const w of workspaces) {
    const jobs = (await listJobs(client, w)) ?? [];
    finished.set(w, [...new Set([...jobs.filter((j) => j.status !== 'pending').map((j) => j.id as string), ...w.costAtDelete.keys()])]);
  }
  const deadline = Date.now() + WEBHOOK_WAIT_MS;
  for (;;) {
    const missing = workspaces.flatMap((w) =>
      finished
        .get(w)!
        .filter((id) => !receivers.jobsNotified(w.name).has(id))
        .map((id) => `${w.name}/${id}`),
    );
    if (missing.length === 0 || Date.now() > deadline) return missing;
    await sleep(2_000);
  }
}

async function main(): Promise<string[]> {
  const rng = new Rng(SEED);
  log(
    `soak: ${MINUTES} min, seed ${SEED}, ${APIS} API and ${WORKERS} worker process(es), ${WORKSPACES} workspaces, Temporal: ${TEMPORAL === 'server' ? 'temporal-server (PostgreSQL, mTLS), videos on MinIO' : 'dev server'}; data and logs in ${root}`,
  );
  const requests = new RequestLog();
  let cluster: Cluster | null = null;
  const receivers = await startReceivers(rng);
  // fal and Replicate configured against their fakes: their callback routes are live (the load's jobs
  // use the simulator; the callback abuse signs its captured deliveries with the fakes' keys).
  const fal = await new FalFake().start();
  const replicate = await new ReplicateFake().start();
  const stopAll = async () => {
    await receivers.close();
    await cluster?.stop();
    await fal.stop();
    await replicate.stop();
  };
  const watchdog = setTimeout(() => {
    process.stdout.write(`${verdictLine([`the soak did not finish within ${HARD_LIMIT_MS / 60_000} minutes`])}\n`);
    void stopAll().finally(() => process.exit(1));
  }, HARD_LIMIT_MS);
  watchdog.unref();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      process.stdout.write(`${verdictLine([`interrupted (${sig})`])}\n`);
      void stopAll().finally(() => process.exit(1));
    });
  }

  try {
    const started = Date.now();
    cluster = await startCluster({ root, apis: APIS, workers: WORKERS, temporal: TEMPORAL, env: { ...fal.env(), ...replicate.env() } });
    log(
      `service up in ${Date.now() - started} ms (${Object.entries(cluster.timings_ms)
        .map(([k, v]) => `${k} ${v} ms`)
        .join(', ')}): API ${cluster.apiBases.join(', ')}`,
    );
    const client = new Client(cluster.apiBases, requests);

    const workspaces: Workspace[] = [];
    for (let i = 0; i < WORKSPACES; i++) workspaces.push(await setUpWorkspace(client, `soak-${i + 1}`, CREDITS_IN_EURO));
    const fuzzWs = await setUpWorkspace(client, 'soak-fuzz', CREDITS_IN_EURO);
    for (const w of workspaces) {
      for (const url of [receivers.promptUrl(w.name), receivers.slowUrl, receivers.failingUrl, receivers.deadUrl]) {
        const a = await client.sendUntilOk({
          method: 'POST',
          route: 'POST /v2/webhooks',
          path: '/v2/webhooks',
          token: w.key,
          json: { url },
        });
        if (!isOk(a)) throw new Error(`could not register a webhook for ${w.name}: ${a.status} ${JSON.stringify(a.body)}`);
        if (url === receivers.promptUrl(w.name)) receivers.setSecret(w.name, a.body.secret);
      }
    }
    const corpus = generateCorpus(SEED);
    log(`fuzz corpus: ${corpus.length} cases from seed ${SEED}`);

    const findings = newFindings();
    const abuse: CallbackAbuseFindings = { byKind: new RequestLog(), sent: 0, unexpected: [] };
    const abuser = new CallbackAbuse(client, rng, { fal, replicate }, () => workspaces.flatMap((w) => [...w.jobs.keys()]), abuse);
    const loadUntil = Date.now() + MINUTES * 60_000;
    const chaos = startChaos(cluster.targets, rng, {
      until_ms: loadUntil,
      down_ms: { min: 2_000, max: 15_000 },
      calm_ms: { min: 5_000, max: 15_000 },
      max_faults: 10_000,
      log,
    });
    const progress = setInterval(() => log(`progress: ${requests.total()} requests, ${chaos.faults.length} faults`), 30_000);
    // Each loop is paced and stops at loadUntil; the step in flight then ends within its request timeout.
    const loops = [
      ...workspaces.map((w) => {
        const loop = new CustomerLoop(client, w, rng, findings);
        return paced(rng, loadUntil, 1_000, 100_000, () => loop.step());
      }),
      (async () => {
        let i = 0;
        await paced(rng, loadUntil, 800, 100_000, () => sendFuzzCase(client, fuzzWs, corpus[i++ % corpus.length]!, findings));
      })(),
      paced(rng, loadUntil, 1_500, 100_000, () => abuser.step()),
    ];
    await Promise.all(loops);
    chaos.stop();
    await chaos.done;
    clearInterval(progress);
    log(`load over: ${requests.total()} requests, ${chaos.faults.length} faults; bringing everything up`);

    await cluster.ensureAllUp();
    const all = [...workspaces, fuzzWs];
    const up = cluster;
    const { pending, temporal_restarted } = await drain(client, all, () => up.restartTemporal());
    if (temporal_restarted) log('drain: Temporal was restarted once during the drain (it had stopped serving)');
    // Every top-up again with its key: each must be confirmed now, and counted once.
    for (const w of all) {
      for (const [key, amount] of [...w.topups.entries()]) await topUp(client, w, Math.abs(amount) / 1e6, key);
    }
    const reasons: string[] = [];
    const unconfirmed = all.flatMap((w) => [...w.topups.entries()].filter(([, amount]) => amount < 0).map(([key]) => `${w.name}/${key}`));
    if (unconfirmed.length > 0) reasons.push(`${unconfirmed.length} top-up(s) never confirmed (first: ${unconfirmed[0]})`);
    if (pending > 0)
      reasons.push(`${pending === Infinity ? 'some' : pending} job(s) still pending ${DRAIN_TIMEOUT_MS / 1000} s after the load`);
    const audit = await client.sendUntilOk({
      method: 'GET',
      route: 'GET /admin/v1/ledger/audit',
      path: '/admin/v1/ledger/audit',
      token: SOAK_ADMIN_TOKEN,
    });
    if (!isOk(audit)) reasons.push(`ledger audit not answered (${audit.status})`);
    else if (audit.body.ok !== true) reasons.push(`ledger audit not ok: ${JSON.stringify(audit.body).slice(0, 600)}`);
    const summary: string[] = [];
    for (const w of all) {
      const m = await moneyOf(client, w);
      if (typeof m === 'string') {
        reasons.push(m);
        continue;
      }
      const jobs = m.job_costs_micro_eur.length;
      summary.push(
        `${w.name}: ${jobs} jobs (${w.costAtDelete.size} deleted), credited ${m.credited_micro_eur / 1e6} EUR, job costs ${m.job_costs_micro_eur.reduce((s, c) => s + c, 0) / 1e6} EUR, other charges ${m.other_net_charges_micro_eur / 1e6} EUR, balance ${m.balance_micro_eur / 1e6} EUR`,
      );
      reasons.push(...moneyProblems(m));
    }
    if (requests.serverErrors.length > 0) {
      const byRoute = new Map<string, number>();
      for (const e of requests.serverErrors) byRoute.set(`${e.route} ${e.status}`, (byRoute.get(`${e.route} ${e.status}`) ?? 0) + 1);
      const fuzzKinds = [...findings.fuzzServerErrors.entries()].map(([k, n]) => `${k} x${n}`).join(', ');
      reasons.push(
        `${requests.serverErrors.length} answer(s) 5xx other than 503: ${[...byRoute.entries()].map(([r, n]) => `${r} x${n}`).join(', ')}${fuzzKinds ? ` (fuzz cases: ${fuzzKinds})` : ''}; first body: ${requests.serverErrors[0]!.body.slice(0, 160)}`,
      );
    }
    const unnotified = await webhooksMissing(client, workspaces, receivers);
    if (unnotified.length > 0)
      reasons.push(
        `${unnotified.length} finished job(s) whose event never reached their workspace's receiver within ${WEBHOOK_WAIT_MS / 1000} s (first: ${unnotified[0]})`,
      );
    if (cluster.crashes.length > 0) reasons.push(`processes crashed: ${cluster.crashes.slice(0, 5).join(', ')}`);
    reasons.push(...chaos.problems, ...findings.problems.slice(0, 5));
    if (abuse.unexpected.length > 0)
      reasons.push(
        `${abuse.unexpected.length} callback abuse request(s) answered what the route does not document for them (first: ${abuse.unexpected[0]})`,
      );
    if (findings.fuzzAccepted.length > 0)
      reasons.push(`${findings.fuzzAccepted.length} malformed request(s) accepted (first: ${findings.fuzzAccepted[0]})`);
    if (receivers.stats.badSignatures.length > 0)
      reasons.push(`${receivers.stats.badSignatures.length} webhook(s) failed verification (first: ${receivers.stats.badSignatures[0]})`);
    if (chaos.faults.length === 0) reasons.push('no fault was injected (SOAK_MINUTES too short?)');
    const consents = await consentRecordingsLeft(client, all, path.join(root, 'data', 'storage'));
    const kills = chaos.faults.filter((f) => f.target.startsWith('api') || f.target.startsWith('postgres')).length;
    if (!consents) reasons.push('the voice consents could not be listed');
    else if (consents.on_disk - consents.live > kills * all.length) {
      reasons.push(
        `${consents.on_disk - consents.live} consent recording(s) left on disk beyond the ${consents.live} live consents (at most ${kills * all.length} after ${kills} kills)`,
      );
    }
    const floods = findings.mediaFloods;

    summary.push(
      `fuzz: ${findings.fuzzSent} malformed requests sent from a corpus of ${corpus.length}, by kind:`,
      requestTable(findings.fuzzByKind, 'fuzz kind'),
      '',
      `callback abuse: ${abuse.sent} requests to the provider callback routes (gzip bombs, unsigned floods, replays of a captured valid delivery), by kind:`,
      requestTable(abuse.byKind, 'abuse kind'),
      '',
      `webhooks: ${receivers.stats.prompt} deliveries to the prompt receivers (${receivers.stats.eventIds.size} distinct events, all verified: ${receivers.stats.badSignatures.length === 0}), ${receivers.stats.slow} attempts to the slow one, ${receivers.stats.failing} to the failing one (500 each), the dead one refused every attempt`,
      `thumbnail floods: ${floods.floods} (${floods.thumbnails} thumbnail requests), each during an opus, aac or flac speech answered ${[...floods.speechByStatus.entries()].map(([st, n]) => `${st} x${n}`).join(', ') || '-'} (charged as reported: the money check)`,
      `consent churn: ${findings.consentChurn.uploaded} uploaded, ${findings.consentChurn.deleted} deleted; recordings on disk ${consents?.on_disk ?? '?'} for ${consents?.live ?? '?'} live consents`,
      `answers 5xx other than 503: ${requests.serverErrors.length}; crashes: ${cluster.crashes.length}; audit ok: ${isOk(audit) && audit.body.ok === true}`,
      `duration: load ${MINUTES} min, total ${((Date.now() - started) / 60_000).toFixed(1)} min`,
    );
    process.stdout.write(`${formatReport(requests, chaos.faults, summary)}\n`);
    return reasons;
  } finally {
    clearTimeout(watchdog);
    await stopAll();
  }
}

main().then(
  (reasons) => {
    if (reasons.length === 0 && !process.env['SOAK_KEEP_DATA'] && !process.env['SOAK_DIR'])
      fs.rmSync(root, { recursive: true, force: true });
    else log(`data and logs kept in ${root}`);
    process.stdout.write(`${verdictLine(reasons)}\n`);
    process.exit(reasons.length === 0 ? 0 : 1);
  },
  (err: Error) => {
    process.stdout.write(`${verdictLine([`the soak could not run: ${err.message.split('\n')[0]}`])}\n`);
    process.exit(1);
  },
);
