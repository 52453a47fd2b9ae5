// The ledger audit (GET /admin/v1/ledger/audit): every balance equals the sum of its entries, every
// hold is backed by a request in flight, every API key's spend is what its requests charged, every job and speech request is charged exactly its cost
// (a cancelled job at most its unit price per video delivered and per request its provider bills), and
// nothing is charged that the service cannot account for: a pending job whose workflow is not running
// (every pending job is looked up, however many), a job pending long past its deadline, a charge for an
// attempt the API refused, a speech hold that outlived its request (the reconciler releases those), and a
// top-up that is not exactly one ledger entry of its own workspace and amount. Stripe's credits and debits
// (../payments/): what each workspace owes equals what its entries added to and paid of it, every Stripe
// object handled is exactly the one entry of its amount (none when it moved nothing), and what is owed is reported.
import { inTransaction, type Db, type Tx } from '../db/pool.js';
import { SPEECH_HOLD_TTL_MS } from './ledger.js';
import {
  readUsageMismatches,
  type UsageDailyMismatch,
  type UsageLedgerMismatch,
  type UsageModelMismatch,
  type UsageRowMismatch,
} from '../usage/audit.js';

/** How a job's workflow stands in Temporal. */
export type WorkflowState = 'running' | 'closed' | 'not_found';

export interface UnaccountedJob {
  job_id: string;
  reason: 'workflow_not_running' | 'past_deadline' | 'charged_after_refusal';
  detail: string;
}

export interface AuditReport {
  ok: boolean;
  workspaces_checked: number;
  jobs_checked: number;
  ledger_entries: number;
  balance_mismatches: { workspace_id: string; balance_micro_eur: number; ledger_sum_micro_eur: number }[];
  hold_mismatches: { workspace_id: string; held_micro_eur: number; holds_sum_micro_eur: number }[];
  key_spend_mismatches: { api_key_id: string; spent_micro_eur: number; charged_micro_eur: number }[];
  job_mismatches: { job_id: string; status: string; expected_net_charge_micro_eur: number; ledger_net_charge_micro_eur: number }[];
  speech_requests_checked: number;
  speech_mismatches: { speech_request_id: string; cost_micro_eur: number; ledger_net_charge_micro_eur: number }[];
  /** Held speech requests older than the hold's lifetime plus the audit's margin: the reconciler did not release them. */
  stale_speech_holds: { speech_request_id: string; held_since: string }[];
  topups_checked: number;
  /** Top-ups whose ledger entries are not exactly one entry of the top-up's workspace and amount. */
  topup_mismatches: { topup_id: string; amount_micro_eur: number; ledger_sum_micro_eur: number; entries: number }[];
  pending_jobs_checked: number;
  unaccounted_jobs: UnaccountedJob[];
  stripe_objects_checked: number;
  /** Workspaces whose owed_micro_eur is not the sum of their entries' owed changes. */
  owed_mismatches: { workspace_id: string; owed_micro_eur: number; ledger_owed_micro_eur: number }[];
  /** Stripe objects handled whose ledger entries are not exactly one of their workspace and amount (or entries of no object). */
  stripe_mismatches: { stripe_id: string; action: string; amount_micro_eur: number; ledger_micro_eur: number; entries: number }[];
  /** What workspaces owe now (not a mismatch: refunds and disputes of credits already spent), largest first. */
  owed: { workspace_id: string; owed_micro_eur: number }[];
  owed_micro_eur_total: number;
  /** Usage's rollups (src/usage/audit.ts): workspaces whose charged, refunded or cost differ from the ledger's. */
  usage_ledger_mismatches: UsageLedgerMismatch[];
  usage_rows_checked: number;
  /** Rollup rows whose counters differ from what their requests' rows say. */
  usage_row_mismatches: UsageRowMismatch[];
  /** Daily rollup rows that are not the sum of their day's hourly rows. */
  usage_daily_mismatches: UsageDailyMismatch[];
  /** Daily rollup rows by model that are not the sum of their day's daily rows of that model. */
  usage_model_mismatches: UsageModelMismatch[];
  batches_checked: number;
  /**
   * Batches whose reservation is not its requests' net charges + what it released + what remains, whose
   * ledger entries are not its reservation (one charge) and its releases, or that ended with money left.
   */
  batch_mismatches: BatchMismatch[];
}

