// The reconciler's work (workflows/reconciler.ts). Idempotent: running it twice, or on two workers,
// settles nothing twice (a restarted job's workflow id is the job's, and settlement is once per job).
//
// A pending job whose workflow is closed (an operator's terminate, a run that failed) or gone (deleted,
// a lost namespace) is restarted as a recovery run (src/video-jobs/recovery.ts).
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import { captureDeliveredSpeechHolds, releaseExpiredSpeechHolds, SPEECH_HOLD_TTL_MS } from '../src/voices/speech-billing.js';
import { runningVideoJobIds, videoJobWorkflowState } from '../src/temporal/workflow-states.js';
import { dispatchUndispatched } from '../src/webhooks/dispatch.js';
import { readVideoJob } from '../src/video-jobs/records.js';
import { restartVideoJob } from '../src/video-jobs/recovery.js';
import { restartLostBatches } from '../src/batches/recovery.js';
import { discardOrphanVideoJobInputs } from '../src/video-jobs/images.js';
import { startPendingVoiceDeletions } from '../src/voices/service.js';
import { expireSpeechAudio } from '../src/storage/retention.js';
import { sweepFinishedJobFiles } from '../src/video-jobs/retention.js';
import { sweepConsentRecordings } from '../src/voices/consents.js';
import type { Storage } from '../src/storage/local.js';
import { creditsCharged, reconcilerFindings, reconcilerRuns, reconcilerStepFailures } from '../src/metrics.js';

export interface ReconcilerActivityDeps {
  db: Db;
  logger: Logger;
  taskQueue: string;
  video: { pollIntervalMs: number; pollIntervalMsMax: number; jobTimeoutMs: number };
  /** Webhook deliveries: recorded but not started ones (a crash between commit and start) are started here. */
  webhookEvents?: { retry_initial_ms: number };
  /** Where outputs, speech audio and consent recordings are kept: files nobody lists are deleted, audio after its retention. */
  storage?: Storage;
  retention?: { speech_audio_ms: number };
}

export interface ReconcileReport {
  pending_checked: number;
  /** Pending jobs Temporal did not list as running, each then looked up on its own. */
  jobs_looked_up: number;
  jobs_restarted: string[];
  speech_holds_released: number;
  /** Holds of speech delivered whose capture had failed, captured. */
  speech_holds_captured: number;
  webhook_deliveries_started: number;
  /** Images of create attempts that did not charge their job (refused, superseded, or left by a crash), deleted. */
  orphan_inputs_deleted: number;
  /** Provider-side voice deletions started here (the API could not start them). */
  voice_deletions_started: number;
  /** Stored videos of finished jobs that the jobs do not list (a copy that finished after a cancel), deleted. */
  orphan_files_deleted: number;
  /** Speech audio past its retention, deleted. */
  speech_audio_expired: number;
  /** Consent recordings removed from storage: of deleted consents, and of uploads that never finished. */
  consent_recordings_removed: number;
  /** Batches whose workflow was not running while they were, given a recovery run. */
  batches_restarted?: string[];
}

const DELIVERIES_PER_RUN = 500;
/** Pending jobs read per page; a run pages through all of them, oldest first. */
export const PENDING_PAGE_SIZE = 500;
const HOLDS_PER_RUN = 500;
/** A delivered speech's hold is captured here once this old (its request retries the capture for less than this). */
const DELIVERED_HOLD_GRACE_MS = 60_000;
/** Images of attempts that did not charge their job are deleted once this old (an attempt is decided within minutes). */
const ORPHAN_INPUTS_MIN_AGE_MS = 60 * 60_000;
const ORPHAN_INPUTS_PER_RUN = 1_000;
/** A voice deleted this long ago whose provider deletion has not finished gets its workflow started (again). */
const VOICE_DELETION_GRACE_MS = 30_000;
const VOICE_DELETIONS_PER_RUN = 500;
/** A finished job's files are swept once it has been finished this long (longer than any copy attempt runs). */
const FILE_SWEEP_GRACE_MS = 15 * 60_000;
/** Consent recordings removed per run: those of deleted consents, and uploads that never finished (older than FILE_SWEEP_GRACE_MS). */
const CONSENT_RECORDINGS_PER_RUN = 500;
const FILE_SWEEP_JOBS_PER_RUN = 500;
const SPEECH_AUDIO_PER_RUN = 1_000;

/** Restarts one pending job whose workflow is not running (after a look of its own: visibility trails). */
async function reconcileJob(deps: ReconcilerActivityDeps, client: Client, id: string, restarted: string[]): Promise<void> {
  const state = await videoJobWorkflowState(client, id);
  const job = state === 'running' ? null : await readVideoJob(deps.db, id);
  const settings = { taskQueue: deps.taskQueue, job_timeout_ms: deps.video.jobTimeoutMs };
  if (job && job.status === 'pending' && (await restartVideoJob(client, job, settings))) {
    restarted.push(id);
    deps.logger.warn(
      { job_id: id, workspace_id: job.workspace_id, workflow: state, operation_id: job.operation_id },
      job.operation_id
        ? 'video job restarted: resuming its provider operation'
        : 'video job restarted: no provider operation known, refunding in full',
    );
  }
}

