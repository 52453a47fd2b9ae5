// Activities of the video job workflow: the ledger, the provider and storage. Each is idempotent,
// so Temporal may retry any of them after a crash without double charging or double storing.
// Metrics count only real ledger changes (never an idempotent replay); logs carry job_id and workspace_id.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import { creditsCharged, creditsRefunded, errorCodeLabel, videoJobsSettled, videoProviderPollDuration } from '../src/metrics.js';
import { chargeVideoJob, settleVideoJob, type ChargeResult, type Settlement, type SettlementResult, type VideoJobCharge } from '../src/billing/ledger.js';
import { ProviderError, MAX_VIDEO_OUTPUT_BYTES, type VideoGenerationRequest, type VideoOperationStatus, type VideoOutputRef, type VideoProvider } from '../src/providers/video/types.js';
import type { Storage } from '../src/storage/local.js';
import { videoJobWorkflowId, type StoredVideo } from '../workflows/messages.js';
import type { JobEventContext } from '../src/webhooks/events.js';
import { dispatchJobWebhooks } from '../src/webhooks/dispatch.js';

export interface VideoJobActivityDeps {
  db: Db;
  storage: Storage;
  videoProviders: ReadonlyMap<string, VideoProvider>;
  logger: Logger;
  /** Webhooks (issue 10): how events present the job, and the first retry interval of deliveries. */
  webhookEvents?: { context: JobEventContext; retry_initial_ms: number };
}

/** The job id of the running activity's workflow (`video-job-<job id>`), for logs. */
function currentJobId(): string | undefined {
  try {
    const workflowId = Context.current().info.workflowExecution?.workflowId ?? '';
    const prefix = videoJobWorkflowId('');
    return workflowId.startsWith(prefix) ? workflowId.slice(prefix.length) : undefined;
  } catch {
    return undefined;
  }
}

/** Longest provider Retry-After honoured (the provider activities' retry policy caps its own backoff at 30 s). */
const MAX_RETRY_AFTER_MS = 60_000;

/**
 * What a job's error tells the customer about a provider call that failed. The provider's own text is
 * kept only where it is about the customer's request (a prompt the provider refuses); every other
 * failure (our credentials, our project's resources, transport errors, a bug) is described in general
 * terms, and the provider's text goes to the operator's log only: it can name our cloud project,
 * bucket or operation ids.
 */
const CUSTOMER_VISIBLE_CODES = new Set(['invalid_request']);
const GENERIC_MESSAGES: Record<string, string> = {
  provider_unauthenticated: "the video provider refused the service's credentials; the operator has been alerted",
  provider_permission_denied: "the video provider refused the service's credentials; the operator has been alerted",
};

function toFailure(err: unknown, logger?: Logger): unknown {
  const job_id = currentJobId();
  if (err instanceof ProviderError) {
    const visible = CUSTOMER_VISIBLE_CODES.has(err.opts.code);
    if (!visible) logger?.warn({ job_id, code: err.opts.code, retryable: err.opts.retryable, provider_message: err.message }, 'video provider call failed');
    return ApplicationFailure.create({
      type: 'ProviderError',
      message: visible ? err.message : (GENERIC_MESSAGES[err.opts.code] ?? `the video provider call failed (${err.opts.code})`),
      nonRetryable: !err.opts.retryable,
      details: [{ code: err.opts.code }],
      // The provider's Retry-After replaces the policy's backoff for the next attempt, capped so a
      // far-off date cannot park the job.
      ...(err.opts.retryable && err.opts.retry_after_ms !== undefined
        ? { nextRetryDelay: Math.min(Math.max(err.opts.retry_after_ms, 1_000), MAX_RETRY_AFTER_MS) }
        : {}),
    });
  }
  if (err instanceof ApplicationFailure) return err;
  // Anything else (a bug, a database error in an adapter): retried, and described in general terms.
  logger?.error({ job_id, err }, 'video provider activity failed');
  return ApplicationFailure.create({ type: 'ProviderError', message: 'the video provider call failed (internal_error)', details: [{ code: 'internal_error' }] });
}

