// The usage part of the ledger audit (src/billing/audit.ts): the rollups equal the ledger, and what the
// requests' rows say. Read in the audit's snapshot.
//   1. Per workspace: the rollups' charged and refunded are the ledger's charges and refunds, and their
//      cost is what the ledger kept net of every pending job's charge (the estimate it still holds). A
//      batch's reservation and releases count as its requests' own charges and refunds, drawn from it.
//   2. Per rollup row (workspace, hour, kind, model, API key, backend): its counters are those of the
//      settled jobs and speech requests (not pending, not held: reads count those from their rows, as
//      check 1 does) and voice clones created in that hour with those fields, as they stand.
//   3. Per daily row (workspace, UTC day, kind, model, API key, backend): its counters are the sums of the
//      hourly rows of that day with those fields (so, by 2, those of the requests created that day).
//   4. Per daily row by model (workspace, UTC day, model): its counters are the sums of that day's daily
//      rows of that model (so, by 3, those of the requests of that model created that day).
import type { Tx } from '../db/pool.js';
import { COUNTERS } from './service.js';

export interface UsageLedgerMismatch {
  workspace_id: string;
  /** charged, refunded, cost */
  rollups_micro_eur: [number, number, number];
  ledger_micro_eur: [number, number, number];
}

export interface UsageRowMismatch {
  workspace_id: string;
  hour: string;
  kind: string;
  model: string | null;
  api_key_id: string | null;
  backend: string | null;
  /** requests, succeeded, failed, pending, charged, refunded, cost, videos, video_seconds, characters */
  rollup: number[];
  expected: number[];
}

export interface UsageDailyMismatch {
  workspace_id: string;
  day: string;
  kind: string;
  model: string | null;
  api_key_id: string | null;
  backend: string | null;
  /** requests, succeeded, failed, pending, charged, refunded, cost, videos, video_seconds, characters */
  daily: number[];
  hourly: number[];
}

export interface UsageModelMismatch {
  workspace_id: string;
  day: string;
  model: string | null;
  /** requests, succeeded, failed, pending, charged, refunded, cost, videos, video_seconds, characters */
  by_model: number[];
  daily: number[];
}

const LISTED_MAX = 100;

/**
 * What every settled request's row contributes, grouped as the rollups are (the triggers of
 * 021_usage_rollups.sql and 029_usage_daily_rollups.sql, as a scan).
 */
const EXPECTED_SQL = `
  SELECT j.workspace_id, date_trunc('hour', j.created_at, 'UTC') AS hour, 'video' AS kind, j.model, j.api_key_id, j.backend,
         count(*) AS requests, count(*) FILTER (WHERE j.status = 'succeeded') AS succeeded,
         count(*) FILTER (WHERE j.status = 'failed') AS failed, count(*) FILTER (WHERE j.status = 'pending') AS pending,
         sum(j.estimated_cost_micro_eur) AS charged_micro_eur, sum(j.refunded_micro_eur) AS refunded_micro_eur,
         COALESCE(sum(j.cost_micro_eur), 0) AS cost_micro_eur,
         COALESCE(sum(jsonb_array_length(j.videos)) FILTER (WHERE j.status = 'succeeded'), 0) AS videos,
         COALESCE(sum(jsonb_array_length(j.videos) * COALESCE((j.params->>'durationSeconds')::int, 0)) FILTER (WHERE j.status = 'succeeded'), 0)
           AS video_seconds,
         0 AS characters
    FROM video_jobs j WHERE j.status <> 'pending' GROUP BY 1, 2, 3, 4, 5, 6
  UNION ALL
  SELECT s.workspace_id, date_trunc('hour', s.created_at, 'UTC'), 'speech', s.model, s.api_key_id, s.backend,
         count(*), count(*) FILTER (WHERE s.status = 'delivered'), count(*) FILTER (WHERE s.status = 'released'),
         count(*) FILTER (WHERE s.status = 'held'),
         COALESCE(sum(s.cost_micro_eur) FILTER (WHERE s.status = 'delivered'), 0), 0,
         COALESCE(sum(s.cost_micro_eur) FILTER (WHERE s.status = 'delivered'), 0), 0, 0,
         COALESCE(sum(s.characters) FILTER (WHERE s.status = 'delivered'), 0)
    FROM speech_requests s WHERE s.status <> 'held' GROUP BY 1, 2, 3, 4, 5, 6
  UNION ALL
  SELECT v.workspace_id, date_trunc('hour', v.created_at, 'UTC'), 'voice_clone', NULL, v.api_key_id, v.provider,
         count(*), count(*), 0, 0, 0, 0, 0, 0, 0, 0
    FROM voices v GROUP BY 1, 2, 3, 4, 5, 6`;

