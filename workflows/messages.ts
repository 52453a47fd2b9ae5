// Message definitions and types shared by the API (client side) and the workflow.
// Imported by workflow code: no Node APIs here, only types and Temporal definitions.
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export interface VideoParams {
  durationSeconds: number;
  resolution: '720p' | '1080p' | '4k';
  aspectRatio: '16:9' | '9:16';
  n: number;
}

export interface StoredVideo {
  storage_key: string;
  content_type: string;
  bytes: number;
}

export interface JobError {
  code: string;
  message: string;
}

export interface VideoJobInput {
  job_id: string;
  workspace_id: string;
  model: string;
  /** Which adapter serves the job, fixed at creation so a config change never moves a running job. */
  backend: string;
  prompt: string;
  params: VideoParams;
  seed?: number;
  parameters?: Record<string, unknown>;
  /** Whether the videos have generated audio (priced accordingly); unset for models without audio and jobs from before. */
  generate_audio?: boolean;
  negative_prompt?: string;
  /**
   * The job has a first frame (and a last frame): the images are kept with the job (table
   * video_job_inputs), never in workflow history; the submit activity loads them by job id.
   */
  has_image?: boolean;
  has_last_frame?: boolean;
  estimated_cost_micro_eur: number;
  created_at_ms: number;
  /** Hash of the request body: a reused Idempotency-Key with another body is refused by the API. */
  request_fingerprint: string;
  poll_interval_ms: number;
  poll_max_interval_ms: number;
  /**
   * How long the activity awaiting the provider may go without a heartbeat before Temporal gives its
   * attempt to another worker (0.6.0 on; absent: AWAIT_HEARTBEAT_TIMEOUT_MS).
   */
  await_heartbeat_timeout_ms?: number;
  /** The job fails and is refunded when not finished by then. */
  deadline_at_ms: number;
  /** Polls per workflow run before continue-as-new keeps the history bounded (first release's polling loop). */
  max_polls_per_run: number;
  /**
   * This create's attempt (bounded acceptance, contract.md 6): the charge is refused once `accept_by_ms`
   * has passed, and an attempt the API gave up on is refused for good. Absent in jobs started by the first
   * release.
   */
  attempt_id?: string;
  accept_by_ms?: number;
  /** The create carried an Idempotency-Key: a 402 refusal is remembered for the key. */
  sticky_refusal?: boolean;
  /** The API key that created the job: its spend limit applies to the charge (absent: first release). */
  api_key_id?: string;
  /**
   * Set when the reconciler restarts a job whose workflow ended or vanished while its money was unsettled:
   * the job is already charged, so the run resumes the provider operation if one is known, and otherwise
   * fails the job with a full refund.
   */
  recovery?: { operation_id: string | null };
}

/**
 * `charging` until the charge step decides; then `pending` (accepted and charged), or one of the refusals
 * that charged nothing: `rejected` (insufficient credits), `not_accepted` (the acceptance window passed, or
 * the API gave up on the attempt), `duplicate` (another attempt with the same Idempotency-Key was accepted).
 */
export type VideoJobStatus = 'charging' | 'rejected' | 'not_accepted' | 'duplicate' | 'pending' | 'succeeded' | 'failed';

/** Whether a state is one of the refusals that charged nothing (the job does not exist for the customer). */
export const isRefusal = (status: VideoJobStatus) => status === 'rejected' || status === 'not_accepted' || status === 'duplicate';

export interface VideoJobState {
  job_id: string;
  workspace_id: string;
  status: VideoJobStatus;
  model: string;
  params: VideoParams;
  created_at_ms: number;
  completed_at_ms: number | null;
  estimated_cost_micro_eur: number;
  cost_micro_eur: number | null;
  refunded_micro_eur: number;
  videos: StoredVideo[];
  error: JobError | null;
  request_fingerprint: string;
}

/** Carried across continue-as-new. */
export interface VideoJobResume {
  state: VideoJobState;
  operation_id: string;
  next_poll_interval_ms: number;
  polls_total: number;
}

/**
 * How a job's poll interval grows from VIDEO_POLL_INTERVAL_MS up to VIDEO_POLL_MAX_INTERVAL_MS: the awaiting
 * activity's retry backoff, and the pace of its polls in the worker (0.6.0), the same.
 */
export const POLL_BACKOFF = 1.5;

/** The failure type of a poll that found the video operation still running (the awaiting activity's retries are the polls). */
export const OPERATION_RUNNING = 'VideoOperationRunning';

/** Error types of the accept update: the balance does not cover the estimate; too late; another attempt won. */
export const INSUFFICIENT_CREDITS = 'InsufficientCredits';
export const NOT_ACCEPTED_IN_TIME = 'NotAcceptedInTime';
export const KEY_SPEND_LIMIT_EXCEEDED = 'KeySpendLimitExceeded';
/** Error type of a cancel refused: the job has finished or is settling. */
export const JOB_NOT_CANCELLABLE = 'JobNotCancellable';
export const CHARGED_BY_ANOTHER_ATTEMPT = 'ChargedByAnotherAttempt';

export const jobStateQuery = defineQuery<VideoJobState>('jobState');
/** Early return: completes once the charge step has decided (accepted, or rejected for credits). */
export const acceptJobUpdate = defineUpdate<VideoJobState>('acceptJob');
/**
 * Cancels a pending job: its generation stops (the provider's operation is cancelled where the provider
 * allows it), it is refunded in full and ends `failed` with code `cancelled`; completes with the settled
 * job. Refused (JOB_NOT_CANCELLABLE, nothing recorded) once the job settles or has finished.
 */
export const cancelJobUpdate = defineUpdate<VideoJobState>('cancelJob');

export const WORKSPACE_ID_SA = defineSearchAttributeKey('WorkspaceId', SearchAttributeType.KEYWORD);
export const VIDEO_MODEL_SA = defineSearchAttributeKey('VideoModel', SearchAttributeType.KEYWORD);
export const JOB_STATUS_SA = defineSearchAttributeKey('VideoJobStatus', SearchAttributeType.KEYWORD);
export const SEARCH_ATTRIBUTES = [WORKSPACE_ID_SA, VIDEO_MODEL_SA, JOB_STATUS_SA] as const;
/**
 * The job's status search attribute as the API starts its workflow (0.5.0; "charging" before): an accepted job
 * keeps it until it settles, a refused attempt's run sets its refusal. Its charge takes milliseconds, so the
 * Temporal UI shows a job being charged as pending, and an accepted job costs no upsert when it is accepted.
 */
export const STATUS_AT_START: VideoJobStatus = 'pending';

/** The search attributes a job's workflow is started with (by the API, and by tests that start it directly). */
export const videoJobStartSearchAttributes = (workspace_id: string, model: string) => [
  { key: WORKSPACE_ID_SA, value: workspace_id },
  { key: VIDEO_MODEL_SA, value: model },
  { key: JOB_STATUS_SA, value: STATUS_AT_START },
];

export const videoJobWorkflowId = (job_id: string) => `video-job-${job_id}`;
