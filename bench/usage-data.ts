// The usage phase's data: a workspace's settled video jobs and speech requests, their ledger entries and
// their usage rollups, written with set-based SQL (INSERT ... SELECT generate_series), as the product
// would have written them one request at a time. The rollups are not left to the triggers of
// 021_usage_rollups.sql (upserts per row): the triggers are disabled while a step is written, and the
// step's rows are then counted once, grouped as the triggers group them, by the migration's own
// functions (usage_video_job_counts, usage_speech_counts) and added to the hourly rollups with one upsert
// per group, to the daily ones (029_usage_daily_rollups.sql) with one per day and group, and to the daily
// ones by model (033_usage_daily_model_rollups.sql) with one per day and model.
// The sample check (`compareWithTriggers`) checks on a small sample that this gives exactly what the triggers give.
//
// What a step writes, per 20 requests (21 ledger entries):
//   12 video jobs: 10 succeeded (one video, one charge entry), 1 delivered one of its two videos
//      (a shortfall: charge and refund of the missing video), 1 failed (charge and full refund);
//   8 speech requests: 7 delivered (one charge entry each), 1 released (no entry).
// Each request gets a model of the catalog at random (a video job the model's first backend, a speech
// request the model's provider), one of the workspace's API keys at random, and a creation time at
// random in the range. Ledger entries are numbered in order of their time within a step, and each
// records the balance it left; the workspace's balance and each key's spend move by the step's sums.
import pg from 'pg';
import { speechModels, videoModels } from '../src/models/catalog.js';
import { COUNTERS } from '../src/usage/service.js';

/** Ledger entries per 20 requests (see above). */
const ENTRIES_PER_20_REQUESTS = 21;

export interface UsageStepSpec {
  workspaceId: string;
  apiKeyIds: string[];
  /** Ledger entries to add (the request count is derived from it; the exact count written is returned). */
  entries: number;
  from_ms: number;
  span_ms: number;
  /**
   * true: leave the rollups to the triggers, and compare what they wrote with what the grouped count
   * gives (the workspace must have no rollups before).
   */
  compareWithTriggers?: boolean;
}

export interface UsageStepWritten {
  requests: number;
  entries: number;
  net_micro_eur: number;
  /** With compareWithTriggers: the step's rollup groups, and how many differ from the triggers' rows. */
  compared?: { groups: number; differing: number };
}

const catalogArrays = () => {
  const video = videoModels().filter((m) => m.variant !== 'simulated');
  const speech = speechModels().filter((m) => m.provider !== 'simulator');
  return {
    videoModels: video.map((m) => m.id),
    videoBackends: video.map((m) => m.backend),
    speechModels: speech.map((m) => m.id),
    speechProviders: speech.map((m) => m.provider),
  };
};

/** Requests for about `entries` ledger entries. */
export const requestsFor = (entries: number) => Math.max(20, Math.round((entries * 20) / ENTRIES_PER_20_REQUESTS));

/**
 * The step's requests, drawn once (temporary tables, dropped at the end of the transaction). $1 requests,
 * $2 the API keys, $3 the models, $4 from (Unix ms), $5 span (ms).
 */
const DRAW_VIDEO_SQL = `
CREATE TEMP TABLE step_video ON COMMIT DROP AS
SELECT gen_random_uuid() AS id, g,
       CASE g % 20 WHEN 0 THEN 'failed' ELSE 'succeeded' END AS status,
       CASE g % 20 WHEN 1 THEN 2 ELSE 1 END AS n,
       CASE g % 20 WHEN 0 THEN 0 ELSE 1 END AS delivered,
       (200000 + (g % 7) * 100000)::bigint AS unit,
       1 + floor(random() * cardinality($3::text[]))::int AS model_i,
       ($2::uuid[])[1 + floor(random() * cardinality($2::uuid[]))::int] AS api_key_id,
       to_timestamp(($4::float8 + random() * $5::float8) / 1000.0) AS created_at
  FROM generate_series(1, $1::int) g WHERE g % 20 < 12`;
