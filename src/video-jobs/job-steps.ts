// What the video job's steps share: the worker's dependencies they run with, how a provider's refusal
// becomes the activity's failure (retried or not, after the provider's Retry-After), heartbeats for long
// transfers, and how a job's polls are paced. The steps themselves: ./submission.ts (submit, record or
// cancel), ./outputs.ts (copy into storage), ./cancellation.ts; activities/video-job.ts hands them to Temporal.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../db/pool.js';
import { type VideoProvider } from '../providers/video/types.js';
import { describeAnyProviderError, type DescribedProviderError } from '../providers/video/provider-errors.js';
import { type Storage } from '../storage/local.js';
import type { JobEventContext } from '../webhooks/events.js';
import { type PollPacing } from './operation-polls.js';

export interface VideoJobActivityDeps {
  db: Db;
  storage: Storage;
  videoProviders: ReadonlyMap<string, VideoProvider>;
  logger: Logger;
  /** How the workers' pollers pace a job's polls (VIDEO_POLL_INTERVAL_MS, VIDEO_POLL_MAX_INTERVAL_MS). */
  video: { pollIntervalMs: number; pollIntervalMsMax: number };
  /** Where providers that call back reach this service (PUBLIC_BASE_URL, else the API's own address). */
  callbackBaseUrl?: string;
  /** Webhooks: how events present the job, and the first retry interval of deliveries. */
  webhookEvents?: { context: JobEventContext; retry_initial_ms: number };
}

/** The longest wait between two fallback polls of a job whose backend calls back. */
export const CALLBACK_FALLBACK_POLL_INTERVAL_MS_MAX = 30_000;

/**
 * Videos copied from a provider into storage at once by one worker process (each is held in memory:
 * src/runtime/memory-bounds.ts checks them against the chart's limit), and copies left waiting.
 */
export const CONCURRENT_OUTPUT_COPIES_MAX = 2;
export const WAITING_OUTPUT_COPIES_MAX = 10_000;
export const HEARTBEAT_EVERY_MS = 5_000;
/** An accepted operation's record is tried this many times, RECORD_RETRY_MS apart and doubling (about 8 s in all), before it is cancelled. */
export const RECORD_ATTEMPTS = 5;
export const RECORD_RETRY_MS = 500;

/**
 * The provider error as the activity's failure: its code in details, the provider's Retry-After as the
 * next retry's delay; retried when `retried` says so of it (by default, when the provider said to try again).
 */
export function providerFailure(
  err: unknown,
  logger: Logger,
  fields: Record<string, unknown>,
  final = false,
  retried: (e: DescribedProviderError) => boolean = (e) => e.retryable,
): ApplicationFailure {
  const e = describeAnyProviderError(err);
  if (!e.visible)
    logger.warn(
      { ...fields, code: e.code, retryable: e.retryable, provider_message: (err as Error)?.message },
      'video provider call failed',
    );
  return ApplicationFailure.create({
    type: 'ProviderError',
    message: e.message,
    nonRetryable: final || !retried(e),
    details: [{ code: e.code }],
    ...(e.retry_after_ms !== undefined ? { nextRetryDelay: e.retry_after_ms } : {}),
  });
}

/** Heartbeats every few seconds while `work` runs, so a long download or upload is not taken for a dead worker. */
export async function withHeartbeat<T>(detail: unknown, work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  ctx.heartbeat(detail);
  const timer = setInterval(() => ctx.heartbeat(detail), HEARTBEAT_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

/** The provider of a configured backend; a backend not configured fails the activity for good. */
export function providerFor(deps: VideoJobActivityDeps, backend: string): VideoProvider {
  const p = deps.videoProviders.get(backend);
  if (!p) {
    throw ApplicationFailure.create({
      type: 'ProviderError',
      message: `video backend "${backend}" is not configured`,
      nonRetryable: true,
      details: [{ code: 'provider_not_configured' }],
    });
  }
  return p;
}

/** How the workers' pollers pace a job's polls. */
export function pollPacing(deps: VideoJobActivityDeps): PollPacing {
  return { interval_ms: deps.video.pollIntervalMs, max_interval_ms: deps.video.pollIntervalMsMax };
}

/** A backend that calls back when an operation ends is polled only as a fallback: its polls back off further. */
export function pacingOf(deps: VideoJobActivityDeps, provider: VideoProvider): PollPacing {
  const pacing = pollPacing(deps);
  return provider.verifyCallback
    ? { ...pacing, max_interval_ms: Math.max(pacing.max_interval_ms, CALLBACK_FALLBACK_POLL_INTERVAL_MS_MAX) }
    : pacing;
}
