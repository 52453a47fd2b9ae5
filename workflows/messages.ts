// Message definitions and types shared by the API, the workers and the workflows: the video job's input
// and state, its query, updates and signal, and its search attributes; the voice deletion's input (here,
// not in its workflow's file, so that its activity and its workflow do not import each other).
// Imported by workflow code: no Node APIs here, only types and Temporal definitions.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { VideoParams } from '../src/models/values.js';

/** What the voice deletion workflow (./voice-deletion.ts) and its activity are given. */
export interface VoiceDeletionInput {
  registry_id: string;
  workspace_id: string;
  /** The provider that holds the voice, fixed when it was cloned. */
  provider: string;
  voice_id: string;
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

/** A provider output, as the adapter that made it names it (fetched by the same adapter's fetchOutput). */
export interface VideoOutputRef {
  ref: string;
  content_type: string;
}

export interface VideoJobInput {
  job_id: string;
  workspace_id: string;
  model: string;
  /**
   * The backends that may serve the job, in order, fixed at creation so a config change never moves a
   * running job: a passing refusal of one (429, 5xx, unreachable) sends the submission to the next.
   */
  backends: string[];
  prompt: string;
  params: VideoParams;
  seed?: number;
  parameters?: Record<string, unknown>;
  /** Whether the videos have generated audio (priced accordingly); unset for models without audio. */
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
  /** The job fails and is refunded when not finished by then. */
  deadline_at_ms: number;
  /**
   * This create's attempt: the charge is refused once `accept_by_ms` has passed (the API no longer waits
   * for it), and an attempt the API gave up on is refused for good. Absent in recovery runs (no charge).
   */
  attempt_id?: string;
  accept_by_ms?: number;
  /** The create carried an Idempotency-Key: a 402 refusal is remembered for the key. */
  sticky_refusal?: boolean;
  /** The API key that created the job: its spend limit applies to the charge. */
  api_key_id?: string;
  /**
   * Set when the reconciler restarts a job whose workflow ended or vanished while its money was unsettled:
   * the job is already charged, so the run resumes the provider operation if one is known, and otherwise
   * fails the job with a full refund.
   */
  recovery?: { operation_id: string | null };
  /** The batch the job belongs to: its charge is drawn from the batch's reservation, its refund goes back into it. */
  batch_id?: string;
}

/**
 * `charging` until the charge step decides; then `pending` (accepted and charged), or one of the refusals
 * that charged nothing: `rejected` (insufficient credits, the key's spend limit), `not_accepted` (the
 * acceptance window passed, or the API gave up on the attempt), `duplicate` (another attempt with the same
 * Idempotency-Key was accepted), `limited` (the workspace has its maximum of pending jobs).
 */
export type VideoJobStatus = 'charging' | 'rejected' | 'not_accepted' | 'duplicate' | 'limited' | 'pending' | 'succeeded' | 'failed';

/** Whether a state is one of the refusals that charged nothing (the job does not exist for the customer). */
export const isRefusal = (status: VideoJobStatus) =>
  status === 'rejected' || status === 'not_accepted' || status === 'duplicate' || status === 'limited';

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
  /** The backend that accepted the submission (null until then). */
  backend: string | null;
  /** 0-100 as the provider reports it (kept in PostgreSQL by the poller; null when the provider gives none). */
  progress: number | null;
  /** The job's place in the provider's queue, where the provider says (null otherwise). */
  queue_position: number | null;
  /** The batch the job belongs to (kept in its row; the workflow's own state does not carry it). */
  batch_id?: string | null;
}

/** How a provider operation ended, as the poller (or a verified provider callback) reports it. */
export type VideoOperationEnd = { state: 'succeeded'; outputs: VideoOutputRef[] } | { state: 'failed'; code: string; message: string };

export interface OperationEnded {
  operation_id: string;
  end: VideoOperationEnd;
}

/** Error types of the accept update for an attempt that charged nothing. */
export const INSUFFICIENT_CREDITS = 'InsufficientCredits';
export const NOT_ACCEPTED_IN_TIME = 'NotAcceptedInTime';
export const KEY_SPEND_LIMIT_EXCEEDED = 'KeySpendLimitExceeded';
export const TOO_MANY_PENDING_JOBS = 'TooManyPendingJobs';
export const CHARGED_BY_ANOTHER_ATTEMPT = 'ChargedByAnotherAttempt';
/** Error type of a cancel refused: the job has finished or is settling. */
export const JOB_NOT_CANCELLABLE = 'JobNotCancellable';

export const jobStateQuery = defineQuery<VideoJobState>('jobState');
/** Early return: completes once the charge step has decided (accepted, or refused with one of the types above). */
export const acceptJobUpdate = defineUpdate<VideoJobState>('acceptJob');
/**
 * Cancels a pending job: its generation stops, the provider's operation is cancelled where the provider
 * allows it, and the job ends `failed` with code `cancelled`, refunded except what the provider bills for
 * an operation it had started; completes with the settled job. Refused (JOB_NOT_CANCELLABLE, nothing
 * recorded) once the job settles or has finished.
 */
export const cancelJobUpdate = defineUpdate<VideoJobState>('cancelJob');
/** The job's provider operation has ended. Sent again when in doubt: the workflow keeps the first. */
export const operationEndedSignal = defineSignal<[OperationEnded]>('operationEnded');

export const WORKSPACE_ID_SA = defineSearchAttributeKey('WorkspaceId', SearchAttributeType.KEYWORD);
export const VIDEO_MODEL_SA = defineSearchAttributeKey('VideoModel', SearchAttributeType.KEYWORD);
export const JOB_STATUS_SA = defineSearchAttributeKey('VideoJobStatus', SearchAttributeType.KEYWORD);
export const SEARCH_ATTRIBUTES = [WORKSPACE_ID_SA, VIDEO_MODEL_SA, JOB_STATUS_SA] as const;

/**
 * The search attributes a job's workflow is started with (by the API, and by the reconciler's recovery
 * runs). Its status starts "pending": the charge takes milliseconds, an accepted job keeps it until it
 * settles (no upsert when accepted), and a refused attempt's run sets its refusal.
 */
export const videoJobStartSearchAttributes = (workspace_id: string, model: string) => [
  { key: WORKSPACE_ID_SA, value: workspace_id },
  { key: VIDEO_MODEL_SA, value: model },
  { key: JOB_STATUS_SA, value: 'pending' },
];

export const videoJobWorkflowId = (job_id: string) => `video-job-${job_id}`;

/** What the batch workflow (./batch.ts) is given; a continued run carries on from `claim_seq`. */
export interface BatchWorkflowInput {
  batch_id: string;
  workspace_id: string;
  /** The end of its completion window: requests not started by then fail (expired). */
  expires_at_ms: number;
  /** A batch job's deadline, from when it starts. */
  job_timeout_ms: number;
  /** The number of the next claim of requests (0 at first; carried across continue-as-new). */
  claim_seq?: number;
  /** Started by the reconciler (the batch's workflow had stopped): it takes on the requests left running. */
  recovered?: boolean;
}

export const batchWorkflowId = (batch_id: string) => `batch-${batch_id}`;
/** Stop: nothing more of the batch starts; requests running finish (the API released the others' share). */
export const stopBatchSignal = defineSignal('stopBatch');