/** The ids of the job workflows Temporal lists as running; none when it cannot list them. */
async function listRunningJobs(deps: ReconcilerActivityDeps, ctx: Context): Promise<Set<string>> {
  ctx.heartbeat('listing running jobs');
  return runningVideoJobIds(ctx.client, deps.taskQueue, () => ctx.heartbeat('listing running jobs')).catch((err: Error) => {
    // A visibility store that cannot list (down, or slow past the listing's deadline) does not stop the
    // run: every pending job is then looked up on its own, as slowly as that is.
    deps.logger.warn(
      { err_message: err.message },
      'reconcile: Temporal could not list the running jobs; each pending job is looked up on its own',
    );
    return new Set<string>();
  });
}

/**
 * Restarts the pending jobs whose workflow is not running. The jobs pending since before Temporal listed
 * its running job workflows are read page by page (oldest first): one not listed is looked at on its own.
 * Temporal is asked once per run, not once per job.
 */
async function restartLostJobs(
  deps: ReconcilerActivityDeps,
  ctx: Context,
): Promise<Pick<ReconcileReport, 'pending_checked' | 'jobs_looked_up' | 'jobs_restarted'>> {
  const started = await deps.db.query<{ at: Date }>('SELECT clock_timestamp() AS at');
  const run_started = started.rows[0]!.at;
  const running = await listRunningJobs(deps, ctx);
  const restarted: string[] = [];
  let checked = 0;
  let looked_up = 0;
  let after: { created_at: Date; id: string } | null = null;
  for (;;) {
    const page: { rows: { id: string; created_at: Date }[] } = await deps.db.query<{ id: string; created_at: Date }>(
      `SELECT id, created_at FROM video_jobs
        WHERE status = 'pending' AND created_at < $1 AND ($2::timestamptz IS NULL OR (created_at, id) > ($2::timestamptz, $3::uuid))
        ORDER BY created_at, id LIMIT $4`,
      [run_started, after?.created_at ?? null, after?.id ?? null, PENDING_PAGE_SIZE],
    );
    if (page.rows.length === 0) break;
    checked += page.rows.length;
    after = page.rows.at(-1)!;
    ctx.heartbeat(after.id);
    for (const { id } of page.rows) {
      if (running.has(id)) continue;
      looked_up++;
      ctx.heartbeat(id);
      // One job that cannot be looked at or restarted now does not stop the others (nor the sweeps).
      await reconcileJob(deps, ctx.client, id, restarted).catch((err: Error) => {
        reconcilerStepFailures.inc({ step: 'pending jobs' });
        deps.logger.error({ job_id: id, err_message: err.message }, 'reconcile: a pending job could not be reconciled');
      });
    }
  }
  return { pending_checked: checked, jobs_looked_up: looked_up, jobs_restarted: restarted };
}

type SweepReport = Omit<ReconcileReport, 'pending_checked' | 'jobs_looked_up' | 'jobs_restarted'>;

/**
 * Runs one sweep step; a step that throws is logged and counted, and the run goes on with the next (its
 * count is then 0): one row or one dependency that fails never stops the other steps, run after run.
 */
async function step<T>(deps: ReconcilerActivityDeps, ctx: Context, name: string, fallback: T, run: () => Promise<T>): Promise<T> {
  ctx.heartbeat(name);
  try {
    return await run();
  } catch (err) {
    reconcilerStepFailures.inc({ step: name });
    deps.logger.error({ step: name, err_message: (err as Error).message }, 'reconcile: a sweep step failed; the others go on');
    return fallback;
  }
}

/** Speech holds: those of delivered audio captured, those of requests that died released. */
async function settleSpeechHolds(deps: ReconcilerActivityDeps): Promise<{ captured: number; released: number }> {
  const onFailure = (speech_request_id: string, err: Error) => {
    reconcilerStepFailures.inc({ step: 'speech holds' });
    deps.logger.error({ speech_request_id, err_message: err.message }, 'reconcile: a delivered speech hold could not be captured');
  };
  const captured = await captureDeliveredSpeechHolds(deps.db, DELIVERED_HOLD_GRACE_MS, HOLDS_PER_RUN, onFailure);
  if (captured.captured > 0) {
    creditsCharged.inc({ kind: 'speech' }, captured.cost_micro_eur);
    deps.logger.warn({ captured: captured.captured }, 'speech holds of delivered audio whose capture had failed were captured');
  }
  const released = await releaseExpiredSpeechHolds(deps.db, SPEECH_HOLD_TTL_MS, HOLDS_PER_RUN);
  if (released > 0) deps.logger.warn({ released }, 'speech holds of requests that died were released');
  return { captured: captured.captured, released };
}