const DRAW_SPEECH_SQL = `
CREATE TEMP TABLE step_speech ON COMMIT DROP AS
SELECT gen_random_uuid() AS id, g,
       CASE g % 20 WHEN 19 THEN 'released' ELSE 'delivered' END AS status,
       100 + (g * 37) % 1900 AS characters,
       1 + floor(random() * cardinality($3::text[]))::int AS model_i,
       ($2::uuid[])[1 + floor(random() * cardinality($2::uuid[]))::int] AS api_key_id,
       to_timestamp(($4::float8 + random() * $5::float8) / 1000.0) AS created_at
  FROM generate_series(1, $1::int) g WHERE g % 20 >= 12`;

/** The rows, as the charge and the settlement leave them: $1 the workspace, $2 models, $3 their backends. */
const VIDEO_ROWS_SQL = `
INSERT INTO video_jobs (id, workspace_id, workflow_id, model, prompt, request_fingerprint, params, status, estimated_cost_micro_eur,
                        cost_micro_eur, refunded_micro_eur, videos, error, created_at, completed_at, attempt_id, backend, deadline_at, api_key_id)
SELECT s.id, $1, 'video-job-' || s.id, ($2::text[])[s.model_i], 'usage bench ' || s.g, md5(s.g::text),
       jsonb_build_object('n', s.n, 'durationSeconds', 4, 'aspectRatio', '16:9'), s.status, s.unit * s.n,
       s.unit * s.delivered, s.unit * (s.n - s.delivered),
       CASE WHEN s.delivered = 1 THEN jsonb_build_array(jsonb_build_object(
         'storage_key', 'videos/' || s.id || '/0.mp4', 'content_type', 'video/mp4', 'bytes', 1048576)) ELSE '[]'::jsonb END,
       CASE s.status WHEN 'failed' THEN '{"code": "provider_error", "message": "the provider failed the generation"}'::jsonb END,
       s.created_at, s.created_at + interval '90 seconds', gen_random_uuid(), ($3::text[])[s.model_i], s.created_at + interval '1 hour', s.api_key_id
  FROM step_video s`;
/** ... and as the speech capture (or release) leaves them: $1 the workspace, $2 models, $3 their providers. */
const SPEECH_ROWS_SQL = `
INSERT INTO speech_requests (id, workspace_id, idempotency_key, request_fingerprint, model, voice, characters, response_format, audio_bytes,
                             cost_micro_eur, created_at, status, held_at, audio_storage_key, audio_content_type, api_key_id, backend, delivered_at)
SELECT s.id, $1, 'speech-' || s.id, md5(s.g::text), ($2::text[])[s.model_i], 'alloy', s.characters, 'mp3',
       CASE s.status WHEN 'delivered' THEN s.characters * 80 END, s.characters * 150, s.created_at, s.status, s.created_at,
       CASE s.status WHEN 'delivered' THEN 'speech/' || s.id || '.mp3' END, CASE s.status WHEN 'delivered' THEN 'audio/mpeg' END,
       s.api_key_id, ($3::text[])[s.model_i], CASE s.status WHEN 'delivered' THEN s.created_at END
  FROM step_speech s`;

/** The step's ledger entries in order of time, each with the balance it left, from the balance before the step. */
const ENTRIES_SQL = `
WITH e AS (
  SELECT id AS video_job_id, NULL::uuid AS speech_request_id, 'charge' AS kind, -(unit * n) AS amount, 'video_job:' || id || ':charge' AS key, created_at
    FROM step_video
  UNION ALL
  SELECT id, NULL, 'refund', unit * (n - delivered), 'video_job:' || id || ':refund', created_at + interval '90 seconds'
    FROM step_video WHERE delivered < n
  UNION ALL
  SELECT NULL, id, 'charge', -(characters * 150), 'speech:' || id || ':charge', created_at FROM step_speech WHERE status = 'delivered'
)
INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, video_job_id, speech_request_id, balance_after_micro_eur, created_at)
SELECT $1, kind, amount, key, video_job_id, speech_request_id,
       (SELECT balance_micro_eur FROM workspaces WHERE id = $1) + sum(amount) OVER (ORDER BY created_at, key ROWS UNBOUNDED PRECEDING), created_at
  FROM e ORDER BY created_at, key`;

