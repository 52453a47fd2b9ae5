// The workers' poller of submitted video operations. It claims the due rows of video_job_polls, polls
// each job's provider operation and, once the operation has ended, signals the job's workflow
// (operationEnded). It keeps nothing per job between polls, so any number of workers run one: a killed
// worker's claims are due again after LEASE_MS, and a signal that was lost is simply sent again.
import { setTimeout as sleep } from 'node:timers/promises';
import DataLoader from 'dataloader';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import { traceOperationPoll } from '../telemetry/job-trace.js';
import { observeProviderError, videoProviderPollDuration } from '../metrics.js';
import { describeAnyProviderError } from '../providers/video/provider-errors.js';
import type { VideoOperationStatus, VideoProvider } from '../providers/video/types.js';
import { operationEndedSignal, videoJobWorkflowId, type VideoOperationEnd } from '../../workflows/messages.js';
import {
  claimDuePolls,
  markSignalled,
  POLL_BACKOFF,
  removePoll,
  reschedulePolls,
  RESCHEDULE_ROWS_MAX,
  type DuePoll,
  type PollReschedule,
} from './operation-polls.js';

export interface OperationPollerDeps {
  db: Db;
  temporal: Client;
  providers: ReadonlyMap<string, VideoProvider>;
  logger: Logger;
  /** Polls (and signals) this process runs at once; pending jobs are rows, not bounded by it. */
  concurrent_max: number;
  /** The wait when nothing is due (a provider callback's job is seen within it). */
  idle_ms: number;
}

/** A claimed row is due again after this if its poller died mid-poll. */
const LEASE_MS = 30_000;
/** A workflow told its operation ended that has not settled after this is told again. */
const REMIND_AFTER_MS = 5 * 60_000;
/** Failed polls of one operation in a row before the job is told the operation failed. */
export const CONSECUTIVE_POLL_FAILURES_MAX = 20;
/** A database or Temporal call that failed: the row is tried again after this long. */
const RETRY_AFTER_ERROR_MS = 5_000;
/** The wait after a claim query failed (PostgreSQL down: one warning a second, not one per idle wait). */
const CLAIM_RETRY_AFTER_ERROR_MS = 1_000;

export class OperationPoller {
  private readonly stop = new AbortController();
  private in_flight = 0;
  private readonly settled = new Set<Promise<void>>();
  private loop: Promise<void> | undefined;
  /**
   * Reschedules of the polls that end together (those of one claim mostly do) are written in one
   * statement: a pending job then costs the worker a share of a query per poll, not a query of its own.
   */
  private readonly reschedules: DataLoader<PollReschedule, void>;

  constructor(private readonly deps: OperationPollerDeps) {
    this.reschedules = new DataLoader(
      async (rows) => {
        await reschedulePolls(deps.db, rows);
        return rows.map(() => undefined);
      },
      { cache: false, maxBatchSize: RESCHEDULE_ROWS_MAX },
    );
  }

