// Video jobs: validation against the catalog, then one Temporal workflow per job started with
// update-with-start (early return): the workflow's own charge step decides the HTTP answer.
import { createHash, randomUUID } from 'node:crypto';
import {
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowUpdateFailedError,
  type Client,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../db/pool.js';
import { uuidForKey } from '../ids.js';
import {
  defaultVideoModelId,
  estimateCostMicroEur,
  findVideoModel,
  videoBackendFor,
  type AspectRatio,
  type Resolution,
  type VideoParams,
} from '../catalog.js';
import { SimulateSchema } from '../providers/video/simulator.js';
import { ApiError, fromZodError, invalidParam, notFound } from '../http/errors.js';
import type { CreateVideoBody } from '../http/schemas.js';
import { keyAllowsModel, type ApiKeyPrincipal } from './workspaces.js';
import { inputsFingerprint, resolveVideoRequestInputs } from './video-request-inputs.js';
import { storeVideoJobInputs } from './video-job-inputs.js';
import {
  acceptJobUpdate,
  INSUFFICIENT_CREDITS,
  jobStateQuery,
  JOB_STATUS_SA,
  VIDEO_MODEL_SA,
  videoJobWorkflowId,
  WORKSPACE_ID_SA,
  type VideoJobInput,
  type VideoJobState,
} from '../../workflows/messages.js';
import type { videoJobWorkflow } from '../../workflows/video-job.js';

export interface VideoJobsDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
  simulator: boolean;
  /** Vertex AI is configured: it serves the reference family. */
  vertex?: boolean;
  poll_interval_ms: number;
  poll_max_interval_ms: number;
  job_timeout_ms: number;
  max_polls_per_run?: number;
  /** How long a create waits for the workflow's charge step before answering 503. */
  create_timeout_ms?: number;
}

/** Time a status request waits for the workflow's answer before reading the job from Postgres. */
const QUERY_TIMEOUT_MS = 5_000;
/** A create waits this long for the charge step (a worker must be running) before answering 503. */
const CREATE_TIMEOUT_MS = 30_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isUuid(s: string): boolean {
  return UUID.test(s);
}

/** A job id derived from (workspace, Idempotency-Key): the same key from the same workspace is the same job. */
export function jobIdForIdempotencyKey(workspaceId: string, key: string): string {
  return uuidForKey('video-job', workspaceId, key);
}

export class VideoJobsService {
  constructor(private readonly deps: VideoJobsDeps) {}

  /**
   * Validates a request against the catalog; every rejection names its parameter. A retired model id
   * resolves to its replacement: the job runs, is priced and is reported as the replacement.
   */
  resolveRequest(principal: ApiKeyPrincipal, body: CreateVideoBody) {
    const modelId = body.model ?? defaultVideoModelId();
    const model = findVideoModel(modelId);
    if (!model) throw notFound('model_not_found', `model "${modelId}" does not exist; see GET /v2/models`, 'model');
    if (!keyAllowsModel(principal, model.id)) {
      throw new ApiError(403, 'permission_error', 'model_not_permitted', `this API key is not permitted to use model "${model.id}"`, 'model');
    }
    const params: VideoParams = {
      durationSeconds: body.durationSeconds ?? model.default_params.durationSeconds,
      resolution: (body.resolution ?? model.default_params.resolution) as Resolution,
      aspectRatio: (body.aspectRatio ?? model.default_params.aspectRatio) as AspectRatio,
      n: body.n ?? model.default_params.n,
    };
    if (!model.durations_s.includes(params.durationSeconds)) {
      throw invalidParam('durationSeconds', `durationSeconds must be one of ${model.durations_s.join(', ')} for model ${model.id}`);
    }
    if (!model.resolutions.includes(params.resolution)) {
      throw invalidParam('resolution', `resolution must be one of ${model.resolutions.join(', ')} for model ${model.id}`);
    }
    if (!model.aspect_ratios.includes(params.aspectRatio)) {
      throw invalidParam('aspectRatio', `aspectRatio must be one of ${model.aspect_ratios.join(', ')} for model ${model.id}`);
    }
    if (params.n > model.max_n) throw invalidParam('n', `n must be between 1 and ${model.max_n} for model ${model.id}`);
    if (body.seed !== undefined && !model.supports_seed) throw invalidParam('seed', `model ${model.id} does not support seed`);
    const backend = videoBackendFor(model, { simulator: this.deps.simulator, vertex: this.deps.vertex ?? false });
    if (!backend) {
      throw new ApiError(503, 'provider_error', 'provider_not_configured', `no video provider is configured for model ${model.id}`);
    }
    const parameters = model.accepts_parameters ? body.parameters : undefined;
    if (backend === 'simulator' && model.accepts_parameters && parameters?.['simulate'] !== undefined) {
      const sim = SimulateSchema.safeParse(parameters['simulate']);
      if (!sim.success) throw fromZodError(sim.error, 'parameters.simulate.');
      if (sim.data.videos !== undefined && sim.data.videos > params.n) {
        throw invalidParam('parameters.simulate.videos', `parameters.simulate.videos must be at most n (${params.n})`);
      }
    }
    const inputs = resolveVideoRequestInputs(model, body);
    const estimated_cost_micro_eur = estimateCostMicroEur(model, params, { generateAudio: inputs.generate_audio });
    return { model, params, backend, parameters, inputs, estimated_cost_micro_eur };
  }

