// Batches: every request validated as it would be alone, one reservation of their estimates, then one
// workflow that runs them (workflows/batch.ts). Cancel stops what has not started; the files service
// (./files.ts) keeps input files and renders the output and error files.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Db } from '../db/pool.js';
import { ApiError, fromZodError, invalidParam, keySpendLimitExceeded, notFound } from '../errors.js';
import { isUuid } from '../ids.js';
import { microEurToEur } from '../money.js';
import { isDependencyDown, RETRY_AFTER_S } from '../dependency-errors.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import { jobRequestOf, requestFingerprintOf, type VideoJobsService } from '../video-jobs/service.js';
import { CreateVideoBody } from '../video-jobs/schemas.js';
import type { SpeechService, VoiceForSpeech } from '../voices/speech.js';
import { CreateSpeechBody } from '../voices/schemas.js';
import { paymentRequired } from '../billing/owed.js';
import { reserveBatch, stopBatch, failBatch, type NewBatchItem } from './billing.js';
import { listBatches, readBatch, type BatchRecord } from './records.js';
import { BatchRequestLine, COMPLETION_WINDOW_HOURS_MAX, type BatchEndpoint, type CreateBatchBody } from './schemas.js';
import type { FilesService } from './files.js';
import { batchWorkflowId, stopBatchSignal, type BatchWorkflowInput } from '../../workflows/messages.js';
import type { batchWorkflow } from '../../workflows/batch.js';

export interface BatchesDeps {
  db: Db;
  temporal: Client;
  taskQueue: string;
  jobs: VideoJobsService;
  speech: SpeechService;
  files: FilesService;
  job_timeout_ms: number;
}

/**
 * A line of another surface's batch in this one's terms (the /v1 surface maps OpenAI's url and body);
 * throws an ApiError for a line it cannot map.
 */
export type LineTranslation = (line: unknown) => unknown;

/** A request line as the caller wrote it, with where it came from (its 1-based line, its index). */
interface Line {
  index: number;
  value: unknown;
}

const START_TIMEOUT_MS = 10_000;

/** The one error of a bad request line: its 1-based line number in the message, its index in `param`. */
export function invalidBatchRequest(index: number, message: string): ApiError {
  return new ApiError(400, 'invalid_request_error', 'invalid_batch_request', `line ${index + 1}: ${message}`, `requests[${index}]`);
}

export class BatchesService {
  constructor(private readonly deps: BatchesDeps) {}

  /** Validates every request, reserves their estimates and starts the batch; 402 (nothing reserved) when the money does not cover them. */
  async create(principal: ApiKeyPrincipal, body: CreateBatchBody, translate: LineTranslation = (line) => line) {
    const lines = await this.linesOf(principal, body);
    const batch_id = randomUUID();
    const items = await this.validated(principal, lines, translate, body.endpoint);
    const hours = body.completion_window === undefined ? COMPLETION_WINDOW_HOURS_MAX : Number(body.completion_window.slice(0, -1));
    if (!(hours >= 1 && hours <= COMPLETION_WINDOW_HOURS_MAX))
      throw new ApiError(
        400,
        'invalid_request_error',
        'invalid_parameter',
        `completion_window must be 1h to ${COMPLETION_WINDOW_HOURS_MAX}h`,
        'completion_window',
      );
    const now_ms = (await this.deps.db.query<{ ms: number }>('SELECT (extract(epoch FROM now()) * 1000)::bigint AS ms')).rows[0]!.ms;
    const expires_at_ms = Number(now_ms) + hours * 3_600_000;
    const reserved = await reserveBatch(this.deps.db, {
      id: batch_id,
      workspaceId: principal.workspace_id,
      apiKeyId: principal.key_id,
      endpoint: body.endpoint ?? null,
      inputFileId: body.input_file_id ?? null,
      metadata: body.metadata ?? null,
      expires_at_ms,
      items,
    });
    if (!reserved.ok) {
      if (reserved.reason === 'payment_required') throw paymentRequired(reserved.owed_micro_eur);
      if (reserved.reason === 'key_spend_limit_exceeded') throw keySpendLimitExceeded();
      throw new ApiError(
        402,
        'insufficient_credits_error',
        'insufficient_credits',
        `the workspace balance does not cover the batch's estimated cost (${microEurToEur(reserved.reserved_micro_eur)} EUR); nothing was charged`,
      );
    }
    await this.start({ batch_id, workspace_id: principal.workspace_id, expires_at_ms, job_timeout_ms: this.deps.job_timeout_ms });
    return (await readBatch(this.deps.db, batch_id))!;
  }

  /** Starts the batch's workflow; one that cannot be started fails the batch, its reservation released in full (503). */
  private async start(input: BatchWorkflowInput): Promise<void> {
    try {
      await this.deps.temporal.connection.withDeadline(Date.now() + START_TIMEOUT_MS, () =>
        this.deps.temporal.workflow.start<typeof batchWorkflow>('batchWorkflow', {
          workflowId: batchWorkflowId(input.batch_id),
          taskQueue: this.deps.taskQueue,
          args: [input],
        }),
      );
    } catch (err) {
      await failBatch(this.deps.db, input.batch_id);
      throw new ApiError(
        503,
        'api_error',
        isDependencyDown(err) ? 'service_unavailable' : 'temporarily_unavailable',
        'the batch could not be started; its reservation was released in full: retry',
        null,
        { 'Retry-After': String(RETRY_AFTER_S) },
      );
    }
  }