  private reschedule(row: DuePoll, r: Omit<PollReschedule, 'job_id'>): Promise<void> {
    return this.reschedules.load({ job_id: row.job_id, ...r });
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops claiming and lets the polls in flight end (at most `grace_ms`); their rows are due again after LEASE_MS. */
  async shutdown(grace_ms = 10_000): Promise<void> {
    this.stop.abort();
    await this.loop;
    await Promise.race([Promise.allSettled([...this.settled]), sleep(grace_ms)]);
  }

  private async run(): Promise<void> {
    const { signal } = this.stop;
    while (!signal.aborted) {
      let claimed: DuePoll[] = [];
      let idle_ms = this.deps.idle_ms;
      try {
        claimed = await claimDuePolls(this.deps.db, this.deps.concurrent_max - this.in_flight, LEASE_MS);
      } catch (err) {
        idle_ms = Math.max(idle_ms, CLAIM_RETRY_AFTER_ERROR_MS);
        this.deps.logger.warn({ err_message: (err as Error).message }, 'operation poller: could not claim due jobs; trying again');
      }
      // With tracing, each poll is a span of its job's trace.
      for (const row of claimed) this.track(traceOperationPoll(this.deps.db, row, () => this.handle(row)));
      // Full: wait for a slot; nothing due: wait a moment.
      if (this.in_flight >= this.deps.concurrent_max) await Promise.race(this.settled);
      else if (claimed.length === 0) await sleep(idle_ms, undefined, { signal }).catch(() => {});
    }
  }

  private track(p: Promise<void>): void {
    this.in_flight++;
    const done: Promise<void> = p
      .catch((err) =>
        this.deps.logger.warn(
          { err_message: (err as Error).message },
          'operation poller: a job was not handled; it is due again after its lease',
        ),
      )
      .finally(() => {
        this.in_flight--;
        this.settled.delete(done);
      });
    this.settled.add(done);
  }

  /** One poll of a due row: reschedules it while the operation runs, signals its workflow once it has ended. */
  private async handle(row: DuePoll): Promise<void> {
    const { db, logger } = this.deps;
    const provider = this.deps.providers.get(row.backend);
    if (!provider) {
      // Another worker may be configured for it; else the job's deadline fails it, refunded.
      logger.error({ job_id: row.job_id, backend: row.backend }, 'operation poller: this worker has no such video backend configured');
      return this.reschedule(row, { wait_ms: RETRY_AFTER_ERROR_MS, interval_ms: row.interval_ms, failures: row.failures });
    }
    const status = await this.poll(provider, row);
    if (status === 'rescheduled') return;
    if (status.state === 'running') {
      return this.reschedule(row, {
        wait_ms: row.interval_ms,
        interval_ms: Math.min(Math.ceil(row.interval_ms * POLL_BACKOFF), row.max_interval_ms),
        failures: 0,
        progress: status.progress,
        queue_position: status.queue_position,
      });
    }
    const end: VideoOperationEnd =
      status.state === 'succeeded'
        ? { state: 'succeeded', outputs: status.outputs }
        : { state: 'failed', code: status.code, message: status.message };
    try {
      await this.deps.temporal.workflow
        .getHandle(videoJobWorkflowId(row.job_id))
        .signal(operationEndedSignal, { operation_id: row.operation_id, end });
    } catch (err) {
      // No run to tell: the job settled, or its workflow is gone and the reconciler restarts it (with a row of its own).
      if (err instanceof WorkflowNotFoundError) return removePoll(db, row.job_id);
      logger.warn(
        { job_id: row.job_id, err_message: (err as Error).message },
        'operation poller: the job could not be told its operation ended; trying again',
      );
      return this.reschedule(row, { wait_ms: RETRY_AFTER_ERROR_MS, interval_ms: row.interval_ms, failures: row.failures });
    }
    if (!row.signalled)
      logger.info({ job_id: row.job_id, backend: row.backend, operation_id: row.operation_id, state: end.state }, 'video operation ended');
    await markSignalled(db, row.job_id, REMIND_AFTER_MS);
  }

  /**
   * The operation's status, or 'rescheduled' after a passing failure. A final provider error, or too many
   * passing ones in a row, is the operation's end: the job fails with it (refunded).
   */
  private async poll(provider: VideoProvider, row: DuePoll): Promise<VideoOperationStatus | 'rescheduled'> {
    const started = process.hrtime.bigint();
    const observe = (result: string) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      videoProviderPollDuration.observe({ backend: row.backend, result }, seconds);
      this.deps.logger.debug(
        { job_id: row.job_id, backend: row.backend, operation_id: row.operation_id, result, duration_ms: seconds * 1000 },
        'video provider polled',
      );
    };
    try {
      const status = await provider.poll(row.operation_id);
      observe(status.state);
      return status;
    } catch (err) {
      observe('error');
      const e = describeAnyProviderError(err);
      observeProviderError(row.backend, 'poll', e);
      const failures = row.failures + 1;
      this.deps.logger.warn(
        {
          job_id: row.job_id,
          backend: row.backend,
          code: e.code,
          retryable: e.retryable,
          failures,
          provider_message: (err as Error).message,
        },
        'video provider poll failed',
      );
      if (e.retryable && failures < CONSECUTIVE_POLL_FAILURES_MAX) {
        await this.reschedule(row, { wait_ms: e.retry_after_ms ?? row.interval_ms, interval_ms: row.interval_ms, failures });
        return 'rescheduled';
      }
      return { state: 'failed', code: e.code, message: e.message };
    }
  }
}