export interface BatchMismatch {
  batch_id: string;
  status: string;
  reserved_micro_eur: number;
  /** Its requests' net charges: jobs' costs (estimates while pending), speech delivered. */
  requests_micro_eur: number;
  released_micro_eur: number;
  remaining_micro_eur: number;
  ledger_charged_micro_eur: number;
  ledger_refunded_micro_eur: number;
}

export interface AuditOptions {
  /** The Temporal state of each job's workflow; unset = not checked (tests of the ledger alone). */
  workflowStates?: (jobIds: string[]) => Promise<Map<string, WorkflowState>>;
  /** A pending job this long past its deadline is reported; a speech hold this long past its lifetime too. */
  deadline_margin_ms?: number;
}

const MISMATCHES_LISTED_MAX = 100;
export const DEFAULT_AUDIT_DEADLINE_MARGIN_MS = 15 * 60_000;

export async function auditLedger(db: Db, opts: AuditOptions = {}): Promise<AuditReport> {
  const margin_ms = opts.deadline_margin_ms ?? DEFAULT_AUDIT_DEADLINE_MARGIN_MS;
  // One snapshot: every check reads the same moment of the ledger.
  const snapshot = await inTransaction(db, async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const accounts = await readAccounts(tx);
    const charges = await readCharges(tx);
    const unsettled = await readUnsettled(tx, margin_ms);
    const topups = await readTopups(tx);
    const usage = { usage: await readUsageMismatches(tx) };
    const batches = await readBatches(tx);
    const stripe = await readStripe(tx);
    return { ...accounts, ...charges, ...unsettled, ...topups, ...usage, ...batches, ...stripe };
  });
  if (opts.workflowStates && snapshot.pending.length > 0) await findStoppedWorkflows(db, snapshot, opts.workflowStates);
  return toReport(snapshot);
}

type Snapshot = Awaited<ReturnType<typeof readAccounts>> &
  Awaited<ReturnType<typeof readCharges>> &
  Awaited<ReturnType<typeof readUnsettled>> &
  Awaited<ReturnType<typeof readTopups>> &
  Awaited<ReturnType<typeof readBatches>> &
  Awaited<ReturnType<typeof readStripe>> & { usage: Awaited<ReturnType<typeof readUsageMismatches>> };

/** Workspaces' balances and holds, and API keys' spend, that differ from what their entries and requests say. */
async function readAccounts(tx: Tx) {
  const balances = await tx.query<{ workspace_id: string; balance_micro_eur: number; ledger_sum_micro_eur: number }>(
    `SELECT w.id AS workspace_id, w.balance_micro_eur, COALESCE(SUM(l.amount_micro_eur), 0)::bigint AS ledger_sum_micro_eur
       FROM workspaces w LEFT JOIN ledger_entries l ON l.workspace_id = w.id GROUP BY w.id`,
  );
  const holds = await tx.query<{ workspace_id: string; held_micro_eur: number; holds_sum_micro_eur: number }>(
    `SELECT w.id AS workspace_id, w.held_micro_eur, COALESCE(SUM(s.cost_micro_eur) FILTER (WHERE s.status = 'held'), 0)::bigint AS holds_sum_micro_eur
       FROM workspaces w LEFT JOIN speech_requests s ON s.workspace_id = w.id GROUP BY w.id`,
  );
  // A key's spend is what its jobs charged net of refunds, plus its speech delivered or held, plus its batches' reservations net of releases.
  const keys = await tx.query<{ api_key_id: string; spent_micro_eur: number; charged_micro_eur: number }>(
    `SELECT k.id AS api_key_id, k.spent_micro_eur,
            (COALESCE((SELECT SUM(COALESCE(j.cost_micro_eur, j.estimated_cost_micro_eur)) FROM video_jobs j
                        WHERE j.api_key_id = k.id AND j.batch_id IS NULL), 0)
           + COALESCE((SELECT SUM(s.cost_micro_eur) FROM speech_requests s
                        WHERE s.api_key_id = k.id AND s.status IN ('delivered', 'held') AND s.batch_id IS NULL), 0)
           -- a batch's requests spend from its reservation, which moved the key's spend (less what it released)
           + COALESCE((SELECT SUM(b.reserved_micro_eur - b.released_micro_eur) FROM batches b WHERE b.api_key_id = k.id), 0))::bigint
              AS charged_micro_eur
       FROM api_keys k`,
  );
  return {
    workspaces: balances.rowCount ?? 0,
    balances: balances.rows.filter((r) => r.balance_micro_eur !== r.ledger_sum_micro_eur),
    holds: holds.rows.filter((r) => r.held_micro_eur !== r.holds_sum_micro_eur),
    keys: keys.rows.filter((r) => r.spent_micro_eur !== r.charged_micro_eur),
  };
}