  private async linesOf(principal: ApiKeyPrincipal, body: CreateBatchBody): Promise<Line[]> {
    if (body.requests) return body.requests.map((value, index) => ({ index, value }));
    if (body.endpoint === undefined)
      throw new ApiError(
        400,
        'invalid_request_error',
        'missing_parameter',
        'missing required parameter: endpoint (with input_file_id)',
        'endpoint',
      );
    const values = await this.deps.files.batchInputLines(principal, body.input_file_id!);
    return values.map((value, index) => ({ index, value }));
  }

  /** Each line validated as its own request would be; the first bad one is the 400 naming it. */
  private async validated(
    principal: ApiKeyPrincipal,
    lines: Line[],
    translate: LineTranslation,
    endpoint: BatchEndpoint | undefined,
  ): Promise<NewBatchItem[]> {
    const voices = new Map<string, VoiceForSpeech>();
    const customIds = new Set<string>();
    const items: NewBatchItem[] = [];
    for (const { index, value } of lines) {
      try {
        const line = BatchRequestLine.safeParse(translate(value));
        if (!line.success) throw fromZodError(line.error);
        if (endpoint !== undefined && line.data.url !== endpoint)
          throw new ApiError(400, 'invalid_request_error', 'invalid_parameter', `url must be ${endpoint}, the batch's endpoint`, 'url');
        if (line.data.custom_id !== undefined) {
          if (customIds.has(line.data.custom_id))
            throw new ApiError(
              400,
              'invalid_request_error',
              'invalid_parameter',
              `custom_id "${line.data.custom_id}" is used by an earlier request`,
              'custom_id',
            );
          customIds.add(line.data.custom_id);
        }
        const request_id = randomUUID();
        const validated =
          line.data.url === '/v2/videos/generations'
            ? this.videoRequest(principal, line.data.body)
            : await this.speechRequest(principal, line.data.body, voices);
        items.push({ idx: index, custom_id: line.data.custom_id ?? null, request_id, ...validated });
      } catch (err) {
        if (err instanceof ApiError && err.status < 500) throw invalidBatchRequest(index, err.message);
        throw err;
      }
    }
    return items;
  }

  private videoRequest(principal: ApiKeyPrincipal, raw: unknown): Pick<NewBatchItem, 'kind' | 'request' | 'estimated_cost_micro_eur'> {
    const parsed = CreateVideoBody.safeParse(raw);
    if (!parsed.success) throw fromZodError(parsed.error, 'body.');
    const body = parsed.data;
    if (body.image !== undefined || body.lastFrame !== undefined)
      throw new ApiError(
        400,
        'invalid_request_error',
        'invalid_parameter',
        'images are not taken in batches: create image-to-video jobs alone',
        'body.image',
      );
    const r = this.deps.jobs.resolveRequest(principal, body);
    const fingerprint = requestFingerprintOf(body, r);
    return {
      kind: 'video',
      estimated_cost_micro_eur: r.estimated_cost_micro_eur,
      request: {
        ...jobRequestOf(body, r),
        request_fingerprint: fingerprint.current,
        api_key_id: principal.key_id,
      },
    };
  }

  private async speechRequest(
    principal: ApiKeyPrincipal,
    raw: unknown,
    voices: Map<string, VoiceForSpeech>,
  ): Promise<Pick<NewBatchItem, 'kind' | 'request' | 'estimated_cost_micro_eur'>> {
    const parsed = CreateSpeechBody.safeParse(raw);
    if (!parsed.success) throw fromZodError(parsed.error, 'body.');
    if (parsed.data.stream_format !== undefined)
      throw invalidParam('body.stream_format', "a batch's speech is not streamed: leave out stream_format");
    const { cost_micro_eur, ...request } = await this.deps.speech.validateForBatch(principal, parsed.data, voices);
    return { kind: 'speech', estimated_cost_micro_eur: cost_micro_eur, request };
  }

  async get(principal: ApiKeyPrincipal, id: string): Promise<BatchRecord> {
    const b = isUuid(id) ? await readBatch(this.deps.db, id) : null;
    if (!b || b.workspace_id !== principal.workspace_id) throw notFound('batch_not_found', `no batch ${id}`, 'id');
    return b;
  }

  async list(
    principal: ApiKeyPrincipal,
    q: { limit: number; after?: string | undefined },
  ): Promise<{ batches: BatchRecord[]; has_more: boolean }> {
    if (q.after !== undefined) await this.get(principal, q.after);
    const rows = await listBatches(this.deps.db, principal.workspace_id, q.limit + 1, q.after);
    return { batches: rows.slice(0, q.limit), has_more: rows.length > q.limit };
  }

  /**
   * Stops the batch: requests not started fail (batch_cancelled), costing nothing; those running finish,
   * the batch `cancelling` until then (then what was not used is refunded). A batch that has ended: 409.
   */
  async cancel(principal: ApiKeyPrincipal, id: string): Promise<BatchRecord> {
    const before = await this.get(principal, id);
    if (!['validating', 'in_progress', 'cancelling'].includes(before.status))
      throw new ApiError(
        409,
        'invalid_request_error',
        'batch_not_cancellable',
        `the batch has ended (${before.status}); it can no longer be cancelled`,
      );
    await stopBatch(this.deps.db, id, 'cancelled');
    // The workflow sees the stop at its next claim anyway; the signal makes it end as soon as nothing runs.
    await this.deps.temporal.connection
      .withDeadline(Date.now() + START_TIMEOUT_MS, () => this.deps.temporal.workflow.getHandle(batchWorkflowId(id)).signal(stopBatchSignal))
      .catch(() => {});
    return (await readBatch(this.deps.db, id))!;
  }
}