/**
 * The step's requests, grouped as the triggers group them, each row's counters computed by the migration's
 * own functions (usage_video_job_counts, usage_speech_counts) and summed per group.
 */
const STEP_GROUPS_SQL = `
SELECT workspace_id, date_trunc('hour', created_at, 'UTC') AS hour, kind, model, api_key_id, backend,
       sum(c[1])::bigint AS requests, sum(c[2])::bigint AS succeeded, sum(c[3])::bigint AS failed, sum(c[4])::bigint AS pending,
       sum(c[5])::bigint AS charged_micro_eur, sum(c[6])::bigint AS refunded_micro_eur, sum(c[7])::bigint AS cost_micro_eur,
       sum(c[8])::bigint AS videos, sum(c[9])::bigint AS video_seconds, sum(c[10])::bigint AS characters
  FROM (SELECT j.workspace_id, j.created_at, 'video' AS kind, j.model, j.api_key_id, j.backend, usage_video_job_counts(j) AS c
          FROM video_jobs j JOIN step_video USING (id)
        UNION ALL
        SELECT r.workspace_id, r.created_at, 'speech', r.model, r.api_key_id, r.backend, usage_speech_counts(r)
          FROM speech_requests r JOIN step_speech USING (id)) x
 GROUP BY 1, 2, 3, 4, 5, 6`;

/** Adds the counters of the new row to those of the row it conflicts with. */
const addCounters = COUNTERS.map((c) => `${c} = u.${c} + EXCLUDED.${c}`).join(', ');

/** The step's groups added to the hourly rollups, one upsert per group. */
const ROLLUPS_SQL = `
INSERT INTO usage_rollups AS u (workspace_id, hour, kind, model, api_key_id, backend, ${COUNTERS.join(', ')})
${STEP_GROUPS_SQL}
ON CONFLICT (workspace_id, hour, kind, model, api_key_id, backend) DO UPDATE SET ${addCounters}`;

/** ... and, summed per UTC day, to the daily rollups (029_usage_daily_rollups.sql). */
const DAILY_ROLLUPS_SQL = `
INSERT INTO usage_daily_rollups AS u (workspace_id, day, kind, model, api_key_id, backend, ${COUNTERS.join(', ')})
SELECT workspace_id, date_trunc('day', hour, 'UTC'), kind, model, api_key_id, backend, ${COUNTERS.map((c) => `sum(${c})`).join(', ')}
  FROM (${STEP_GROUPS_SQL}) g GROUP BY 1, 2, 3, 4, 5, 6
ON CONFLICT (workspace_id, day, kind, model, api_key_id, backend) DO UPDATE SET ${addCounters}`;

/** ... and, summed per UTC day and model, to the daily rollups by model (033_usage_daily_model_rollups.sql). */
const MODEL_ROLLUPS_SQL = `
INSERT INTO usage_daily_model_rollups AS u (workspace_id, day, model, ${COUNTERS.join(', ')})
SELECT workspace_id, date_trunc('day', hour, 'UTC'), model, ${COUNTERS.map((c) => `sum(${c})`).join(', ')}
  FROM (${STEP_GROUPS_SQL}) g GROUP BY 1, 2, 3
ON CONFLICT (workspace_id, day, model) DO UPDATE SET ${addCounters}`;

/**
 * For a step written with the triggers on into a workspace that had no rollups: the groups that differ
 * between what the triggers wrote and what the grouped count gives (in either direction), and how many
 * groups there are.
 */
const COMPARE_SQL = `
WITH counted AS (${STEP_GROUPS_SQL}),
triggered AS (
  SELECT workspace_id, hour, kind, model, api_key_id, backend, requests, succeeded, failed, pending, charged_micro_eur,
         refunded_micro_eur, cost_micro_eur, videos, video_seconds, characters
    FROM usage_rollups WHERE workspace_id = $1 AND requests <> 0
)
SELECT (SELECT count(*) FROM counted)::int AS groups,
       (SELECT count(*) FROM (SELECT * FROM counted EXCEPT SELECT * FROM triggered) a)::int
     + (SELECT count(*) FROM (SELECT * FROM triggered EXCEPT SELECT * FROM counted) b)::int AS differing`;

