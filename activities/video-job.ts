// Activities of the video job workflow: the ledger, the provider and storage. Each is idempotent, so
// Temporal may retry any of them after a crash without double charging, submitting or storing.
// Metrics count only real ledger changes (never an idempotent replay); logs carry job_id and workspace_id.
// The job's steps with the provider and storage live in src/video-jobs/ (submission, outputs, cancellation);
// this module binds them, and the charge and settlement, to the worker's dependencies.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import {
  creditsCharged,
  creditsRefunded,
  errorCodeLabel,
  videoJobsRefunded,
  videoJobsSettled,
  videoJobsSettledByBackend,
} from '../src/metrics.js';
import * as billing from '../src/video-jobs/billing.js';
import {
  type AcceptanceDecision,
  type ChargeResult,
  type Settlement,
  type SettlementResult,
  type VideoJobCharge,
} from '../src/video-jobs/billing.js';
import { estimateCostMicroEur, findVideoModel } from '../src/models/catalog.js';
import { type CancelAnswer } from '../src/providers/video/types.js';
import type { StoredVideo } from '../workflows/messages.js';
import { dispatchAlertWebhooks, dispatchJobWebhooks } from '../src/webhooks/dispatch.js';
import { Semaphore } from '../src/semaphore.js';
import { CONCURRENT_OUTPUT_COPIES_MAX, WAITING_OUTPUT_COPIES_MAX, type VideoJobActivityDeps } from '../src/video-jobs/job-steps.js';
import { submitVideoJob, type SubmitInput } from '../src/video-jobs/submission.js';
import { copyVideoOutputs, type CopyOutputsInput } from '../src/video-jobs/outputs.js';
import {
  cancelUnwatched,
  cancelVideoOperation,
  UNWATCHED_OPERATION_CODES,
  type CancelOperationInput,
} from '../src/video-jobs/cancellation.js';

/** What a job's logs and metrics are labelled with. */
interface JobLabels {
  workspace_id: string;
  model: string;
  backend: string | null;
}

/** Counts a settlement in the metrics (once: a retry that finds the job settled counts nothing) and logs it. */
function reportSettlement(logger: Logger, settlement: Settlement, result: SettlementResult, job: JobLabels | undefined): void {
  const error_code = result.status === 'failed' ? (result.error?.code ?? 'no_videos') : null;
  if (!result.already_settled) {
    videoJobsSettled.inc({ outcome: result.status, error_code: errorCodeLabel(error_code) });
    const by = { model: job?.model ?? 'unknown', backend: job?.backend ?? 'none' };
    videoJobsSettledByBackend.inc({ outcome: result.status, ...by });
    if (result.refunded_micro_eur > 0) {
      creditsRefunded.inc({ kind: 'video' }, result.refunded_micro_eur);
      videoJobsRefunded.inc(by);
    }
  }
  logger.info(
    {
      job_id: settlement.jobId,
      workspace_id: job?.workspace_id,
      outcome: result.status,
      error_code,
      delivered: settlement.outcome === 'succeeded' ? settlement.delivered : 0,
      cost_micro_eur: result.cost_micro_eur,
      refunded_micro_eur: result.refunded_micro_eur,
      already_settled: result.already_settled,
    },
    'video job settled',
  );
}

/** The job's workspace, for logs only: a failed lookup never fails the activity. */
async function jobOf(db: Db, jobId: string): Promise<JobLabels | undefined> {
  try {
    const r = await db.query<JobLabels>('SELECT workspace_id, model, backend FROM video_jobs WHERE id = $1', [jobId]);
    return r.rows[0];
  } catch {
    return undefined;
  }
}

/** The job's price from this worker's catalog (never from the request); a different estimate is logged. */
function catalogPrice(deps: VideoJobActivityDeps, job: VideoJobCharge): number {
  const model = findVideoModel(job.model);
  if (!model)
    throw ApplicationFailure.create({
      type: 'UnknownModel',
      message: `model ${job.model} is not in this worker's catalog`,
      nonRetryable: true,
    });
  const priced = estimateCostMicroEur(model, job.params, { generateAudio: job.generateAudio });
  if (priced !== job.estimated_cost_micro_eur) {
    deps.logger.warn(
      { job_id: job.jobId, requested_micro_eur: job.estimated_cost_micro_eur, catalog_micro_eur: priced },
      'video job estimate differs from the catalog; charging the catalog price',
    );
  }
  return priced;
}

/**
 * Starts the deliveries of budget alerts the charge of a job may have recorded (balance.low,
 * api_key.spend_threshold), without holding up the create's answer; one that cannot be started now is
 * started by the reconciler.
 */