/** Settles speech holds, starts unstarted webhook deliveries and voice deletions, and sweeps storage; each step on its own. */
async function sweep(deps: ReconcilerActivityDeps, ctx: Context): Promise<SweepReport> {
  const { client } = ctx;
  const { db, storage } = deps;
  const holds = await step(deps, ctx, 'speech holds', { captured: 0, released: 0 }, () => settleSpeechHolds(deps));
  const deliveries = await step(deps, ctx, 'webhook deliveries', 0, async () =>
    deps.webhookEvents
      ? dispatchUndispatched(
          { client, db, taskQueue: deps.taskQueue, retry_initial_ms: deps.webhookEvents.retry_initial_ms },
          DELIVERIES_PER_RUN,
        )
      : 0,
  );
  const orphans = await step(deps, ctx, 'orphan inputs', 0, () =>
    discardOrphanVideoJobInputs(db, storage, ORPHAN_INPUTS_MIN_AGE_MS, ORPHAN_INPUTS_PER_RUN),
  );
  if (orphans > 0) deps.logger.info({ deleted: orphans }, 'images of create attempts that did not charge their job were deleted');
  const voiceDeletions = await step(deps, ctx, 'voice deletions', 0, () =>
    startPendingVoiceDeletions(db, client, deps.taskQueue, VOICE_DELETION_GRACE_MS, VOICE_DELETIONS_PER_RUN),
  );
  const orphanFiles = await step(deps, ctx, 'job files', 0, async () =>
    storage ? sweepFinishedJobFiles(db, storage, FILE_SWEEP_GRACE_MS, FILE_SWEEP_JOBS_PER_RUN) : 0,
  );
  const audioExpired = await step(deps, ctx, 'speech audio', 0, async () =>
    storage && deps.retention ? expireSpeechAudio(db, storage, deps.retention.speech_audio_ms, SPEECH_AUDIO_PER_RUN) : 0,
  );
  const consentRecordings = await step(deps, ctx, 'consent recordings', 0, async () =>
    storage ? sweepConsentRecordings(db, storage, FILE_SWEEP_GRACE_MS, CONSENT_RECORDINGS_PER_RUN, consentRowFailed(deps)) : 0,
  );
  return {
    consent_recordings_removed: consentRecordings,
    orphan_files_deleted: orphanFiles,
    speech_audio_expired: audioExpired,
    voice_deletions_started: voiceDeletions,
    speech_holds_released: holds.released,
    speech_holds_captured: holds.captured,
    webhook_deliveries_started: deliveries,
    orphan_inputs_deleted: orphans,
  };
}

/** A consent recording the sweep could not remove: logged and counted; the sweep goes on with the next. */
const consentRowFailed = (deps: ReconcilerActivityDeps) => (consent_id: string, err: Error) => {
  reconcilerStepFailures.inc({ step: 'consent recordings' });
  deps.logger.error({ consent_id, err_message: err.message }, 'reconcile: a consent recording could not be removed');
};

/** One reconciler run: lost jobs restarted, then the sweeps; counted in the metrics. */
async function reconcileMoney(deps: ReconcilerActivityDeps): Promise<ReconcileReport> {
  const ctx = Context.current();
  const jobs = await restartLostJobs(deps, ctx);
  const batches = await step(deps, ctx, 'batches', [] as string[], () =>
    restartLostBatches(deps.db, ctx.client, deps.taskQueue, deps.video.jobTimeoutMs),
  );
  const swept = await sweep(deps, ctx);
  reconcilerRuns.inc();
  reconcilerFindings.inc({ finding: 'job_restarted' }, jobs.jobs_restarted.length);
  reconcilerFindings.inc({ finding: 'speech_hold_released' }, swept.speech_holds_released);
  reconcilerFindings.inc({ finding: 'speech_hold_captured' }, swept.speech_holds_captured);
  reconcilerFindings.inc({ finding: 'webhook_delivery_started' }, swept.webhook_deliveries_started);
  reconcilerFindings.inc({ finding: 'voice_deletion_started' }, swept.voice_deletions_started);
  return {
    consent_recordings_removed: swept.consent_recordings_removed,
    orphan_files_deleted: swept.orphan_files_deleted,
    speech_audio_expired: swept.speech_audio_expired,
    voice_deletions_started: swept.voice_deletions_started,
    pending_checked: jobs.pending_checked,
    jobs_looked_up: jobs.jobs_looked_up,
    jobs_restarted: jobs.jobs_restarted,
    speech_holds_released: swept.speech_holds_released,
    speech_holds_captured: swept.speech_holds_captured,
    webhook_deliveries_started: swept.webhook_deliveries_started,
    orphan_inputs_deleted: swept.orphan_inputs_deleted,
    batches_restarted: batches,
  };
}

export function createReconcilerActivities(deps: ReconcilerActivityDeps) {
  return {
    reconcileMoney: (): Promise<ReconcileReport> => reconcileMoney(deps),
  };
}

export type ReconcilerActivities = ReturnType<typeof createReconcilerActivities>;