/** The workspace's balance and each key's spend move by what the step's requests charged, net of refunds. */
const ACCOUNTS_SQL = `
WITH net AS (
  SELECT api_key_id, unit * delivered AS spent FROM step_video
  UNION ALL
  SELECT api_key_id, characters * 150 FROM step_speech WHERE status = 'delivered'
), per_key AS (
  UPDATE api_keys k SET spent_micro_eur = k.spent_micro_eur + t.spent
    FROM (SELECT api_key_id, sum(spent) AS spent FROM net GROUP BY 1) t WHERE k.id = t.api_key_id
)
UPDATE workspaces SET balance_micro_eur = balance_micro_eur - (SELECT sum(spent) FROM net) WHERE id = $1
RETURNING (SELECT sum(spent) FROM net)::bigint AS net_micro_eur`;

/**
 * The bench's own server, before millions of rows are written: checkpoints no more often than every
 * 32 GB of WAL or hour (at the default 1 GB, every first change of a page after a checkpoint writes the
 * whole page to the WAL, and the random keys of the steps' index inserts touch a new page almost every
 * time: the WAL, not the rows, bounded the writing). Both settings apply on reload, to the whole server,
 * which is the bench run's and is stopped after it.
 */
export async function settingsForBulkWrites(client: pg.Client): Promise<void> {
  await client.query("ALTER SYSTEM SET max_wal_size = '32GB'");
  await client.query("ALTER SYSTEM SET checkpoint_timeout = '1h'");
  await client.query('SELECT pg_reload_conf()');
}

const USAGE_TRIGGERS = [
  ['video_jobs', 'usage_video_jobs_insert'],
  ['speech_requests', 'usage_speech_requests_insert'],
] as const;

/**
 * Writes one step in one transaction on `client` (no statement timeout: a step of millions of rows takes
 * minutes). The workspace must hold enough credits for the step's charges.
 */
export async function writeUsageStep(client: pg.Client, spec: UsageStepSpec): Promise<UsageStepWritten> {
  const cat = catalogArrays();
  const requests = requestsFor(spec.entries);
  const countRollups = spec.compareWithTriggers !== true;
  await client.query('BEGIN');
  try {
    // wal_compression: the full pages still written to the WAL (one per checkpoint and page) take a fraction of the space.
    await client.query("SET LOCAL statement_timeout = 0; SET LOCAL work_mem = '256MB'; SET LOCAL wal_compression = on");
    // Inside the transaction: the triggers are off for this step's rows only, on for every other writer after it.
    if (countRollups) for (const [table, trigger] of USAGE_TRIGGERS) await client.query(`ALTER TABLE ${table} DISABLE TRIGGER ${trigger}`);
    const draw = (models: string[]) => [requests, spec.apiKeyIds, models, spec.from_ms, spec.span_ms];
    await client.query(DRAW_VIDEO_SQL, draw(cat.videoModels));
    await client.query(DRAW_SPEECH_SQL, draw(cat.speechModels));
    await client.query(VIDEO_ROWS_SQL, [spec.workspaceId, cat.videoModels, cat.videoBackends]);
    await client.query(SPEECH_ROWS_SQL, [spec.workspaceId, cat.speechModels, cat.speechProviders]);
    const entries = (await client.query(ENTRIES_SQL, [spec.workspaceId])).rowCount ?? 0;
    let compared: UsageStepWritten['compared'];
    if (countRollups) {
      await client.query(ROLLUPS_SQL);
      await client.query(DAILY_ROLLUPS_SQL);
      await client.query(MODEL_ROLLUPS_SQL);
      for (const [table, trigger] of USAGE_TRIGGERS) await client.query(`ALTER TABLE ${table} ENABLE TRIGGER ${trigger}`);
    } else {
      compared = (await client.query<{ groups: number; differing: number }>(COMPARE_SQL, [spec.workspaceId])).rows[0]!;
    }
    const moved = await client.query<{ net_micro_eur: string }>(ACCOUNTS_SQL, [spec.workspaceId]);
    await client.query('COMMIT');
    return { requests, entries, net_micro_eur: Number(moved.rows[0]!.net_micro_eur), ...(compared ? { compared } : {}) };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
