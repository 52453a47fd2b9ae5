// Reads of usage: sums of the rollups of settled requests (kept by the database in the transactions that
// move the money: src/db/migrations/021_usage_rollups.sql, hourly; 029_usage_daily_rollups.sql, daily;
// 033_usage_daily_model_rollups.sql, daily by model alone) per UTC hour, day or month and group, plus the
// requests still pending (jobs charged, speech held), counted from their own rows (few per workspace,
// indexed). A read by hour sums the hourly rows; one by day or month the daily rows by model when it
// groups by nothing but model (and workspace), else the daily rows. It touches at most one row per hour
// (or day) and rollup group of the range, never the ledger, so its cost follows the range and the groups
// asked for, not how many requests were made.
import { createHash } from 'node:crypto';
import type { Db } from '../db/pool.js';
import { invalidParam } from '../errors.js';
import { microEurToEur } from '../money.js';
import {
  USAGE_DEFAULT_RANGE_S,
  USAGE_RANGE_MAX_S,
  USAGE_ROWS_MAX,
  type UsageBucket,
  type UsageGroup,
  type Usage,
  type UsageRow,
  type UsageTotal,
} from './schemas.js';

export interface UsageRequest {
  /** One workspace, or null: every workspace (operators only). */
  workspaceId: string | null;
  start?: number | undefined;
  end?: number | undefined;
  bucket: UsageBucket;
  group_by?: UsageGroup[] | undefined;
}

/** The rollup's column of each group, in the order the groups are named. */
const GROUP_COLUMN: Record<UsageGroup, 'model' | 'api_key_id' | 'kind' | 'backend' | 'workspace_id'> = {
  model: 'model',
  api_key: 'api_key_id',
  kind: 'kind',
  backend: 'backend',
  workspace: 'workspace_id',
};

/** The counters of a rollup row, in the order reads and the audit list them. */
export const COUNTERS = [
  'requests',
  'succeeded',
  'failed',
  'pending',
  'charged_micro_eur',
  'refunded_micro_eur',
  'cost_micro_eur',
  'videos',
  'video_seconds',
  'characters',
] as const;

/** The start of the bucket holding `s` (Unix seconds, UTC). */
export function bucketStart(s: number, bucket: UsageBucket): number {
  if (bucket === 'hour') return s - (s % 3600);
  if (bucket === 'day') return s - (s % 86_400);
  const d = new Date(s * 1000);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) / 1000;
}

/** The end (excluded) of the bucket that starts at `start`. */
export function bucketEnd(start: number, bucket: UsageBucket): number {
  if (bucket === 'hour') return start + 3600;
  if (bucket === 'day') return start + 86_400;
  const d = new Date(start * 1000);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / 1000;
}

/** The range asked for, checked, as whole buckets: from the bucket holding `start` to the one holding `end - 1`. */
export function usageRange(q: Pick<UsageRequest, 'start' | 'end' | 'bucket'>, now_s: number): { start: number; end: number } {
  const end = q.end ?? now_s;
  const start = q.start ?? Math.max(0, end - USAGE_DEFAULT_RANGE_S);
  if (!(start < end)) throw invalidParam(q.start === undefined ? 'end' : 'start', '`start` must be before `end`');
  const max = USAGE_RANGE_MAX_S[q.bucket];
  if (end - start > max) {
    throw invalidParam(
      'start',
      `a range by ${q.bucket} spans at most ${max / 86_400} days; narrow it (start, end) or take a larger bucket`,
      'usage_range_too_long',
    );
  }
  return { start: bucketStart(start, q.bucket), end: bucketEnd(bucketStart(end - 1, q.bucket), q.bucket) };
}

/** The fields a rollup row is kept by (each group is one of them). */
const ROW_FIELDS = 'workspace_id, kind, model, api_key_id, backend';
/** The same fields from the daily rows by model, which keep no kind, key or backend. */
const MODEL_ROW_FIELDS = 'workspace_id, NULL::text AS kind, model, NULL::uuid AS api_key_id, NULL::text AS backend';
/** The groups the daily rows by model can answer. */
const MODEL_ROLLUP_GROUPS: ReadonlySet<UsageGroup> = new Set(['model', 'workspace']);

/** The rollup a read sums: its table, its time column and its fields (ROW_FIELDS' order). */
function rollupOf(bucket: UsageBucket, groups: readonly UsageGroup[]): { table: string; at: 'hour' | 'day'; fields: string } {
  if (bucket === 'hour') return { table: 'usage_rollups', at: 'hour', fields: ROW_FIELDS };
  // Whole days (and months) sum daily rows: a range by day or month starts and ends on a UTC day.
  if (groups.every((g) => MODEL_ROLLUP_GROUPS.has(g))) return { table: 'usage_daily_model_rollups', at: 'day', fields: MODEL_ROW_FIELDS };
  return { table: 'usage_daily_rollups', at: 'day', fields: ROW_FIELDS };
}

/** A row of the read's statement: its bucket's start, the grouped columns (text or null), the counters. */
type SqlRowValues = (number | string | null)[];

/** Statements with at most this many groups are prepared per connection (at most 26 orders of them per bucket). */
const PREPARED_GROUPS_MAX = 2;

