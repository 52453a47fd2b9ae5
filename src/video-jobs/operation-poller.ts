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
import { observeProviderError, videoProviderPollDuration, videoProviderPollRetries } from '../metrics.js';
import { describeAnyProviderError, providerErrorKind, type DescribedProviderError } from '../providers/video/provider-errors.js';
import { cancelAndRecord } from './operation-cancel.js';
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
/**
 * After failed polls in a row, the next waits the row's interval doubled for each failure before it, up
 * to this (or the row's own maximum when that is longer): an outage, a minute of 429s or a key being
 * rotated costs a job a few polls, not a storm of them.
 */
export const FAILED_POLL_WAIT_MS_MAX = 30_000;
/** The row counts failed polls in a row; bounded, so years of them stay far from the column's limit. */
const FAILURES_COUNTED_MAX = 1_000_000;
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
   * The operation's status, or 'rescheduled' after a failure that may pass. Only the provider ends an
   * operation: a passing error, our credentials refused or an answer we could not read is retried, backing
   * off, for as long as the job waits (its workflow's deadline fails it, and cancels the operation); a
   * final error (the provider does not know the operation, or refuses the poll for good) ends it as
   * failed, after the operation, which may still run, is asked to stop.
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
      const kind = providerErrorKind(e);
      const failures = row.failures + 1;
      const fields = { job_id: row.job_id, backend: row.backend, code: e.code, kind, failures, provider_message: (err as Error).message };
      if (kind === 'final') {
        this.deps.logger.warn(fields, 'video provider poll failed for good; the job fails and its operation is cancelled');
        if (!row.signalled) await cancelAndRecord(this.deps, row.job_id, () => provider.cancel(row.operation_id));
        return { state: 'failed', code: e.code, message: e.message };
      }
      videoProviderPollRetries.inc({ backend: row.backend, reason: kind });
      if (kind === 'passing') this.deps.logger.warn(fields, 'video provider poll failed; retried later');
      else this.deps.logger.error(fields, 'video provider poll refused or unreadable; retried until the job deadline');
      await this.reschedule(row, afterFailedPoll(row, e, failures));
      return 'rescheduled';
    }
  }
}

/**
 * The next poll after the `failures`-th failed one in a row: the row's interval doubled per failure
 * before it (capped), or the provider's Retry-After when that is longer. The interval itself is kept.
 */
export function afterFailedPoll(
  row: Pick<DuePoll, 'interval_ms' | 'max_interval_ms'>,
  e: Pick<DescribedProviderError, 'retry_after_ms'>,
  failures: number,
): Omit<PollReschedule, 'job_id'> {
  const ceiling = Math.max(row.max_interval_ms, FAILED_POLL_WAIT_MS_MAX);
  const backoff = Math.min(row.interval_ms * 2 ** Math.min(failures - 1, 30), ceiling);
  return {
    wait_ms: Math.max(e.retry_after_ms ?? 0, backoff),
    interval_ms: row.interval_ms,
    failures: Math.min(failures, FAILURES_COUNTED_MAX),
  };
}