/**
 * A settled job's unit price, videos delivered and requests billed without delivery (those of a cancel
 * its provider bills), as a LATERAL subquery of `video_jobs j`.
 */
const JOB_UNITS = `SELECT j.estimated_cost_micro_eur / (j.params->>'n')::int AS unit, jsonb_array_length(j.videos) AS delivered,
         CASE WHEN j.cancel_billed AND j.status = 'failed' AND jsonb_array_length(j.videos) = 0
              THEN COALESCE(j.cancel_billed_units, (j.params->>'n')::int) ELSE 0 END AS billed`;

/** Jobs and speech requests whose ledger entries do not add up to their charge. */
async function readCharges(tx: Tx) {
  // A pending job's net charge is its estimate; a finished job's is its actual cost.
  const jobs = await tx.query<{
    job_id: string;
    status: string;
    expected_net_charge_micro_eur: number;
    ledger_net_charge_micro_eur: number;
  }>(
    `SELECT j.id AS job_id, j.status,
            -- a batch's job has no entry of its own: its charge is drawn from the batch's reservation (readBatches)
            CASE WHEN j.batch_id IS NULL THEN COALESCE(j.cost_micro_eur, j.estimated_cost_micro_eur) ELSE 0 END AS expected_net_charge_micro_eur,
            (-COALESCE(SUM(l.amount_micro_eur), 0))::bigint AS ledger_net_charge_micro_eur
       FROM video_jobs j LEFT JOIN ledger_entries l ON l.video_job_id = j.id GROUP BY j.id
     UNION ALL
     -- A finished job's cost is recomputed: (estimate / n) per stored video, plus, for a job cancelled while
     -- its provider ran it, per request the provider bills that the cancel stopped (cancel_billed_units;
     -- n for a job the previous release settled, which kept the whole charge and recorded no count).
     SELECT j.id, j.status || ':cost', c.unit * (c.delivered + c.billed), j.cost_micro_eur
       FROM video_jobs j, LATERAL (${JOB_UNITS}) c
      WHERE j.status <> 'pending' AND j.cost_micro_eur <> c.unit * (c.delivered + c.billed)
     UNION ALL
     -- A cancelled job costs at most (estimate / n) x (requests its provider bills + videos delivered).
     SELECT j.id, j.status || ':cancel', c.unit * (c.delivered + c.billed), j.cost_micro_eur
       FROM video_jobs j, LATERAL (${JOB_UNITS}) c
      WHERE j.status <> 'pending' AND j.error->>'code' = 'cancelled'
        AND (j.cost_micro_eur > c.unit * (c.delivered + c.billed) OR c.billed > (j.params->>'n')::int)
     UNION ALL
     -- Every entry of a job is booked to the job's own workspace.
     SELECT j.id, j.status || ':workspace', 0, count(*)
       FROM video_jobs j JOIN ledger_entries l ON l.video_job_id = j.id AND l.workspace_id <> j.workspace_id
      GROUP BY j.id, j.status`,
  );
  // A delivered speech request's net charge is its cost; a held or released one's is nothing.
  const speech = await tx.query<{ speech_request_id: string; cost_micro_eur: number; ledger_net_charge_micro_eur: number }>(
    `SELECT s.id AS speech_request_id, CASE WHEN s.status = 'delivered' AND s.batch_id IS NULL THEN s.cost_micro_eur ELSE 0 END AS cost_micro_eur,
            (-COALESCE(SUM(l.amount_micro_eur), 0))::bigint AS ledger_net_charge_micro_eur
       FROM speech_requests s LEFT JOIN ledger_entries l ON l.speech_request_id = s.id GROUP BY s.id`,
  );
  return {
    jobs_checked: jobs.rowCount ?? 0,
    jobs: jobs.rows.filter((r) => r.expected_net_charge_micro_eur !== r.ledger_net_charge_micro_eur),
    speech_checked: speech.rowCount ?? 0,
    speech: speech.rows.filter((r) => r.cost_micro_eur !== r.ledger_net_charge_micro_eur),
  };
}

