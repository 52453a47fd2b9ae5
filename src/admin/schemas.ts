// The admin API's schemas: workspaces, credits and API keys as an operator makes them, a job as an
// operator sees it, and the ledger audit.
import { z } from 'zod';
import { Euros, Uuid } from '../http/schemas.js';
import { VideoJob } from '../video-jobs/schemas.js';
import { text } from '../zod-text.js';

// Euros as JSON numbers: a binary float cannot say "at most 6 decimal places" (and JSON Schema's
// multipleOf is inexact for floats), so amounts are bounded and rounded to the nearest micro-euro.
const EUROS_ROUNDED = 'Euros, rounded to the nearest micro-euro (6 decimal places).';
export const CreateWorkspaceBody = z
  .object({
    name: text({ chars_max: 200, notBlank: true })
      .trim()
      .describe('Not blank; at most 200 characters; leading and trailing white space is removed.'),
    credits_in_euro: z.number().min(0).max(1_000_000).optional().describe(`Starting credits. ${EUROS_ROUNDED}`),
  })
  .strict();
export const AddCreditsBody = z.object({ amount_in_euro: z.number().min(0.000001).max(1_000_000).describe(EUROS_ROUNDED) }).strict();
export const CreateApiKeyBody = z
  .object({
    models: z.array(z.string().min(1).max(100)).min(1).max(100).optional(),
    spend_limit_in_euro: z
      .number()
      .finite()
      .min(0)
      .max(1_000_000)
      .optional()
      .describe(`Most the key's jobs and speech together may charge, net of refunds; absent = no limit. ${EUROS_ROUNDED}`),
  })
  .strict();
export const SetWorkspaceLimitsBody = z
  .object({
    max_pending_jobs: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .nullable()
      .describe(
        "Video jobs the workspace may have pending at once (beyond: 429 too_many_pending_jobs, nothing charged); null = the service's default.",
      ),
  })
  .strict();

/** An operator's view of a job: its record (what GET answers) beside its workflow's answer to the jobState query. */
export const AdminVideoJob = z.strictObject({
  id: Uuid,
  object: z.literal('admin.video_job'),
  record: VideoJob.describe('The job as GET /v2/videos/generations/{id} answers it: its record.'),
  workflow: z
    .strictObject({
      status: z
        .string()
        .nullable()
        .describe("The workflow's own status (charging, pending, succeeded, failed, or a refusal); null when it did not answer."),
      state: VideoJob.nullable().describe(
        "The workflow's answer to the jobState query, presented like the record; null when it did not answer.",
      ),
      failure: z
        .string()
        .nullable()
        .describe('Why the workflow did not answer (closed past retention, no worker, timed out); null when it did.'),
    })
    .describe("The job's workflow, queried now."),
});

