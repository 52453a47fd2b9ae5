// Usage's schemas: the query of GET /v2/usage and GET /admin/v1/usage, and the report they answer.
import { z } from 'zod';
import { Euros, UnixSeconds, Uuid } from '../http/schemas.js';

export const USAGE_BUCKETS = ['hour', 'day', 'month'] as const;
export type UsageBucket = (typeof USAGE_BUCKETS)[number];
export const USAGE_GROUPS = ['model', 'api_key', 'kind', 'backend'] as const;
export const ADMIN_USAGE_GROUPS = [...USAGE_GROUPS, 'workspace'] as const;
export type UsageGroup = (typeof ADMIN_USAGE_GROUPS)[number];
export const USAGE_KINDS = ['video', 'speech', 'voice_clone'] as const;

const DAY_S = 86_400;
/** The longest range each bucket takes (end - start, seconds): 31 days by hour, 400 days by day, 10 years by month. */
export const USAGE_RANGE_MAX_S: Record<UsageBucket, number> = { hour: 31 * DAY_S, day: 400 * DAY_S, month: 3653 * DAY_S };
/** The range when `start` is absent: the 30 days before `end`. */
export const USAGE_DEFAULT_RANGE_S = 30 * DAY_S;
/** Most rows one answer holds; a query that would give more is a 400 (narrow the range, a larger bucket, fewer groups). */
export const USAGE_ROWS_MAX = 10_000;
/** 9999-12-31T23:59:59Z: the latest time taken. */
const UNIX_SECONDS_MAX = 253_402_300_799;

const unixSecondsParam = (what: string) =>
  z
    .string()
    .regex(/^[0-9]{1,12}$/, 'must be Unix seconds (a non-negative integer)')
    .transform(Number)
    .refine((s) => s <= UNIX_SECONDS_MAX, 'must be before the year 10000')
    .optional()
    .describe(what);

const groupByParam = (allowed: readonly UsageGroup[]) =>
  z
    .string()
    .max(200)
    .transform((text, ctx) => {
      const fields = text === '' ? [] : text.split(',');
      for (const f of fields) {
        if (!(allowed as readonly string[]).includes(f)) {
          ctx.addIssue({ code: 'custom', message: `unknown group \`${f}\`: a comma list of ${allowed.join(', ')}` });
          return z.NEVER;
        }
      }
      if (new Set(fields).size !== fields.length) {
        ctx.addIssue({ code: 'custom', message: 'a group is named twice' });
        return z.NEVER;
      }
      return fields as UsageGroup[];
    })
    .optional()
    .describe(`A comma list of ${allowed.join(', ')}: a row per bucket and each combination of these. Absent: one row per bucket.`);

const usageQueryShape = (groups: readonly UsageGroup[]) => ({
  start: unixSecondsParam('Unix seconds; the bucket holding it is the first. Default: 30 days before `end`.'),
  end: unixSecondsParam('Unix seconds (excluded); the bucket holding the second before it is the last. Default: now.'),
  bucket: z.enum(USAGE_BUCKETS).default('day').describe('Each row covers one UTC hour, day or month.'),
  group_by: groupByParam(groups),
  format: z.enum(['json', 'csv']).optional().describe('`csv` answers the rows as CSV (as `Accept: text/csv` does).'),
});

export const UsageQuery = z.object(usageQueryShape(USAGE_GROUPS)).strict();
export const AdminUsageQuery = z
  .object({
    ...usageQueryShape(ADMIN_USAGE_GROUPS),
    workspace_id: Uuid.optional().describe('One workspace; absent: every workspace.'),
  })
  .strict();
export type UsageQuery = z.output<typeof UsageQuery>;
export type AdminUsageQuery = z.output<typeof AdminUsageQuery>;

const Count = z.int().nonnegative();
const counters = {
  requests: Count.describe('Requests accepted (created) in the bucket; refused ones are not requests.'),
  succeeded: Count.describe('Of those, ended succeeded (a shortfall included).'),
  failed: Count.describe('Of those, ended failed (cancelled and released included).'),
  pending: Count.describe('Of those, not finished yet.'),
  charged_in_euro: Euros.describe('Charged for them: the video jobs\u2019 estimates, the speech delivered.'),
  refunded_in_euro: Euros.describe('Refunded to them (what video jobs did not deliver).'),
  cost_in_euro: Euros.describe('What the finished ones cost: charged minus refunded, pending work excluded.'),
  videos: Count.describe('Videos delivered.'),
  video_seconds: Count.describe('Seconds of video delivered.'),
  characters: Count.describe('Characters of speech delivered.'),
};

export const UsageRow = z
  .strictObject({
    start: UnixSeconds.describe("The bucket's start (included), Unix seconds."),
    end: UnixSeconds.describe("The bucket's end (excluded), Unix seconds."),
    workspace_id: Uuid.optional().describe('With group_by=workspace (the operators\u2019 API).'),
    model: z.string().nullable().optional().describe('With group_by=model; null for voice clones.'),
    api_key_id: Uuid.nullable().optional().describe('With group_by=api_key.'),
    kind: z.enum(USAGE_KINDS).optional().describe('With group_by=kind.'),
    backend: z.string().nullable().optional().describe('With group_by=backend: the video backend that ran the job, the voice provider.'),
    ...counters,
  })
  .describe('The usage of one bucket and group.');
export const UsageTotal = z.strictObject(counters).describe('The sums of every row.');
export const Usage = z
  .strictObject({
    object: z.literal('usage'),
    start: UnixSeconds.describe('Start of the first bucket.'),
    end: UnixSeconds.describe('End of the last bucket.'),
    bucket: z.enum(USAGE_BUCKETS),
    data: z.array(UsageRow).describe('Bucket by bucket, then by group; buckets and groups without requests are left out.'),
    total: UsageTotal,
  })
  .describe('Requests, outcomes, what was produced and money, per bucket and group.');

export type UsageRow = z.output<typeof UsageRow>;
export type UsageTotal = z.output<typeof UsageTotal>;
export type Usage = z.output<typeof Usage>;

export const RESPONSE_COMPONENTS = { Usage, UsageRow, UsageTotal } satisfies Record<string, z.ZodType>;