const sameKey = (a: string, b: string, at: 'hour' | 'day' = 'hour') =>
  ['workspace_id', at, 'kind'].map((k) => `${a}.${k} = ${b}.${k}`).join(' AND ') +
  ` AND COALESCE(${a}.model, '') = COALESCE(${b}.model, '') AND COALESCE(${a}.api_key_id::text, '') = COALESCE(${b}.api_key_id::text, '')` +
  ` AND COALESCE(${a}.backend, '') = COALESCE(${b}.backend, '')`;

export async function readUsageMismatches(tx: Tx): Promise<{
  ledger: UsageLedgerMismatch[];
  rows: UsageRowMismatch[];
  rows_checked: number;
  daily: UsageDailyMismatch[];
  by_model: UsageModelMismatch[];
}> {
  const ledger = await tx.query<{ workspace_id: string; r: string[]; l: string[] }>(
    `WITH r AS (SELECT workspace_id, sum(charged_micro_eur) AS charged, sum(refunded_micro_eur) AS refunded, sum(cost_micro_eur) AS cost
                  FROM (SELECT workspace_id, charged_micro_eur, refunded_micro_eur, cost_micro_eur FROM usage_rollups
                        UNION ALL
                        -- Pending jobs count from their rows (the rollups hold settled requests).
                        SELECT workspace_id, estimated_cost_micro_eur, refunded_micro_eur, COALESCE(cost_micro_eur, 0)
                          FROM video_jobs WHERE status = 'pending') u
                 GROUP BY workspace_id),
          -- A batch's entries (its reservation, its releases) stand for its requests' charges and refunds, drawn from
          -- and returned into the reservation (the ledger audit checks reservation = requests + released + remaining).
          l0 AS (SELECT workspace_id, -COALESCE(sum(amount_micro_eur) FILTER (WHERE kind = 'charge'), 0) AS charged,
                        COALESCE(sum(amount_micro_eur) FILTER (WHERE kind = 'refund'), 0) AS refunded
                   FROM ledger_entries WHERE batch_id IS NULL GROUP BY workspace_id
                 UNION ALL
                 SELECT workspace_id, sum(estimated_cost_micro_eur), sum(refunded_micro_eur) FROM video_jobs WHERE batch_id IS NOT NULL GROUP BY workspace_id
                 UNION ALL
                 SELECT workspace_id, sum(cost_micro_eur), 0 FROM speech_requests WHERE batch_id IS NOT NULL AND status = 'delivered' GROUP BY workspace_id),
          l AS (SELECT workspace_id, sum(charged) AS charged, sum(refunded) AS refunded, sum(charged) - sum(refunded) AS kept
                  FROM l0 GROUP BY workspace_id),
          p AS (SELECT workspace_id, sum(estimated_cost_micro_eur) AS held FROM video_jobs WHERE status = 'pending' GROUP BY workspace_id)
     SELECT w.id AS workspace_id,
            ARRAY[COALESCE(r.charged, 0), COALESCE(r.refunded, 0), COALESCE(r.cost, 0)]::bigint[] AS r,
            ARRAY[COALESCE(l.charged, 0), COALESCE(l.refunded, 0), COALESCE(l.kept, 0) - COALESCE(p.held, 0)]::bigint[] AS l
       FROM workspaces w LEFT JOIN r ON r.workspace_id = w.id LEFT JOIN l ON l.workspace_id = w.id LEFT JOIN p ON p.workspace_id = w.id`,
  );
  const rows = await tx.query<UsageRowMismatch & { hour: Date }>(
    `WITH e AS (${EXPECTED_SQL})
     SELECT COALESCE(u.workspace_id, e.workspace_id) AS workspace_id, COALESCE(u.hour, e.hour) AS hour, COALESCE(u.kind, e.kind) AS kind,
            COALESCE(u.model, e.model) AS model, COALESCE(u.api_key_id, e.api_key_id) AS api_key_id, COALESCE(u.backend, e.backend) AS backend,
            ARRAY[${COUNTERS.map((c) => `COALESCE(u.${c}, 0)`).join(', ')}]::bigint[] AS rollup,
            ARRAY[${COUNTERS.map((c) => `COALESCE(e.${c}, 0)`).join(', ')}]::bigint[] AS expected
       FROM usage_rollups u FULL JOIN e ON ${sameKey('u', 'e')}
      WHERE ${COUNTERS.map((c) => `COALESCE(u.${c}, 0) <> COALESCE(e.${c}, 0)`).join(' OR ')}
      LIMIT ${LISTED_MAX}`,
  );
  const daily = await readDailyMismatches(tx);
  const by_model = await readModelMismatches(tx);
  const checked = await tx.query<{ n: number }>(`SELECT count(*)::bigint AS n FROM usage_rollups`);
  const toNumbers = (a: string[]) => a.map(Number);
  return {
    ledger: ledger.rows
      .map((m) => ({ workspace_id: m.workspace_id, rollups: toNumbers(m.r), ledger: toNumbers(m.l) }))
      .filter((m) => m.rollups.some((v, i) => v !== m.ledger[i]))
      .slice(0, LISTED_MAX)
      .map((m) => ({
        workspace_id: m.workspace_id,
        rollups_micro_eur: m.rollups as [number, number, number],
        ledger_micro_eur: m.ledger as [number, number, number],
      })),
    rows: rows.rows.map((m) => ({
      ...m,
      hour: m.hour.toISOString(),
      rollup: toNumbers(m.rollup as unknown as string[]),
      expected: toNumbers(m.expected as unknown as string[]),
    })),
    rows_checked: checked.rows[0]!.n,
    daily,
    by_model,
  };
}

