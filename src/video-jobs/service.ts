// Video jobs: validation against the catalog, then one Temporal workflow per job started with
// update-with-start (early return): the workflow's own charge step decides the HTTP answer.
import { randomUUID } from 'node:crypto';
import { WithStartWorkflowOperation, WorkflowFailedError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../db/pool.js';
import { DatabaseClock } from '../db/clock.js';
import type { Storage } from '../storage/local.js';
import { isUuid, uuidForKey } from '../ids.js';
import { defaultVideoModelId, estimateCostMicroEur, findVideoModel, videoBackendsFor, type ConfiguredBackends } from '../models/catalog.js';
import type { AspectRatio, Resolution, VideoParams } from '../models/values.js';
import { videoDescriptorOf } from '../providers/registry.js';
import { ApiError, fromZodError, invalidParam, keySpendLimitExceeded, notFound } from '../errors.js';
import { isDependencyDown, RETRY_AFTER_S } from '../dependency-errors.js';
import { owedBy, paymentRequired } from '../billing/owed.js';
import { decideAcceptance, foreseeRefusal, recordForeseenRefusal, type ForeseenRefusal } from './billing.js';
import { requestFingerprint, type Fingerprint } from './request-fingerprint.js';
import { readKeyedVideoJob, readVideoJob, type VideoJobRecord } from './records.js';
import type { CreateVideoBody } from './schemas.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { requireKeyAllowsModel } from '../models/key-models.js';
import { inputsFingerprint, resolveVideoRequestInputs } from './request-inputs.js';
import { discardVideoJobInputs, storeVideoJobInputs, type VideoJobInputs } from './images.js';
import {
  acceptJobUpdate,
  CHARGED_BY_ANOTHER_ATTEMPT,
  INSUFFICIENT_CREDITS,
  KEY_SPEND_LIMIT_EXCEEDED,
  NOT_ACCEPTED_IN_TIME,
  TOO_MANY_PENDING_JOBS,
  jobStateQuery,
  videoJobStartSearchAttributes,
  videoJobWorkflowId,
  type VideoJobInput,
  type VideoJobState,
} from '../../workflows/messages.js';
import type { videoJobWorkflow } from '../../workflows/video-job.js';

export interface VideoJobsDeps {
  db: Db;
  /** Where a create's images are kept until its job is submitted (the storage of the videos). */
  storage: Storage;
  temporal: Client;
  taskQueue: string;
  /** The backends this process serves (the providers' registry's configured set): the set the model lists read too. */
  backends: ConfiguredBackends;
  job_timeout_ms: number;
  /** How long a create waits for the workflow's charge step before answering 503. */
  create_timeout_ms?: number;
  /** PostgreSQL's clock, which stamps a create's absolute times; default: one read through `db`. */
  clock?: DatabaseClock;
  /** This host's clock (Date.now), which the default `clock` corrects. */
  hostNow?: () => number;
}

/** How long an operator's inspection of a job waits for its workflow's answer to the jobState query. */
const INSPECT_QUERY_TIMEOUT_MS = 5_000;
/** A create waits this long for the charge step (a worker must be running) before answering 503. */
const CREATE_TIMEOUT_MS = 30_000;
/** Error of the measured clock offset (and drift since) tolerated by the fallback of giveUp(). */
const CLOCK_SKEW_MARGIN_MS = 5_000;

/**
 * How long after a create's start its charge may still commit: well inside the time the API waits, so the
 * charge has either committed or can no longer commit when the API gives up (a third of the wait, between 1
 * and 10 s, is kept as margin: 20 s of the default 30 s).
 */
export function acceptWindowMs(create_timeout_ms: number): number {
  return create_timeout_ms - Math.min(Math.max(Math.floor(create_timeout_ms / 3), 1_000), 10_000);
}
/** A job id derived from (workspace, Idempotency-Key): the same key from the same workspace is the same job. */
export function jobIdForIdempotencyKey(workspaceId: string, key: string): string {
  return uuidForKey('video-job', workspaceId, key);
}

/**
 * An attempt at a job: its workflow's input, its request's fingerprint, whether an Idempotency-Key names
 * it, and when (this host's clock) the API stops waiting for its charge.
 */
interface AttemptOf {
  input: VideoJobInput;
  fingerprint: Fingerprint;
  keyed: boolean;
  deadline_ms: number;
}

/** A create's request resolved against the catalog: its model, backends, inputs and price. */
export type ResolvedVideoRequest = ReturnType<VideoJobsService['resolveRequest']>;

/** What makes two creates the same request (an Idempotency-Key retry's check). */
export function requestFingerprintOf(body: CreateVideoBody, r: ResolvedVideoRequest): Fingerprint {
  return requestFingerprint({
    model: r.model.id,
    prompt: body.prompt.trim(),
    params: r.params,
    seed: body.seed ?? null,
    parameters: r.parameters ?? null,
    inputs: inputsFingerprint(body, r.inputs),
  });
}

/** What a job's workflow input says of its request (a create's, or a batch's request: ../batches/service.ts). */
export function jobRequestOf(body: CreateVideoBody, r: ResolvedVideoRequest) {
  return {
    model: r.model.id,
    backends: r.backends,
    prompt: body.prompt.trim(),
    params: r.params,
    ...(body.seed !== undefined ? { seed: body.seed } : {}),
    ...(r.parameters !== undefined ? { parameters: r.parameters } : {}),
    ...(r.inputs.generate_audio !== undefined ? { generate_audio: r.inputs.generate_audio } : {}),
    ...(r.inputs.negative_prompt !== undefined ? { negative_prompt: r.inputs.negative_prompt } : {}),
  };
}

export class VideoJobsService {
  private readonly clock: DatabaseClock;
  constructor(private readonly deps: VideoJobsDeps) {
    this.clock = deps.clock ?? new DatabaseClock(deps.db, deps.hostNow ? { hostNow: deps.hostNow } : {});
  }

  /**
   * Validates a request against the catalog; every rejection names its parameter. A retired model id
   * resolves to its replacement: the job runs, is priced and is reported as the replacement.
   */
  resolveRequest(principal: ApiKeyPrincipal, body: CreateVideoBody) {
    const modelId = body.model ?? defaultVideoModelId();
    const model = findVideoModel(modelId);
    if (!model) throw notFound('model_not_found', `model "${modelId}" does not exist; see GET /v2/models`, 'model');
    requireKeyAllowsModel(principal, model.id);
    const params: VideoParams = {
      durationSeconds: body.durationSeconds ?? model.default_params.durationSeconds,
      resolution: (body.resolution ?? model.default_params.resolution) as Resolution,
      aspectRatio: (body.aspectRatio ?? model.default_params.aspectRatio) as AspectRatio,
      n: body.n ?? model.default_params.n,
    };
    if (!model.durations_seconds.includes(params.durationSeconds)) {
      throw invalidParam('durationSeconds', `durationSeconds must be one of ${model.durations_seconds.join(', ')} for model ${model.id}`);
    }
    if (!model.resolutions.includes(params.resolution)) {
      throw invalidParam('resolution', `resolution must be one of ${model.resolutions.join(', ')} for model ${model.id}`);
    }
    if (!model.aspect_ratios.includes(params.aspectRatio)) {
      throw invalidParam('aspectRatio', `aspectRatio must be one of ${model.aspect_ratios.join(', ')} for model ${model.id}`);
    }
    if (params.n > model.max_n) throw invalidParam('n', `n must be between 1 and ${model.max_n} for model ${model.id}`);
    if (body.seed !== undefined && !model.supports_seed) throw invalidParam('seed', `model ${model.id} does not support seed`);
    const configured = this.deps.backends;
    const backends = videoBackendsFor(model, configured, params);
    if (backends.length === 0) {
      if (videoBackendsFor(model, configured).length > 0) {
        throw invalidParam('resolution', `no configured backend of model ${model.id} serves resolution ${params.resolution}`);
      }
      throw new ApiError(503, 'provider_error', 'provider_not_configured', `no video provider is configured for model ${model.id}`);
    }
    // The backends that may run the job, in order; the simulator only ever alone.
    const backend = backends[0]!;
    const parameters = model.accepts_parameters ? body.parameters : undefined;
    // The parameters the backend reads (the simulator's `simulate`), checked here so a bad one is a 400, not a failed job.
    const reads = videoDescriptorOf(backend).capabilities.parameters;
    if (reads && parameters?.[reads.name] !== undefined) {
      const at = `parameters.${reads.name}`;
      const parsed = reads.schema.safeParse(parameters[reads.name]);
      if (!parsed.success) throw fromZodError(parsed.error, `${at}.`);
      const problem = reads.problem(parsed.data, params.n);
      if (problem) throw invalidParam(`${at}.${problem.field}`, `${at}.${problem.field} ${problem.message}`);
    }
    const inputs = resolveVideoRequestInputs(model, body);
    const estimated_cost_micro_eur = estimateCostMicroEur(model, params, { generateAudio: inputs.generate_audio });
    return { model, params, backend, backends, parameters, inputs, estimated_cost_micro_eur };
  }

  /**
   * Creates a job: an Idempotency-Key retry is answered from the job's record; a create its charge would
   * refuse is refused before anything is written; otherwise the attempt's images are kept and its
   * workflow started, which charges the job.
   */
  async create(principal: ApiKeyPrincipal, body: CreateVideoBody, idempotencyKey: string | undefined): Promise<VideoJobState> {
    const r = this.resolveRequest(principal, body);
    const job_id = idempotencyKey ? jobIdForIdempotencyKey(principal.workspace_id, idempotencyKey) : randomUUID();
    const fingerprint = requestFingerprintOf(body, r);
    // The create's own waits are measured on this host's clock, from now; what PostgreSQL compares is in `input`.
    const deadline_ms = Date.now() + this.createTimeoutMs();
    const input = await this.workflowInput(principal, body, r, job_id, fingerprint, idempotencyKey !== undefined);
    if (idempotencyKey) {
      const answer = await this.answerFromRecord(job_id, fingerprint);
      if (answer) return answer;
    }
    // A create its charge would refuse now is refused before anything is written (no images, no workflow).
    const foreseen = await foreseeRefusal(this.deps.db, {
      workspaceId: principal.workspace_id,
      apiKeyId: principal.key_id,
      estimated_cost_micro_eur: r.estimated_cost_micro_eur,
    });
    if (foreseen)
      return this.refuseForeseen(foreseen, {
        job_id,
        attempt_id: input.attempt_id!,
        workspace_id: principal.workspace_id,
        fingerprint,
        keyed: idempotencyKey !== undefined,
      });
    // The images stay with the attempt, out of workflow history: the submit activity reads those of the
    // attempt that charged the job. Unless this attempt charged it, its images go when it answers.
    const attempt_of = { input, fingerprint, keyed: idempotencyKey !== undefined, deadline_ms };
    if (!r.inputs.image) return this.startAttempt(principal, r.model.id, attempt_of);
    const attempt = { job_id, attempt_id: input.attempt_id! };
    await this.keepImages(principal, { image: r.inputs.image, last_frame: r.inputs.last_frame }, attempt);
    try {
      return await this.startAttempt(principal, r.model.id, attempt_of);
    } finally {
      // Kept when this attempt charged the job (the statement checks): refused (402, 429, 503), joined to
      // another attempt's job, or failed, they go. A failure to delete is left to the reconciler's sweep.
      await discardVideoJobInputs(this.deps.db, this.deps.storage, attempt).catch(() => {});
    }
  }

  /**
   * The workflow's input for a new attempt at the job: its request as resolved, its deadlines from now
   * by PostgreSQL's clock, which the charge checks them against and the reconciler compares with.
   */
  private async workflowInput(
    principal: ApiKeyPrincipal,
    body: CreateVideoBody,
    r: ResolvedVideoRequest,
    job_id: string,
    fingerprint: Fingerprint,
    keyed: boolean,
  ): Promise<VideoJobInput> {
    const now_ms = await this.clock.nowMs();
    return {
      job_id,
      workspace_id: principal.workspace_id,
      ...jobRequestOf(body, r),
      ...(r.inputs.image ? { has_image: true } : {}),
      ...(r.inputs.last_frame ? { has_last_frame: true } : {}),
      estimated_cost_micro_eur: r.estimated_cost_micro_eur,
      created_at_ms: now_ms,
      request_fingerprint: fingerprint.current,
      deadline_at_ms: now_ms + this.deps.job_timeout_ms,
      attempt_id: randomUUID(),
      accept_by_ms: now_ms + acceptWindowMs(this.createTimeoutMs()),
      sticky_refusal: keyed,
      api_key_id: principal.key_id,
    };
  }

  /**
   * A retry with an Idempotency-Key answers from the job's record once the job exists (or its refusal
   * was recorded); Temporal is not asked to start anything (its history may be gone after retention, and
   * a new run must never generate again). Null when the key names no job yet.
   */
  private async answerFromRecord(job_id: string, fingerprint: Fingerprint): Promise<VideoJobState | null> {
    const { record, refusal: refused } = await readKeyedVideoJob(this.deps.db, job_id);
    if (record?.deleted) {
      throw new ApiError(
        409,
        'idempotency_error',
        'idempotency_key_job_deleted',
        'this Idempotency-Key names a job that was deleted; use a new key for a new job',
      );
    }
    if (record) return this.checkedReplay(record, fingerprint);
    if (refused) {
      if (!fingerprint.matches(refused.request_fingerprint)) throw keyReused();
      throw refused.reason === 'key_spend_limit_exceeded' ? keySpendLimitExceeded() : insufficientCredits();
    }
    return null;
  }

  /** Keeps the attempt's images in storage; storage refusing them answers 503 with nothing started or charged. */
  private async keepImages(
    principal: ApiKeyPrincipal,
    images: VideoJobInputs,
    attempt: { job_id: string; attempt_id: string },
  ): Promise<void> {
    try {
      await storeVideoJobInputs(this.deps.db, this.deps.storage, { ...attempt, workspace_id: principal.workspace_id }, images);
    } catch (err) {
      if (isDependencyDown(err)) throw err;
      // Storage refused the images (full, unreachable): nothing was started or charged.
      await discardVideoJobInputs(this.deps.db, this.deps.storage, attempt).catch(() => {});
      throw new ApiError(
        503,
        'api_error',
        'storage_unavailable',
        `the images could not be kept (${(err as Error).message}); nothing was charged`,
        null,
        { 'Retry-After': String(RETRY_AFTER_S) },
      );
    }
  }

  /**
   * The answer to a create refused before its workflow started. With an Idempotency-Key, a refusal for
   * credits or the key's spend limit is recorded for good, as the charge records it (the key stays
   * refused), unless another attempt of the key charged the job meanwhile: that job is the answer.
   */
  private async refuseForeseen(
    reason: ForeseenRefusal,
    a: { job_id: string; attempt_id: string; workspace_id: string; fingerprint: Fingerprint; keyed: boolean },
  ): Promise<VideoJobState> {
    if (reason === 'payment_required') throw paymentRequired(await owedBy(this.deps.db, a.workspace_id));
    if (reason === 'too_many_pending_jobs') throw tooManyPendingJobs();
    if (a.keyed) {
      const recorded = await recordForeseenRefusal(this.deps.db, {
        jobId: a.job_id,
        attemptId: a.attempt_id,
        workspaceId: a.workspace_id,
        fingerprint: a.fingerprint.current,
        reason,
      });
      if (!recorded) return this.existingFor(a.workspace_id, a.job_id, a.fingerprint);
    }
    throw reason === 'key_spend_limit_exceeded' ? keySpendLimitExceeded() : insufficientCredits();
  }

  /** Starts (or joins) the job's workflow for this attempt and waits for its charge step's answer. */
  private async startAttempt(principal: ApiKeyPrincipal, model: string, attempt: AttemptOf): Promise<VideoJobState> {
    const { input, fingerprint, keyed, deadline_ms } = attempt;
    const job_id = input.job_id;
    let state: VideoJobState;
    for (let tries = 1; ; tries++) {
      // A new operation per try: the SDK runs a WithStartWorkflowOperation once, and refuses it again.
      const startOp = new WithStartWorkflowOperation<typeof videoJobWorkflow>('videoJobWorkflow', {
        workflowId: videoJobWorkflowId(job_id),
        taskQueue: this.deps.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        // A closed run of this id was refused (an attempt not accepted in time): a retry with the same
        // Idempotency-Key starts a new attempt. An accepted job never gets here (its record answers above),
        // and a run that races one is refused by the charge as a duplicate.
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        typedSearchAttributes: videoJobStartSearchAttributes(principal.workspace_id, model),
      });
      try {
        state = await this.deps.temporal.connection.withDeadline(deadline_ms, () =>
          this.deps.temporal.workflow.executeUpdateWithStart(acceptJobUpdate, { startWorkflowOperation: startOp }),
        );
        break;
      } catch (err) {
        const failure = err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure ? err.cause : null;
        if (failure?.type === INSUFFICIENT_CREDITS) throw insufficientCredits();
        if (failure?.type === KEY_SPEND_LIMIT_EXCEEDED) throw keySpendLimitExceeded();
        if (failure?.type === TOO_MANY_PENDING_JOBS) throw tooManyPendingJobs();
        if (failure?.type === CHARGED_BY_ANOTHER_ATTEMPT) return this.existingFor(principal.workspace_id, job_id, fingerprint);
        if (failure?.type === NOT_ACCEPTED_IN_TIME) {
          // A run of an earlier attempt with this key (refused: too late) answered. Once it has closed, this
          // attempt gets a run of its own: try once more within the time left.
          const refused_attempt = (failure.details?.[0] as { attempt_id?: string | null } | undefined)?.attempt_id;
          if (tries === 1 && refused_attempt && refused_attempt !== input.attempt_id && (await this.closed(job_id, deadline_ms))) continue;
          throw notAccepted(keyed);
        }
        // No answer (no worker in time, Temporal unreachable, anything else): this attempt's fate is
        // unknown, so decide it now, for good, before answering. Our own deadline passing is "not
        // confirmed in time"; failing before it is a dependency down.
        return this.giveUp(attempt, Date.now() < deadline_ms - 100 ? err : undefined);
      }
    }
    return this.checkedReplay(state, fingerprint);
  }

  /**
   * The API stops waiting for an attempt: it is either found charged (then accepted: 202) or refused for
   * good under the job's lock, so a non-2xx answer never comes with a charge, now or later. If even that
   * cannot be recorded (PostgreSQL down), the answer waits until the attempt's acceptance deadline (plus a
   * margin for the clock offset's error) has passed, after which the charge refuses itself. That wait is
   * relative, on this host's clock: the acceptance window from when the create began.
   */
  private async giveUp({ input, fingerprint, keyed, deadline_ms }: AttemptOf, cause: unknown | undefined): Promise<VideoJobState> {
    const attempt = {
      jobId: input.job_id,
      attemptId: input.attempt_id!,
      workspaceId: input.workspace_id,
      fingerprint: input.request_fingerprint,
    };
    const timeout_ms = this.createTimeoutMs();
    const settle_by_ms = deadline_ms - timeout_ms + acceptWindowMs(timeout_ms) + CLOCK_SKEW_MARGIN_MS;
    for (;;) {
      try {
        const decided = await decideAcceptance(this.deps.db, attempt);
        if (decided.decision === 'refused') throw notAccepted(keyed, cause);
        return this.existingFor(input.workspace_id, input.job_id, fingerprint);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        if (Date.now() >= settle_by_ms) throw notAccepted(keyed, err);
        await new Promise((r) => setTimeout(r, Math.min(1_000, Math.max(settle_by_ms - Date.now(), 0))));
      }
    }
  }

  private createTimeoutMs(): number {
    return this.deps.create_timeout_ms ?? CREATE_TIMEOUT_MS;
  }

  /** Waits (until `deadline_ms` at most) for the job's current workflow run to close; whether it did. */
  private async closed(job_id: string, deadline_ms: number): Promise<boolean> {
    try {
      const handle = this.deps.temporal.workflow.getHandle(videoJobWorkflowId(job_id));
      await this.deps.temporal.connection.withDeadline(deadline_ms, () => handle.result());
      return true;
    } catch (err) {
      return err instanceof WorkflowFailedError;
    }
  }

  /** The job another attempt with this Idempotency-Key (or this one, decided late) created. */
  private async existingFor(workspace_id: string, job_id: string, fingerprint: Fingerprint): Promise<VideoJobState> {
    const record = await this.fromDatabase(job_id);
    if (!record || record.workspace_id !== workspace_id) throw new Error(`invariant: job ${job_id} is charged but has no record`);
    return this.checkedReplay(record, fingerprint);
  }

  /** The job an Idempotency-Key names, if the request matches the one that created it. */
  private checkedReplay(state: VideoJobState, fingerprint: Fingerprint): VideoJobState {
    if (!fingerprint.matches(state.request_fingerprint)) throw keyReused();
    if (state.status === 'rejected') throw insufficientCredits();
    return state;
  }

  /**
   * The job as its workflow last changed it, read from its record: one row read, whatever the number of
   * pending jobs, and never a workflow query (which costs a worker a replay of the job's history when the
   * workflow is not in its cache). The record is never behind the workflow: every change a query of the
   * workflow could show (accepted and charged, the backend that took the submission, the provider's
   * progress and queue position, the settlement's status, cost, refund, videos and error) is committed
   * to the row by the activity that makes it, before the workflow's own state changes. An id that is not
   * the caller's is a 404.
   */
  async get(principal: ApiKeyPrincipal, job_id: string): Promise<VideoJobState> {
    return this.found(principal, job_id, isUuid(job_id) ? await readVideoJob(this.deps.db, job_id) : null);
  }

  /**
   * The job as `record` has it, read already (a status read reads it once the read gate admits it:
   * readingByPathId); a 404 when there is none, it was deleted, or it is not the caller's.
   */
  found(principal: ApiKeyPrincipal, job_id: string, record: VideoJobRecord | null): VideoJobState {
    if (!record || record.deleted || record.workspace_id !== principal.workspace_id)
      throw notFound('job_not_found', `no video generation job ${job_id}`, 'id');
    return record;
  }

  /**
   * For operators: the job's record beside its workflow's own answer to the jobState query (a workflow
   * task on a worker, a replay of the job's history when the workflow is not in its cache). Null state
   * when the workflow has closed past retention, does not answer in time, or no worker runs.
   */
  async inspect(
    job_id: string,
  ): Promise<{ record: VideoJobState | null; workflow: { state: VideoJobState | null; failure: string | null } }> {
    const record = isUuid(job_id) ? await this.fromDatabase(job_id) : null;
    if (!record) return { record: null, workflow: { state: null, failure: null } };
    try {
      const handle = this.deps.temporal.workflow.getHandle(videoJobWorkflowId(job_id));
      const state = await this.deps.temporal.connection.withDeadline(Date.now() + INSPECT_QUERY_TIMEOUT_MS, () =>
        handle.query(jobStateQuery),
      );
      return { record, workflow: { state, failure: null } };
    } catch (err) {
      return { record, workflow: { state: null, failure: (err as Error).message.slice(0, 500) } };
    }
  }

  /** The job's record, unless it was deleted (a deleted job does not exist for the API). */
  private async fromDatabase(job_id: string): Promise<VideoJobState | null> {
    const record = await readVideoJob(this.deps.db, job_id);
    return record && !record.deleted ? record : null;
  }
}

const keyReused = () =>
  new ApiError(409, 'idempotency_error', 'idempotency_key_reused', 'this Idempotency-Key was already used with different parameters', null);

/** A create not accepted in time: nothing was charged, for good; a retry (with the same key) is a new attempt. */
function notAccepted(keyed: boolean, cause?: unknown): ApiError {
  const retry = keyed ? 'retry with the same Idempotency-Key' : 'retry (send an Idempotency-Key to make retries safe)';
  const down = cause !== undefined && isDependencyDown(cause);
  return new ApiError(
    503,
    'api_error',
    down ? 'service_unavailable' : 'temporarily_unavailable',
    `the job could not be accepted in time${down ? ' (a service it needs is unreachable)' : ''}; nothing was charged for it, now or later: ${retry}`,
    null,
    { 'Retry-After': String(RETRY_AFTER_S) },
  );
}

/** A job takes seconds to minutes: the Retry-After of a create refused for the pending limit. */
const PENDING_JOBS_RETRY_AFTER_S = 10;

function tooManyPendingJobs(): ApiError {
  return new ApiError(
    429,
    'rate_limit_error',
    'too_many_pending_jobs',
    'this workspace already has the most pending video jobs it may have at once; nothing was charged: retry when one has finished',
    null,
    { 'Retry-After': String(PENDING_JOBS_RETRY_AFTER_S) },
  );
}

function insufficientCredits(): ApiError {
  return new ApiError(
    402,
    'insufficient_credits_error',
    'insufficient_credits',
    'the workspace balance does not cover the estimated cost of this job; nothing was charged',
  );
}