/** What is charged and not settled as it should be: refused attempts charged, jobs past their deadline, every pending job, stale speech holds. */
async function readUnsettled(tx: Tx, margin_ms: number) {
  const refusedButCharged = await tx.query<{ job_id: string; attempt_id: string }>(
    `SELECT j.id AS job_id, j.attempt_id FROM video_jobs j
       JOIN video_job_refusals r ON r.job_id = j.id AND r.attempt_id = j.attempt_id LIMIT ${MISMATCHES_LISTED_MAX}`,
  );
  const pastDeadline = await tx.query<{ job_id: string; deadline_at: Date }>(
    `SELECT id AS job_id, deadline_at FROM video_jobs
      WHERE status = 'pending' AND deadline_at < now() - make_interval(secs => $1 / 1000.0)
      ORDER BY deadline_at LIMIT ${MISMATCHES_LISTED_MAX}`,
    [margin_ms],
  );
  // Every pending job (they are bounded per workspace), oldest first.
  const pending = await tx.query<{ job_id: string }>(`SELECT id AS job_id FROM video_jobs WHERE status = 'pending' ORDER BY created_at`);
  const staleHolds = await tx.query<{ speech_request_id: string; held_at: Date }>(
    `SELECT id AS speech_request_id, held_at FROM speech_requests
      WHERE status = 'held' AND held_at < now() - make_interval(secs => ($1::float8 + $2::float8) / 1000.0)
      ORDER BY held_at LIMIT ${MISMATCHES_LISTED_MAX}`,
    [SPEECH_HOLD_TTL_MS, margin_ms],
  );
  const unaccounted: UnaccountedJob[] = [
    ...refusedButCharged.rows.map((r) => ({
      job_id: r.job_id,
      reason: 'charged_after_refusal' as const,
      detail: `attempt ${r.attempt_id} was refused and charged`,
    })),
    ...pastDeadline.rows.map((r) => ({
      job_id: r.job_id,
      reason: 'past_deadline' as const,
      detail: `pending since its deadline ${r.deadline_at.toISOString()}`,
    })),
  ];
  return {
    unaccounted,
    pending: pending.rows.map((r) => r.job_id),
    staleHolds: staleHolds.rows.map((r) => ({ speech_request_id: r.speech_request_id, held_since: r.held_at.toISOString() })),
  };
}

/**
 * Every batch: its reservation = its requests' net charges + released + remaining; its ledger entries
 * one charge of the reservation and refunds of what it released; nothing remaining once it ended.
 */
async function readBatches(tx: Tx) {
  const r = await tx.query<BatchMismatch>(
    `SELECT b.id AS batch_id, b.status, b.reserved_micro_eur, b.released_micro_eur, b.remaining_micro_eur,
            (COALESCE((SELECT SUM(COALESCE(j.cost_micro_eur, j.estimated_cost_micro_eur)) FROM video_jobs j WHERE j.batch_id = b.id), 0)
           + COALESCE((SELECT SUM(s.cost_micro_eur) FROM speech_requests s WHERE s.batch_id = b.id AND s.status = 'delivered'), 0))::bigint
              AS requests_micro_eur,
            (-COALESCE((SELECT SUM(l.amount_micro_eur) FROM ledger_entries l WHERE l.batch_id = b.id AND l.kind = 'charge'
                         AND l.workspace_id = b.workspace_id), 0))::bigint AS ledger_charged_micro_eur,
            COALESCE((SELECT SUM(l.amount_micro_eur) FROM ledger_entries l WHERE l.batch_id = b.id AND l.kind = 'refund'
                       AND l.workspace_id = b.workspace_id), 0)::bigint AS ledger_refunded_micro_eur
       FROM batches b`,
  );
  const wrong = (m: BatchMismatch) =>
    m.reserved_micro_eur !== m.requests_micro_eur + m.released_micro_eur + m.remaining_micro_eur ||
    m.ledger_charged_micro_eur !== m.reserved_micro_eur ||
    m.ledger_refunded_micro_eur !== m.released_micro_eur ||
    (['completed', 'cancelled', 'expired', 'failed'].includes(m.status) && m.remaining_micro_eur !== 0);
  const rows = r.rows.map((m) => ({
    ...m,
    requests_micro_eur: Number(m.requests_micro_eur),
    ledger_charged_micro_eur: Number(m.ledger_charged_micro_eur),
    ledger_refunded_micro_eur: Number(m.ledger_refunded_micro_eur),
  }));
  return { batches_checked: rows.length, batches: rows.filter(wrong) };
}