/** Heartbeats every few seconds while `work` runs, so a long download or upload is not taken for a dead worker. */
async function withHeartbeat<T>(detail: unknown, work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  ctx.heartbeat(detail);
  const timer = setInterval(() => ctx.heartbeat(detail), HEARTBEAT_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
const HEARTBEAT_EVERY_MS = 5_000;

export function createVideoJobActivities(deps: VideoJobActivityDeps) {
  const providerFor = (backend: string): VideoProvider => {
    const p = deps.videoProviders.get(backend);
    if (!p) {
      throw ApplicationFailure.create({ type: 'ProviderError', message: `video backend "${backend}" is not configured`, nonRetryable: true, details: [{ code: 'provider_not_configured' }] });
    }
    return p;
  };

  /** The job's workspace, for logs only: a failed lookup never fails the activity. */
  const workspaceOf = async (jobId: string): Promise<string | undefined> => {
    try {
      const r = await deps.db.query<{ workspace_id: string }>('SELECT workspace_id FROM video_jobs WHERE id = $1', [jobId]);
      return r.rows[0]?.workspace_id;
    } catch {
      return undefined;
    }
  };

  return {
    async chargeVideoJob(job: VideoJobCharge): Promise<ChargeResult> {
      const result = await chargeVideoJob(deps.db, job);
      const fields = { job_id: job.jobId, workspace_id: job.workspaceId, model: job.model, estimated_cost_micro_eur: job.estimated_cost_micro_eur };
      if (!result.ok) {
        deps.logger.info({ ...fields, balance_micro_eur: result.balance_micro_eur }, 'video job rejected: insufficient credits');
      } else {
        if (!result.already_charged) creditsCharged.inc({ kind: 'video' }, job.estimated_cost_micro_eur);
        deps.logger.info({ ...fields, balance_micro_eur: result.balance_micro_eur, already_charged: result.already_charged }, 'video job charged');
      }
      return result;
    },

    async settleVideoJob(settlement: Settlement): Promise<SettlementResult> {
      const result = await settleVideoJob(deps.db, settlement, deps.webhookEvents?.context);
      // Webhooks (issue 10): start the job's recorded deliveries after the commit (idempotent; a
      // failure retries this activity, whose settlement is then a no-op, and dispatches again).
      if (deps.webhookEvents) {
        const { client, info } = Context.current();
        await dispatchJobWebhooks({ client, db: deps.db, taskQueue: info.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms }, settlement.jobId);
      }
      const error_code = result.status === 'failed' ? (settlement.error?.code ?? 'no_videos') : null;
      if (!result.already_settled) {
        videoJobsSettled.inc({ outcome: result.status, error_code: errorCodeLabel(error_code) });
        if (result.refunded_micro_eur > 0) creditsRefunded.inc({ kind: 'video' }, result.refunded_micro_eur);
      }
      deps.logger.info(
        {
          job_id: settlement.jobId,
          workspace_id: await workspaceOf(settlement.jobId),
          outcome: result.status,
          error_code,
          delivered: settlement.outcome === 'succeeded' ? settlement.delivered : 0,
          cost_micro_eur: result.cost_micro_eur,
          refunded_micro_eur: result.refunded_micro_eur,
          already_settled: result.already_settled,
        },
        'video job settled',
      );
      return result;
    },

    async submitVideoGeneration(input: { backend: string; request: VideoGenerationRequest }): Promise<{ operation_id: string }> {
      const job_id = input.request.request_id;
      try {
        const submitted = await providerFor(input.backend).submit(input.request);
        deps.logger.info({ job_id, workspace_id: await workspaceOf(job_id), backend: input.backend, model: input.request.model, operation_id: submitted.operation_id }, 'video job submitted');
        return submitted;
      } catch (err) {
        deps.logger.warn({ job_id, backend: input.backend, err_message: (err as Error)?.message }, 'video job submit failed');
        throw toFailure(err, deps.logger);
      }
    },

    async pollVideoGeneration(input: { backend: string; operation_id: string }): Promise<VideoOperationStatus> {
      const started = process.hrtime.bigint();
      const observe = (result: string) => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        videoProviderPollDuration.observe({ backend: input.backend, result }, seconds);
        deps.logger.debug({ job_id: currentJobId(), backend: input.backend, operation_id: input.operation_id, result, duration_ms: seconds * 1000 }, 'video provider polled');
      };
      try {
        const status = await providerFor(input.backend).poll(input.operation_id);
        observe(status.state);
        return status;
      } catch (err) {
        observe('error');
        throw toFailure(err, deps.logger);
      }
    },

    /** Copies each output into our storage under a key derived from the job: a retry overwrites, never duplicates. */
    async storeVideoOutputs(input: { backend: string; job_id: string; operation_id: string; outputs: VideoOutputRef[] }): Promise<StoredVideo[]> {
      const provider = providerFor(input.backend);
      const stored: StoredVideo[] = [];
      for (const [i, output] of input.outputs.entries()) {
        let body: Buffer;
        try {
          body = await withHeartbeat(i, () => provider.fetchOutput(input.operation_id, output));
        } catch (err) {
          throw toFailure(err, deps.logger);
        }
        if (body.length === 0 || body.length > MAX_VIDEO_OUTPUT_BYTES) {
          throw ApplicationFailure.create({ type: 'ProviderError', message: `output ${i} has ${body.length} bytes`, nonRetryable: true, details: [{ code: 'invalid_output' }] });
        }
        const storage_key = `videos/${input.job_id}/${i}.mp4`;
        await withHeartbeat(i, () => deps.storage.put(storage_key, body, output.content_type));
        stored.push({ storage_key, content_type: output.content_type, bytes: body.length });
      }
      return stored;
    },
  };
}

export type VideoJobActivities = ReturnType<typeof createVideoJobActivities>;