/** The read's statement (also what `npm run bench` explains), its range and the grouped columns. */
export function usageQuery(q: UsageRequest, now_s: number) {
  const range = usageRange(q, now_s);
  const groups = q.group_by ?? [];
  const columns = groups.map((g) => GROUP_COLUMN[g]);
  const values: unknown[] = [q.bucket, range.start, range.end, USAGE_ROWS_MAX + 1];
  if (q.workspaceId !== null) values.push(q.workspaceId);
  const { table, at, fields } = rollupOf(q.bucket, groups);
  // Each row's bucket, computed before the sums: a rollup row of the bucket's own size is its bucket as it is
  // (date_trunc in a time zone, once per row, was most of the statement's time); pending rows are few.
  const rollupBucket = q.bucket === at ? at : `date_trunc($1, ${at}, 'UTC')`;
  // The sums are bigint_sum (032_bigint_sum.sql): sum(bigint) builds a numeric per group and counter.
  const inRange = (t: string) =>
    `${t} >= to_timestamp($2) AND ${t} < to_timestamp($3)${q.workspaceId !== null ? ' AND workspace_id = $5' : ''}`;
  const fromRow = (counts: string) => COUNTERS.map((c, i) => `${counts}[${i + 1}] AS ${c}`).join(', ');
  const text = `SELECT extract(epoch FROM at)::bigint AS bucket_start${columns.map((c) => `, ${c}`).join('')},
            ${COUNTERS.map((c) => `bigint_sum(${c}) AS ${c}`).join(', ')}
       FROM (SELECT ${rollupBucket} AS at, ${fields}, ${COUNTERS.join(', ')} FROM ${table} WHERE ${inRange(at)}
             UNION ALL
             SELECT date_trunc($1, created_at, 'UTC'), ${ROW_FIELDS}, ${fromRow('c')}
               FROM (SELECT j.*, 'video' AS kind, usage_video_job_counts(j) AS c FROM video_jobs j WHERE status = 'pending' AND ${inRange('created_at')}) j
             UNION ALL
             SELECT date_trunc($1, created_at, 'UTC'), ${ROW_FIELDS}, ${fromRow('c')}
               FROM (SELECT s.*, 'speech' AS kind, usage_speech_counts(s) AS c FROM speech_requests s WHERE status = 'held' AND ${inRange('created_at')}) s) u
      GROUP BY at${columns.map((c) => `, ${c}`).join('')}
     HAVING bigint_sum(requests) > 0
      ORDER BY at${columns.map((c) => `, ${c} NULLS FIRST`).join('')}
      LIMIT $4`;
  // Named, so each pooled connection plans it once; bounded: only the common reads (few groups) are kept.
  const name = groups.length <= PREPARED_GROUPS_MAX ? `usage_${createHash('sha1').update(text).digest('hex').slice(0, 20)}` : undefined;
  return { text, values, range, columns, name };
}

export async function readUsage(db: Db, q: UsageRequest, now_s = Math.floor(Date.now() / 1000)): Promise<Usage> {
  const { text, values, range, columns, name } = usageQuery(q, now_s);
  // Rows as arrays: [bucket start, the grouped columns, the counters in COUNTERS' order]. An answer is
  // up to USAGE_ROWS_MAX rows, and an object per row built only to be copied was most of its garbage.
  const r = await db.query<SqlRowValues>({ ...(name === undefined ? {} : { name }), text, values, rowMode: 'array' });
  if (r.rows.length > USAGE_ROWS_MAX) {
    throw invalidParam(
      'start',
      `more than ${USAGE_ROWS_MAX} rows: narrow the range (start, end), take a larger bucket or fewer group_by fields`,
      'usage_too_many_rows',
    );
  }
  const total = COUNTERS.map(() => 0);
  const first = 1 + columns.length;
  const data = r.rows.map((a) => {
    const start = a[0] as number;
    const row: Record<string, unknown> = { start, end: bucketEnd(start, q.bucket) };
    for (let i = 0; i < columns.length; i++) row[columns[i]!] = a[1 + i] ?? null;
    for (let i = 0; i < COUNTERS.length; i++) total[i]! += a[first + i] as number;
    return putCounts(row, a as number[], first) as UsageRow;
  });
  return { object: 'usage', start: range.start, end: range.end, bucket: q.bucket, data, total: putCounts({}, total, 0) };
}

/** Sets the counters `v[at..]` (COUNTERS' order, money in micro-euros) on `row` as the API names them, in place. */
function putCounts(row: Record<string, unknown>, v: readonly number[], at: number): UsageTotal {
  row['requests'] = v[at];
  row['succeeded'] = v[at + 1];
  row['failed'] = v[at + 2];
  row['pending'] = v[at + 3];
  row['charged_in_euro'] = microEurToEur(v[at + 4]!);
  row['refunded_in_euro'] = microEurToEur(v[at + 5]!);
  row['cost_in_euro'] = microEurToEur(v[at + 6]!);
  row['videos'] = v[at + 7];
  row['video_seconds'] = v[at + 8];
  row['characters'] = v[at + 9];
  return row as UsageTotal;
}

const CSV_COUNTERS = [
  'requests',
  'succeeded',
  'failed',
  'pending',
  'charged_in_euro',
  'refunded_in_euro',
  'cost_in_euro',
  'videos',
  'video_seconds',
  'characters',
] as const;

const csvField = (v: unknown): string => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

/** The rows as CSV: a header line, then per row `start,end`, the grouped fields in the order named, then the counters. */
export function usageCsv(usage: Usage, groups: readonly UsageGroup[]): string {
  const fields = ['start', 'end', ...groups.map((g) => GROUP_COLUMN[g]), ...CSV_COUNTERS];
  const lines = [fields.join(',')];
  for (const row of usage.data) lines.push(fields.map((f) => csvField((row as Record<string, unknown>)[f])).join(','));
  return lines.join('\r\n') + '\r\n';
}