/** Top-ups that are not exactly one entry of their workspace and amount, and the ledger's size. */
async function readTopups(tx: Tx) {
  // A top-up is one ledger entry, of its workspace and amount; an entry of kind topup always names one.
  const topups = await tx.query<{ topup_id: string; amount_micro_eur: number; ledger_sum_micro_eur: number; entries: number }>(
    `SELECT t.id AS topup_id, t.amount_micro_eur, COALESCE(SUM(l.amount_micro_eur), 0)::bigint AS ledger_sum_micro_eur, count(l.id)::int AS entries
       FROM topups t LEFT JOIN ledger_entries l ON l.topup_id = t.id AND l.workspace_id = t.workspace_id AND l.kind = 'topup'
      GROUP BY t.id
     UNION ALL
     SELECT l.topup_id, 0, l.amount_micro_eur, -1 FROM ledger_entries l
      WHERE l.kind = 'topup' AND NOT EXISTS (SELECT 1 FROM topups t WHERE t.id = l.topup_id AND t.workspace_id = l.workspace_id)`,
  );
  const entries = await tx.query<{ n: number }>('SELECT count(*)::bigint AS n FROM ledger_entries');
  return {
    topups: topups.rows.filter((r) => r.entries !== 1 || r.ledger_sum_micro_eur !== r.amount_micro_eur),
    topups_checked: topups.rows.filter((r) => r.entries !== -1).length,
    entries: entries.rows[0]!.n,
  };
}

/**
 * Stripe's money: what each workspace owes is what its entries added to it and paid of it; each Stripe
 * object handled is one entry whose balance move plus owed change is the object's amount (none for an
 * object that moved nothing), of the object's workspace; no credit or debit entry lacks its object.
 */
async function readStripe(tx: Tx) {
  const owed = await tx.query<{ workspace_id: string; owed_micro_eur: number; ledger_owed_micro_eur: number }>(
    `SELECT w.id AS workspace_id, w.owed_micro_eur, COALESCE(SUM(l.owed_change_micro_eur), 0)::bigint AS ledger_owed_micro_eur
       FROM workspaces w LEFT JOIN ledger_entries l ON l.workspace_id = w.id GROUP BY w.id`,
  );
  const objects = await tx.query<{
    stripe_id: string;
    action: string;
    amount_micro_eur: number;
    ledger_micro_eur: number;
    entries: number;
  }>(
    `SELECT o.stripe_id, o.action, o.amount_micro_eur,
            COALESCE(SUM(l.amount_micro_eur - l.owed_change_micro_eur), 0)::bigint AS ledger_micro_eur, count(l.id)::int AS entries
       FROM stripe_objects o
       LEFT JOIN ledger_entries l ON l.idempotency_key = 'stripe:' || o.action || ':' || o.stripe_id AND l.workspace_id = o.workspace_id
      GROUP BY o.stripe_id, o.action, o.amount_micro_eur
     UNION ALL
     SELECT l.idempotency_key, l.kind, 0, l.amount_micro_eur - l.owed_change_micro_eur, -1 FROM ledger_entries l
      WHERE l.kind IN ('credit', 'debit')
        AND NOT EXISTS (SELECT 1 FROM stripe_objects o WHERE l.idempotency_key = 'stripe:' || o.action || ':' || o.stripe_id
                                                         AND o.workspace_id = l.workspace_id)`,
  );
  const owing = await tx.query<{ workspace_id: string; owed_micro_eur: number }>(
    `SELECT id AS workspace_id, owed_micro_eur FROM workspaces WHERE owed_micro_eur > 0 ORDER BY owed_micro_eur DESC, id LIMIT ${MISMATCHES_LISTED_MAX}`,
  );
  const total = await tx.query<{ n: number }>('SELECT COALESCE(SUM(owed_micro_eur), 0)::bigint AS n FROM workspaces');
  return {
    owedMismatches: owed.rows.filter((r) => r.owed_micro_eur !== r.ledger_owed_micro_eur),
    stripe: objects.rows.filter((r) => r.entries !== (r.amount_micro_eur === 0 ? 0 : 1) || r.ledger_micro_eur !== r.amount_micro_eur),
    stripe_checked: objects.rows.filter((r) => r.entries !== -1).length,
    owing: owing.rows,
    owed_total: total.rows[0]!.n,
  };
}