export const Workspace = z.strictObject({
  id: Uuid,
  object: z.literal('workspace'),
  name: z.string(),
  balance_in_euro: Euros,
  max_pending_jobs: z
    .number()
    .int()
    .nullable()
    .describe("Video jobs the workspace may have pending at once; null = the service's default (MAX_PENDING_JOBS_PER_WORKSPACE)."),
});
export const WorkspaceCredits = z.strictObject({
  id: Uuid,
  object: z.literal('workspace'),
  balance_in_euro: Euros.describe('The balance after the top-up.'),
  topup_id: Uuid.describe('The same for a retry with the same Idempotency-Key.'),
});
export const ApiKey = z.strictObject({
  id: Uuid,
  object: z.literal('api_key'),
  key: z.string().describe('The bearer key; shown this once only.'),
  models: z.array(z.string()).nullable().describe('The models the key may use; null = all.'),
  spend_limit_in_euro: Euros.nullable().describe("Most the key's jobs and speech may charge, net of refunds; null = no limit."),
});
const MicroEuros = z.int();
export const LedgerAudit = z
  .strictObject({
    ok: z.boolean(),
    workspaces_checked: z.int().nonnegative(),
    jobs_checked: z.int().nonnegative(),
    ledger_entries: z.int().nonnegative(),
    balance_mismatches: z.array(z.strictObject({ workspace_id: Uuid, balance_micro_eur: MicroEuros, ledger_sum_micro_eur: MicroEuros })),
    job_mismatches: z.array(
      z.strictObject({
        job_id: Uuid,
        status: z.string(),
        expected_net_charge_micro_eur: MicroEuros,
        ledger_net_charge_micro_eur: MicroEuros,
      }),
    ),
    hold_mismatches: z.array(z.strictObject({ workspace_id: Uuid, held_micro_eur: MicroEuros, holds_sum_micro_eur: MicroEuros })),
    key_spend_mismatches: z.array(z.strictObject({ api_key_id: Uuid, spent_micro_eur: MicroEuros, charged_micro_eur: MicroEuros })),
    speech_requests_checked: z.int().nonnegative(),
    speech_mismatches: z.array(
      z.strictObject({ speech_request_id: Uuid, cost_micro_eur: MicroEuros, ledger_net_charge_micro_eur: MicroEuros }),
    ),
    stale_speech_holds: z
      .array(z.strictObject({ speech_request_id: Uuid, held_since: z.string() }))
      .describe(
        'Speech requests still holding credits long after the hold should have been released (the reconciler releases them within two intervals).',
      ),
    topups_checked: z.int().nonnegative(),
    topup_mismatches: z
      .array(z.strictObject({ topup_id: Uuid, amount_micro_eur: MicroEuros, ledger_sum_micro_eur: MicroEuros, entries: z.int() }))
      .describe(
        'Top-ups that are not exactly one ledger entry of their workspace and amount (entries -1: a top-up entry naming no top-up of its workspace).',
      ),
    stripe_objects_checked: z.int().nonnegative().describe('Stripe payments, refunds and disputes handled (src/payments/).'),
    owed_mismatches: z
      .array(z.strictObject({ workspace_id: Uuid, owed_micro_eur: MicroEuros, ledger_owed_micro_eur: MicroEuros }))
      .describe('Workspaces whose amount owed differs from what their ledger entries added to it and paid of it.'),
    stripe_mismatches: z
      .array(
        z.strictObject({
          stripe_id: z.string(),
          action: z.string(),
          amount_micro_eur: MicroEuros,
          ledger_micro_eur: MicroEuros,
          entries: z.int(),
        }),
      )
      .describe(
        'Stripe objects handled that are not exactly one ledger entry of their workspace and amount (entries -1: a credit or debit entry of no object).',
      ),
    owed: z
      .array(z.strictObject({ workspace_id: Uuid, owed_micro_eur: MicroEuros }))
      .describe('What workspaces owe (refunds and disputes of credits already spent; not a mismatch), largest first, at most 100.'),
    owed_micro_eur_total: MicroEuros.describe('What all workspaces owe together.'),
    pending_jobs_checked: z.int().nonnegative().describe('Pending jobs whose workflow was looked up in Temporal.'),
    unaccounted_jobs: z
      .array(
        z.strictObject({
          job_id: Uuid,
          reason: z.enum(['workflow_not_running', 'past_deadline', 'charged_after_refusal']),
          detail: z.string(),
        }),
      )
      .describe(
        'Charged jobs nothing will settle: a pending job whose workflow is not running, one pending long past ' +
          'its deadline, a charge for a refused attempt. The reconciler settles the first kind within two ' +
          'intervals.',
      ),
    usage_ledger_mismatches: z
      .array(
        z.strictObject({
          workspace_id: Uuid,
          rollups_micro_eur: z.array(MicroEuros).length(3),
          ledger_micro_eur: z.array(MicroEuros).length(3),
        }),
      )
      .describe("Workspaces whose usage (charged, refunded, cost) differs from the ledger's (cost: what it kept net of pending jobs)."),
    usage_rows_checked: z.int().nonnegative(),
    usage_row_mismatches: z
      .array(
        z.strictObject({
          workspace_id: Uuid,
          hour: z.string(),
          kind: z.string(),
          model: z.string().nullable(),
          api_key_id: Uuid.nullable(),
          backend: z.string().nullable(),
          rollup: z.array(z.int()),
          expected: z.array(z.int()),
        }),
      )
      .describe(
        'Usage rows whose counters (requests, succeeded, failed, pending, charged, refunded, cost, videos, video_seconds, characters) ' +
          'differ from those of the requests created in their hour.',
      ),
    usage_daily_mismatches: z
      .array(
        z.strictObject({
          workspace_id: Uuid,
          day: z.string(),
          kind: z.string(),
          model: z.string().nullable(),
          api_key_id: Uuid.nullable(),
          backend: z.string().nullable(),
          daily: z.array(z.int()),
          hourly: z.array(z.int()),
        }),
      )
      .describe(
        'Daily usage rows whose counters differ from the sums of the hourly rows of their day with the same workspace, kind, model, key and backend.',
      ),
    usage_model_mismatches: z
      .array(
        z.strictObject({
          workspace_id: Uuid,
          day: z.string(),
          model: z.string().nullable(),
          by_model: z.array(z.int()),
          daily: z.array(z.int()),
        }),
      )
      .describe("Daily usage rows by model whose counters differ from the sums of their day's daily rows of that workspace and model."),
    batches_checked: z.int().nonnegative(),
    batch_mismatches: z
      .array(
        z.strictObject({
          batch_id: Uuid,
          status: z.string(),
          reserved_micro_eur: MicroEuros,
          requests_micro_eur: MicroEuros,
          released_micro_eur: MicroEuros,
          remaining_micro_eur: MicroEuros,
          ledger_charged_micro_eur: MicroEuros,
          ledger_refunded_micro_eur: MicroEuros,
        }),
      )
      .describe(
        "Batches whose reservation is not their requests' net charges + released + remaining, whose ledger entries are not " +
          'the reservation and the releases, or that ended with part of the reservation neither used nor released.',
      ),
  })
  .describe(
    'ok: every balance equals the sum of its ledger entries, every speech hold is backed by a request in ' +
      "flight, every API key's spend is what its requests charged net of refunds, every job and speech " +
      'charge matches its cost, and no charged job is unaccounted for (at most 100 of each kind listed).',
  );
export const ApiKeyRevoked = z.strictObject({ id: Uuid, object: z.literal('api_key'), revoked: z.literal(true) });

export const RESPONSE_COMPONENTS = { Workspace, WorkspaceCredits, ApiKey, LedgerAudit, ApiKeyRevoked } satisfies Record<string, z.ZodType>;