/** The daily rows that are not the sums of their day's hourly rows (either side missing counts as zeros). */
async function readDailyMismatches(tx: Tx): Promise<UsageDailyMismatch[]> {
  const daily = await tx.query<UsageDailyMismatch & { day: Date }>(
    `WITH h AS (SELECT workspace_id, date_trunc('day', hour, 'UTC') AS day, kind, model, api_key_id, backend,
                       ${COUNTERS.map((c) => `sum(${c}) AS ${c}`).join(', ')}
                  FROM usage_rollups GROUP BY 1, 2, 3, 4, 5, 6)
     SELECT COALESCE(d.workspace_id, h.workspace_id) AS workspace_id, COALESCE(d.day, h.day) AS day, COALESCE(d.kind, h.kind) AS kind,
            COALESCE(d.model, h.model) AS model, COALESCE(d.api_key_id, h.api_key_id) AS api_key_id, COALESCE(d.backend, h.backend) AS backend,
            ARRAY[${COUNTERS.map((c) => `COALESCE(d.${c}, 0)`).join(', ')}]::bigint[] AS daily,
            ARRAY[${COUNTERS.map((c) => `COALESCE(h.${c}, 0)`).join(', ')}]::bigint[] AS hourly
       FROM usage_daily_rollups d FULL JOIN h ON ${sameKey('d', 'h', 'day')}
      WHERE ${COUNTERS.map((c) => `COALESCE(d.${c}, 0) <> COALESCE(h.${c}, 0)`).join(' OR ')}
      LIMIT ${LISTED_MAX}`,
  );
  return daily.rows.map((m) => ({
    ...m,
    day: m.day.toISOString(),
    daily: (m.daily as unknown as string[]).map(Number),
    hourly: (m.hourly as unknown as string[]).map(Number),
  }));
}

/** The daily rows by model that are not the sums of their day's daily rows of that model (either side missing counts as zeros). */
async function readModelMismatches(tx: Tx): Promise<UsageModelMismatch[]> {
  const r = await tx.query<UsageModelMismatch & { day: Date }>(
    `WITH d AS (SELECT workspace_id, day, model, ${COUNTERS.map((c) => `sum(${c}) AS ${c}`).join(', ')}
                  FROM usage_daily_rollups GROUP BY 1, 2, 3)
     SELECT COALESCE(m.workspace_id, d.workspace_id) AS workspace_id, COALESCE(m.day, d.day) AS day, COALESCE(m.model, d.model) AS model,
            ARRAY[${COUNTERS.map((c) => `COALESCE(m.${c}, 0)`).join(', ')}]::bigint[] AS by_model,
            ARRAY[${COUNTERS.map((c) => `COALESCE(d.${c}, 0)`).join(', ')}]::bigint[] AS daily
       FROM usage_daily_model_rollups m FULL JOIN d
         ON m.workspace_id = d.workspace_id AND m.day = d.day AND COALESCE(m.model, '') = COALESCE(d.model, '')
      WHERE ${COUNTERS.map((c) => `COALESCE(m.${c}, 0) <> COALESCE(d.${c}, 0)`).join(' OR ')}
      LIMIT ${LISTED_MAX}`,
  );
  return r.rows.map((m) => ({
    ...m,
    day: m.day.toISOString(),
    by_model: (m.by_model as unknown as string[]).map(Number),
    daily: (m.daily as unknown as string[]).map(Number),
  }));
}