  async create(principal: ApiKeyPrincipal, body: CreateVideoBody, idempotencyKey: string | undefined): Promise<VideoJobState> {
    const r = this.resolveRequest(principal, body);
    const job_id = idempotencyKey ? jobIdForIdempotencyKey(principal.workspace_id, idempotencyKey) : randomUUID();
    const fingerprint = createHash('sha256')
      .update(JSON.stringify([r.model.id, body.prompt.trim(), r.params, body.seed ?? null, r.parameters ?? null, ...inputsFingerprint(body, r.inputs)]))
      .digest('hex');
    const now_ms = Date.now();
    const input: VideoJobInput = {
      job_id,
      workspace_id: principal.workspace_id,
      model: r.model.id,
      backend: r.backend,
      prompt: body.prompt.trim(),
      params: r.params,
      ...(body.seed !== undefined ? { seed: body.seed } : {}),
      ...(r.parameters !== undefined ? { parameters: r.parameters } : {}),
      ...(r.inputs.generate_audio !== undefined ? { generate_audio: r.inputs.generate_audio } : {}),
      ...(r.inputs.negative_prompt !== undefined ? { negative_prompt: r.inputs.negative_prompt } : {}),
      ...(r.inputs.image ? { has_image: true } : {}),
      ...(r.inputs.last_frame ? { has_last_frame: true } : {}),
      estimated_cost_micro_eur: r.estimated_cost_micro_eur,
      created_at_ms: now_ms,
      request_fingerprint: fingerprint,
      poll_interval_ms: this.deps.poll_interval_ms,
      poll_max_interval_ms: this.deps.poll_max_interval_ms,
      deadline_at_ms: now_ms + this.deps.job_timeout_ms,
      max_polls_per_run: this.deps.max_polls_per_run ?? 200,
    };
    if (idempotencyKey) {
      // A retry of a finished job answers from its final record; Temporal is not asked (its history
      // may be gone after retention, and a new run would generate again).
      const record = await this.fromDatabase(job_id);
      if (record && record.status !== 'pending') return this.checkedReplay(record, fingerprint);
    }
    // The images stay with the job, out of workflow history: the submit activity reads them by job id.
    if (r.inputs.image) {
      await storeVideoJobInputs(this.deps.db, { job_id, workspace_id: principal.workspace_id }, { image: r.inputs.image, last_frame: r.inputs.last_frame });
    }
    const workflowId = videoJobWorkflowId(job_id);
    const startOp = new WithStartWorkflowOperation<typeof videoJobWorkflow>('videoJobWorkflow', {
      workflowId,
      taskQueue: this.deps.taskQueue,
      args: [input],
      workflowIdConflictPolicy: 'USE_EXISTING',
      // A finished job's id is never reused: a retry of a finished request answers from the job.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: WORKSPACE_ID_SA, value: principal.workspace_id },
        { key: VIDEO_MODEL_SA, value: r.model.id },
        { key: JOB_STATUS_SA, value: 'charging' },
      ],
    });
    let state: VideoJobState;
    const timeout_ms = this.deps.create_timeout_ms ?? CREATE_TIMEOUT_MS;
    const started_ms = Date.now();
    try {
      state = await this.deps.temporal.connection.withDeadline(started_ms + timeout_ms, () =>
        this.deps.temporal.workflow.executeUpdateWithStart(acceptJobUpdate, { startWorkflowOperation: startOp }),
      );
    } catch (err) {
      if (Date.now() - started_ms >= timeout_ms - 100) {
        // No worker answered in time. The job may still be accepted (and charged) later: say which
        // one it is, so the client can look at it or retry with the same Idempotency-Key.
        throw new ApiError(
          503,
          'api_error',
          'temporarily_unavailable',
          `the job could not be confirmed within ${timeout_ms / 1000} s; it may still be accepted as job ${job_id}: ` +
            `check GET /v2/videos/generations/${job_id}, or retry with the same Idempotency-Key`,
          null,
          { 'Retry-After': '5', Location: `/v2/videos/generations/${job_id}` },
        );
      }
      if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === INSUFFICIENT_CREDITS) {
        throw insufficientCredits();
      }
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        // The job with this Idempotency-Key has already finished: answer from it.
        const existing = await this.findForRetry(principal.workspace_id, job_id);
        if (!existing) throw new ApiError(409, 'idempotency_error', 'idempotency_key_in_use', 'this Idempotency-Key was used for another request');
        state = existing;
      } else {
        throw err;
      }
    }
    return this.checkedReplay(state, fingerprint);
  }

  /** The job an Idempotency-Key names, if the request matches the one that created it. */
  private checkedReplay(state: VideoJobState, fingerprint: string): VideoJobState {
    if (state.request_fingerprint !== fingerprint) {
      throw new ApiError(409, 'idempotency_error', 'idempotency_key_reused', 'this Idempotency-Key was already used with different parameters', null);
    }
    if (state.status === 'rejected') throw insufficientCredits();
    return state;
  }

  /**
   * The job record. A finished job's record in PostgreSQL is final, so it answers directly; a pending
   * job's live state comes from querying its workflow (the record answers if the workflow cannot).
   * An id that is not the caller's never reaches Temporal.
   */
  async get(principal: ApiKeyPrincipal, job_id: string): Promise<VideoJobState> {
    const record = isUuid(job_id) ? await this.fromDatabase(job_id) : null;
    if (!record || record.workspace_id !== principal.workspace_id) throw notFound('job_not_found', `no video generation job ${job_id}`, 'id');
    if (record.status !== 'pending') return record;
    const live = await this.queryWorkflow(job_id);
    return live && live.workspace_id === record.workspace_id && live.status !== 'charging' && live.status !== 'rejected' ? live : record;
  }

  private async queryWorkflow(job_id: string): Promise<VideoJobState | null> {
    try {
      const handle = this.deps.temporal.workflow.getHandle(videoJobWorkflowId(job_id));
      return await this.deps.temporal.connection.withDeadline(Date.now() + QUERY_TIMEOUT_MS, () => handle.query(jobStateQuery));
    } catch {
      return null; // gone (retention), worker down or slow: the caller falls back to the record
    }
  }

  /** For an idempotent retry: the job as its workflow (or, once the workflow is gone, its record) knows it. */
  private async findForRetry(workspace_id: string, job_id: string): Promise<VideoJobState | null> {
    const state = (await this.queryWorkflow(job_id)) ?? (await this.fromDatabase(job_id));
    if (!state || state.workspace_id !== workspace_id || state.status === 'charging') return null;
    return state;
  }

  private async fromDatabase(job_id: string): Promise<VideoJobState | null> {
    const r = await this.deps.db.query(
      `SELECT id, workspace_id, status, model, params, request_fingerprint, estimated_cost_micro_eur, cost_micro_eur, refunded_micro_eur, videos, error,
              (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms,
              (extract(epoch FROM completed_at) * 1000)::bigint AS completed_at_ms
         FROM video_jobs WHERE id = $1`,
      [job_id],
    );
    const row = r.rows[0];
    if (!row) return null;
    return {
      job_id: row.id,
      workspace_id: row.workspace_id,
      status: row.status,
      model: row.model,
      params: row.params,
      created_at_ms: row.created_at_ms,
      completed_at_ms: row.completed_at_ms,
      estimated_cost_micro_eur: row.estimated_cost_micro_eur,
      cost_micro_eur: row.cost_micro_eur,
      refunded_micro_eur: row.refunded_micro_eur,
      videos: row.videos,
      error: row.error,
      request_fingerprint: row.request_fingerprint,
    };
  }
}

function insufficientCredits(): ApiError {
  return new ApiError(402, 'insufficient_credits_error', 'insufficient_credits', 'the workspace balance does not cover the estimated cost of this job; nothing was charged');
}