/** Adds the pending jobs whose workflow is not running (and that are still pending now) to the unaccounted. */
async function findStoppedWorkflows(db: Db, report: Snapshot, workflowStates: NonNullable<AuditOptions['workflowStates']>): Promise<void> {
  const states = await workflowStates(report.pending);
  const notRunning = report.pending.filter((id) => states.get(id) !== 'running');
  if (notRunning.length > 0) {
    // The snapshot is a moment old: a job that settled since (its workflow then closed) is not lost.
    const still = await db.query<{ id: string }>("SELECT id FROM video_jobs WHERE id = ANY($1::uuid[]) AND status = 'pending'", [
      notRunning,
    ]);
    for (const { id } of still.rows) {
      report.unaccounted.push({ job_id: id, reason: 'workflow_not_running', detail: `workflow ${states.get(id) ?? 'not_found'}` });
    }
  }
}

function toReport(report: Snapshot): AuditReport {
  const ok =
    report.balances.length === 0 &&
    report.holds.length === 0 &&
    report.keys.length === 0 &&
    report.jobs.length === 0 &&
    report.speech.length === 0 &&
    report.unaccounted.length === 0 &&
    report.staleHolds.length === 0 &&
    report.topups.length === 0 &&
    report.owedMismatches.length === 0 &&
    report.stripe.length === 0 &&
    report.usage.ledger.length === 0 &&
    report.usage.rows.length === 0 &&
    report.usage.daily.length === 0 &&
    report.usage.by_model.length === 0 &&
    report.batches.length === 0;
  return {
    ok,
    workspaces_checked: report.workspaces,
    jobs_checked: report.jobs_checked,
    ledger_entries: report.entries,
    balance_mismatches: report.balances.slice(0, MISMATCHES_LISTED_MAX),
    hold_mismatches: report.holds.slice(0, MISMATCHES_LISTED_MAX),
    key_spend_mismatches: report.keys.slice(0, MISMATCHES_LISTED_MAX),
    job_mismatches: report.jobs.slice(0, MISMATCHES_LISTED_MAX),
    speech_requests_checked: report.speech_checked,
    speech_mismatches: report.speech.slice(0, MISMATCHES_LISTED_MAX),
    stale_speech_holds: report.staleHolds,
    topups_checked: report.topups_checked,
    topup_mismatches: report.topups.slice(0, MISMATCHES_LISTED_MAX),
    pending_jobs_checked: report.pending.length,
    unaccounted_jobs: report.unaccounted.slice(0, MISMATCHES_LISTED_MAX),
    stripe_objects_checked: report.stripe_checked,
    owed_mismatches: report.owedMismatches.slice(0, MISMATCHES_LISTED_MAX),
    stripe_mismatches: report.stripe.slice(0, MISMATCHES_LISTED_MAX),
    owed: report.owing,
    owed_micro_eur_total: report.owed_total,
    usage_ledger_mismatches: report.usage.ledger,
    usage_rows_checked: report.usage.rows_checked,
    usage_row_mismatches: report.usage.rows,
    usage_daily_mismatches: report.usage.daily,
    usage_model_mismatches: report.usage.by_model,
    batches_checked: report.batches_checked,
    batch_mismatches: report.batches.slice(0, MISMATCHES_LISTED_MAX),
  };
}
