// The worker's poller of awaited video operations (issue 9: a pending job costs a row, not a running
// activity). It claims the due rows of video_job_awaits, polls each job's provider operation, and
// completes or fails the job's awaiting attempt by its task token when the operation ends; while it runs,
// it heartbeats the attempt (which brings back its cancellation). It holds nothing per job between polls:
// a killed worker's claims expire and any other worker's poller goes on.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { ActivityCancelledError, ActivityNotFoundError, type AsyncCompletionClient } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import type { VideoOperationStatus } from '../providers/video/types.js';
import { OPERATION_RUNNING, POLL_BACKOFF } from '../../workflows/messages.js';
import { claimDueAwaits, releaseAwait, releaseClaimsOf, removeAwait, type ClaimedAwait } from './awaits-store.js';

export interface AwaitsPollerDeps {
  db: Db;
  completion: AsyncCompletionClient;
  logger: Logger;
  /** One poll of a job's operation: its final status, or an ApplicationFailure (OPERATION_RUNNING while it runs). */
  pollOnce(backend: string, job_id: string, operation_id: string, poll_failures: number | undefined): Promise<VideoOperationStatus>;
  /** Rows polled or heartbeated at once by this process. */
  max_concurrent: number;
  /** How long a claim holds a row; a claim of a worker that died expires after it. */
  lease_ms: number;
  /** The wait when nothing is due. */
  idle_ms: number;
}

/** A Temporal or database call that failed for a passing reason: the row is tried again after this long. */
const RETRY_AFTER_ERROR_MS = 5_000;
/** The wait after a claim query failed. */
const CLAIM_RETRY_AFTER_ERROR_MS = 1_000;

export class AwaitsPoller {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly stop = new AbortController();
  private in_flight = 0;
  private readonly settled = new Set<Promise<void>>();
  private loop: Promise<void> | undefined;

  constructor(private readonly deps: AwaitsPollerDeps) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops claiming, lets the polls in flight end (at most `grace_ms`), and gives this worker's claims back. */
  async shutdown(grace_ms = 10_000): Promise<void> {
    this.stop.abort();
    await this.loop;
    await Promise.race([Promise.allSettled([...this.settled]), sleep(grace_ms)]);
    try {
      await releaseClaimsOf(this.deps.db, this.owner);
    } catch (err) {
      this.deps.logger.warn({ err_message: (err as Error).message }, 'awaits poller: claims not given back (they expire)');
    }
  }

  private async run(): Promise<void> {
    const { signal } = this.stop;
    while (!signal.aborted) {
      let claimed: ClaimedAwait[] = [];
      let idle_ms = this.deps.idle_ms;
      try {
        claimed = await claimDueAwaits(this.deps.db, this.owner, this.deps.max_concurrent - this.in_flight, this.deps.lease_ms);
      } catch (err) {
        // PostgreSQL down or restarting: one warning a second at most, and the rows wait for it.
        idle_ms = Math.max(idle_ms, CLAIM_RETRY_AFTER_ERROR_MS);
        this.deps.logger.warn({ err_message: (err as Error).message }, 'awaits poller: could not claim due jobs; trying again');
      }
      for (const row of claimed) this.track(this.handle(row));
      // Full: wait for a slot; nothing due: wait a moment.
      const wait = this.in_flight >= this.deps.max_concurrent ? Promise.race(this.settled) : claimed.length === 0 ? sleep(idle_ms, undefined, { signal }).catch(() => {}) : undefined;
      if (wait) await wait;
    }
  }

  private track(p: Promise<void>): void {
    this.in_flight++;
    const done: Promise<void> = p
      .catch((err) => this.deps.logger.error({ err }, 'awaits poller: a job was not handled'))
      .finally(() => {
        this.in_flight--;
        this.settled.delete(done);
      });
    this.settled.add(done);
  }

  private async handle(row: ClaimedAwait): Promise<void> {
    const { db, completion } = this.deps;
    const token = row.task_token;
    if (row.job_settled || row.expired) return removeAwait(db, row);
    let next_heartbeat_after_ms: number | null = null;
    if (row.heartbeat_due) {
      try {
        await completion.heartbeat(token);
        next_heartbeat_after_ms = row.heartbeat_every_ms;
      } catch (err) {
        if (err instanceof ActivityCancelledError) {
          await completion.reportCancellation(token).catch(() => {});
          return removeAwait(db, row);
        }
        if (err instanceof ActivityNotFoundError) return removeAwait(db, row);
        this.deps.logger.warn({ job_id: row.job_id, err_message: (err as Error).message }, 'awaits poller: heartbeat failed; trying again');
        next_heartbeat_after_ms = RETRY_AFTER_ERROR_MS;
      }
    }
    if (!row.poll_due) {
      return releaseAwait(db, row, this.owner, { next_poll_after_ms: null, next_interval_ms: row.next_interval_ms, next_heartbeat_after_ms, failures_known_zero: row.failures_known_zero });
    }
    let outcome: { result: unknown } | { failure: ApplicationFailure };
    try {
      const status = await this.deps.pollOnce(row.backend, row.job_id, row.operation_id, row.failures_known_zero ? 0 : undefined);
      outcome = { result: row.with_operation ? { operation_id: row.operation_id, status } : status };
    } catch (err) {
      if (!(err instanceof ApplicationFailure)) {
        // Not the provider's answer (pollOnce classifies those): PostgreSQL, most likely. Polled again later.
        this.deps.logger.warn({ job_id: row.job_id, err_message: (err as Error).message }, 'awaits poller: the poll failed; trying again');
        return releaseAwait(db, row, this.owner, { next_poll_after_ms: RETRY_AFTER_ERROR_MS, next_interval_ms: row.next_interval_ms, next_heartbeat_after_ms, failures_known_zero: row.failures_known_zero });
      }
      if (!err.nonRetryable) {
        const running = err.type === OPERATION_RUNNING;
        const wait_ms = !running && typeof err.nextRetryDelay === 'number' ? err.nextRetryDelay : row.next_interval_ms;
        return releaseAwait(db, row, this.owner, {
          next_poll_after_ms: wait_ms,
          next_interval_ms: Math.min(Math.ceil(row.next_interval_ms * POLL_BACKOFF), row.poll_max_interval_ms),
          next_heartbeat_after_ms,
          failures_known_zero: running,
        });
      }
      outcome = { failure: err };
    }
    try {
      if ('result' in outcome) await completion.complete(token, outcome.result);
      else await completion.fail(token, outcome.failure);
    } catch (err) {
      if (!(err instanceof ActivityNotFoundError)) {
        // Temporal unreachable: the operation is polled again later (a poll changes nothing) and completed then.
        this.deps.logger.warn({ job_id: row.job_id, err_message: (err as Error).message }, 'awaits poller: the awaiting attempt could not be completed; trying again');
        return releaseAwait(db, row, this.owner, { next_poll_after_ms: RETRY_AFTER_ERROR_MS, next_interval_ms: row.next_interval_ms, next_heartbeat_after_ms, failures_known_zero: row.failures_known_zero });
      }
    }
    return removeAwait(db, row);
  }
}