function dispatchAlertsAfterCharge(deps: VideoJobActivityDeps, workspaceId: string): void {
  if (!deps.webhookEvents) return;
  const { client, info } = Context.current();
  const dispatch = { client, db: deps.db, taskQueue: info.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms };
  dispatchAlertWebhooks(dispatch, workspaceId).catch((err: Error) =>
    deps.logger.warn({ workspace_id: workspaceId, err: err.message }, 'budget alert deliveries not started; the reconciler starts them'),
  );
}

/** Prices the job from the catalog (never from the request) and charges it; see billing's chargeVideoJob. */
async function chargeVideoJob(deps: VideoJobActivityDeps, job: VideoJobCharge): Promise<ChargeResult> {
  const priced = catalogPrice(deps, job);
  const result = await billing.chargeVideoJob(deps.db, { ...job, estimated_cost_micro_eur: priced });
  const fields = {
    job_id: job.jobId,
    attempt_id: job.attemptId,
    workspace_id: job.workspaceId,
    model: job.model,
    estimated_cost_micro_eur: priced,
  };
  if (!result.ok) {
    deps.logger.info({ ...fields, reason: result.reason }, 'video job not accepted; nothing charged');
  } else {
    if (!result.already_charged) {
      creditsCharged.inc({ kind: 'video' }, priced);
      dispatchAlertsAfterCharge(deps, job.workspaceId);
    }
    deps.logger.info(
      { ...fields, balance_micro_eur: result.balance_micro_eur, already_charged: result.already_charged },
      'video job charged',
    );
  }
  return result;
}

/** An attempt whose charge outcome is unknown. */
interface AcceptanceQuestion {
  jobId: string;
  attemptId: string;
  workspaceId: string;
  fingerprint: string;
}

/** Decides an attempt whose charge outcome is unknown: charged, or refused for good. */
async function decideVideoJobAcceptance(deps: VideoJobActivityDeps, a: AcceptanceQuestion): Promise<AcceptanceDecision> {
  const decision = await billing.decideAcceptance(deps.db, a);
  deps.logger.info(
    { job_id: a.jobId, attempt_id: a.attemptId, workspace_id: a.workspaceId, decision: decision.decision },
    'video job acceptance decided after its charge step failed',
  );
  return decision;
}

/**
 * Keeps the charge for what was delivered and refunds the rest, once (its poll row goes with it); then
 * starts the job's recorded webhook deliveries (idempotent: a retry after the commit settles nothing
 * twice and dispatches again).
 */
async function settleVideoJob(deps: VideoJobActivityDeps, settlement: Settlement): Promise<SettlementResult> {
  const result = await billing.settleVideoJob(deps.db, settlement, deps.webhookEvents?.context);
  if (settlement.outcome === 'failed' && UNWATCHED_OPERATION_CODES.has(settlement.error?.code ?? ''))
    await cancelUnwatched(deps, settlement.jobId);
  if (deps.webhookEvents) {
    const { client, info } = Context.current();
    await dispatchJobWebhooks(
      { client, db: deps.db, taskQueue: info.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms },
      settlement.jobId,
    );
  }
  reportSettlement(deps.logger, settlement, result, await jobOf(deps.db, settlement.jobId));
  return result;
}

/** The activities of the video job workflow, bound to this process's dependencies (one output-copy limit per process). */
export type { VideoJobActivityDeps };

export function createVideoJobActivities(deps: VideoJobActivityDeps) {
  const outputCopies = new Semaphore(CONCURRENT_OUTPUT_COPIES_MAX, WAITING_OUTPUT_COPIES_MAX);
  return {
    chargeVideoJob: (job: VideoJobCharge): Promise<ChargeResult> => chargeVideoJob(deps, job),
    decideVideoJobAcceptance: (a: AcceptanceQuestion): Promise<AcceptanceDecision> => decideVideoJobAcceptance(deps, a),
    settleVideoJob: (settlement: Settlement): Promise<SettlementResult> => settleVideoJob(deps, settlement),
    submitVideoJob: (input: SubmitInput): Promise<{ operation_id: string; backend: string }> => submitVideoJob(deps, input),
    copyVideoOutputs: (input: CopyOutputsInput): Promise<{ videos: StoredVideo[]; failed: number }> =>
      copyVideoOutputs(deps, outputCopies, input),
    cancelVideoOperation: (input: CancelOperationInput): Promise<CancelAnswer> => cancelVideoOperation(deps, input),
  };
}

export type VideoJobActivities = ReturnType<typeof createVideoJobActivities>;
