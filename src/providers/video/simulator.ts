// The simulated video provider, so the service runs and is tested with no provider account. It behaves as a remote provider would: accepted
// operations are stored in Postgres (its own schema), so they survive a crash and restart of the
// service, and an operation's delay runs from its submission, not from the last restart. It accepts every
// input a job can carry and records it in the operation (audio, negative prompt, each image's type, size
// and SHA-256), so tests can see what reached the provider.
import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import DataLoader from 'dataloader';
import { z } from 'zod';
import { text } from '../../zod-text.js';
import type { Db } from '../../db/pool.js';
import { projectPath } from '../../paths.js';
import { prepared } from '../../db/pool.js';
import { COUNT_PROVIDER_CALL, countProviderCallSql } from '../simulator-usage.js';
import { MESSAGE_CHARS_MAX } from '../http-body.js';
import { boolish, videoProvider } from '../descriptor.js';
import {
  ProviderError,
  type CancelAnswer,
  type InputImage,
  type VideoOperationStatus,
  type VideoOutputRef,
  type VideoProvider,
  type VideoSubmission,
} from './types.js';

export const SIMULATOR_DEFAULT_DELAY_MS = 2_000;
export const SIMULATOR_DELAY_MS_MAX = 60 * 60_000;

/** `parameters.simulate` of a request to a model the simulator serves with its own behaviour. */
export const SimulateSchema = z
  .object({
    outcome: z.enum(['succeed', 'fail']).default('succeed'),
    videos: z.number().int().min(0).max(4).optional(),
    delay_ms: z.number().int().min(0).max(SIMULATOR_DELAY_MS_MAX).default(SIMULATOR_DEFAULT_DELAY_MS),
    message: text({ chars_max: MESSAGE_CHARS_MAX }).optional(),
    /** Whether the simulated provider bills an operation cancelled while it runs (it never bills one cancelled in time by default). */
    billed_on_cancel: z.boolean().default(false),
  })
  .strict();
export type Simulate = z.infer<typeof SimulateSchema>;

const ASSETS_DIR = projectPath('assets', 'sim-video');
/** The clips the simulator has; a model of the operator's catalog with other durations gets the nearest. */
const CLIP_SECONDS = [4, 6, 8];
const clipSecondsFor = (seconds: number) => CLIP_SECONDS.reduce((best, s) => (Math.abs(s - seconds) < Math.abs(best - seconds) ? s : best));

/** What the simulator keeps of an image it was given: enough to tell which bytes arrived. */
interface ImageRecord {
  mime_type: string;
  bytes: number;
  sha256: string;
}

interface StoredRequest {
  n: number;
  durationSeconds: number;
  resolution: string;
  aspectRatio: string;
  simulate: Simulate;
  generate_audio?: boolean;
  negative_prompt?: string;
  image?: ImageRecord;
  last_frame?: ImageRecord;
}

const imageRecord = (image: InputImage): ImageRecord => ({
  mime_type: image.mime_type,
  bytes: image.bytes.length,
  sha256: createHash('sha256').update(image.bytes).digest('hex'),
});

/** Stores a submitted operation ($1-$4) and counts the call ($5) in the same statement: one round trip per submit. */
const INSERT_OPERATION_COUNTED = prepared(
  'simulator-insert-operation-counted',
  `WITH counted AS (${countProviderCallSql('$5')})
   INSERT INTO simulator.video_operations (id, request_id, model, request) VALUES ($1, $2, $3, $4)
   ON CONFLICT (request_id) DO UPDATE SET request_id = EXCLUDED.request_id RETURNING id`,
);
const OPERATION_COLUMNS =
  `id, request, (extract(epoch FROM clock_timestamp() - submitted_at) * 1000)::float8 AS elapsed_ms, ` +
  `cancelled_at IS NOT NULL AS cancelled`;
const LOAD = prepared('simulator-load-operation', `SELECT ${OPERATION_COLUMNS} FROM simulator.video_operations WHERE id = $1`);
/** The operations of many polls ($1), each counted as a call (of operation $2) in the same statement. */
const LOAD_POLLED = prepared(
  'simulator-load-polled-operations',
  `WITH counted AS (${countProviderCallSql('$2', '$3')})
   SELECT ${OPERATION_COLUMNS} FROM simulator.video_operations WHERE id = ANY($1::text[])`,
);
/** The most polls answered by one query. */
const POLL_BATCH_MAX = 500;

interface StoredOperation {
  id: string;
  request: StoredRequest;
  elapsed_ms: number;
  cancelled: boolean;
}

export class SimulatedVideoProvider implements VideoProvider {
  readonly name = 'simulator';
  /**
   * Polls made together (a poller's claim of due jobs) are answered by one query, as a provider's batch
   * endpoint would: many pending jobs cost a query per round of polls, not one each.
   */
  private readonly polled: DataLoader<string, StoredOperation | undefined>;

  constructor(
    private readonly db: Db,
    /** Whether the model's requests may steer the outcome (sim-video-1); reference models always succeed. */
    private readonly honoursSimulate: (model: string) => boolean,
  ) {
    this.polled = new DataLoader(
      async (ids) => {
        const r = await db.query<StoredOperation>({ ...LOAD_POLLED, values: [ids, 'video_poll', ids.length] });
        const byId = new Map(r.rows.map((row) => [row.id, row]));
        return ids.map((id) => byId.get(id));
      },
      { cache: false, maxBatchSize: POLL_BATCH_MAX },
    );
  }

  async submit(req: VideoSubmission): Promise<{ operation_id: string }> {
    // Every call received is counted: a refused one on its own, an accepted one with its operation.
    const raw = this.honoursSimulate(req.model) ? (req.parameters?.['simulate'] ?? {}) : {};
    const parsed = SimulateSchema.safeParse(raw);
    if (!parsed.success) {
      await this.db.query({ ...COUNT_PROVIDER_CALL, values: ['video_submit'] });
      throw new ProviderError(`invalid simulate parameters: ${parsed.error.issues[0]?.message}`, {
        code: 'invalid_request',
        retryable: false,
      });
    }
    const stored: StoredRequest = {
      n: req.params.n,
      durationSeconds: req.params.durationSeconds,
      resolution: req.params.resolution,
      aspectRatio: req.params.aspectRatio,
      simulate: parsed.data,
      ...(req.generate_audio !== undefined ? { generate_audio: req.generate_audio } : {}),
      ...(req.negative_prompt !== undefined ? { negative_prompt: req.negative_prompt } : {}),
      ...(req.image ? { image: imageRecord(req.image) } : {}),
      ...(req.last_frame ? { last_frame: imageRecord(req.last_frame) } : {}),
    };
    const r = await this.db.query<{ id: string }>({
      ...INSERT_OPERATION_COUNTED,
      values: [`simop_${randomUUID()}`, req.request_id, req.model, JSON.stringify(stored), 'video_submit'],
    });
    return { operation_id: r.rows[0]!.id };
  }

  async poll(operation_id: string): Promise<VideoOperationStatus> {
    const op = await this.polled.load(operation_id);
    if (!op) throw new ProviderError(`operation ${operation_id} not found`, { code: 'not_found', retryable: false });
    const s = op.request.simulate;
    if (op.cancelled) return { state: 'failed', code: 'cancelled', message: 'the operation was cancelled' };
    if (op.elapsed_ms < s.delay_ms) return { state: 'running' };
    if (s.outcome === 'fail')
      return { state: 'failed', code: 'generation_failed', message: s.message ?? 'the simulated provider failed the generation' };
    const k = Math.min(s.videos ?? op.request.n, op.request.n);
    const outputs: VideoOutputRef[] = Array.from({ length: k }, (_, i) => ({ ref: String(i), content_type: 'video/mp4' }));
    return { state: 'succeeded', outputs };
  }

  /**
   * Cancels a running operation: its polls then answer failed (code cancelled); a finished one stays
   * finished. The simulated provider bills a cancelled operation only when `simulate.billed_on_cancel`.
   */
  async cancel(operation_id: string): Promise<CancelAnswer> {
    await this.db.query({ ...COUNT_PROVIDER_CALL, values: ['video_cancel'] });
    const op = await this.load(operation_id);
    const finished = op.elapsed_ms >= op.request.simulate.delay_ms;
    if (!finished)
      await this.db.query('UPDATE simulator.video_operations SET cancelled_at = clock_timestamp() WHERE id = $1 AND cancelled_at IS NULL', [
        operation_id,
      ]);
    // Billed: every video of the operation (one unit each); charged only when the cancel stopped it running.
    const billed = op.request.simulate.billed_on_cancel ?? false;
    const units = billed ? op.request.n : 0;
    return {
      billed: billed && !finished,
      billed_units: units,
      ended_units: finished ? units : 0,
      answer: `${finished ? 'the operation had finished' : 'cancelled'}; ${billed ? 'billed' : 'not billed'} by the simulated provider`,
    };
  }

  async fetchOutput(operation_id: string, output: VideoOutputRef): Promise<Buffer> {
    const op = await this.load(operation_id);
    const index = Number(output.ref);
    if (!Number.isInteger(index) || index < 0 || index >= op.request.n)
      throw new ProviderError(`no output ${output.ref}`, { code: 'not_found', retryable: false });
    const aspect = op.request.aspectRatio.replace(':', 'x');
    return fs.readFile(path.join(ASSETS_DIR, `${aspect}-${clipSecondsFor(op.request.durationSeconds)}s.mp4`));
  }

  private async load(operation_id: string): Promise<StoredOperation> {
    const r = await this.db.query<StoredOperation>({ ...LOAD, values: [operation_id] });
    if (!r.rows[0]) throw new ProviderError(`operation ${operation_id} not found`, { code: 'not_found', retryable: false });
    return r.rows[0];
  }
}

/** The simulator as a video backend: on by SIMULATOR, which defaults to on outside production. */
export const simulatorVideoDescriptor = videoProvider({
  kind: 'video',
  name: 'simulator',
  env: { SIMULATOR: boolish.optional() },
  settings: (e, { production }) => ((e.SIMULATOR ?? !production) ? {} : null),
  build: (_settings, { db, catalog }) => new SimulatedVideoProvider(db, (model) => catalog.acceptsParameters(model)),
  capabilities: {
    callbacks: false,
    cancel_bills: 'as_requested',
    parameters: {
      name: 'simulate',
      schema: SimulateSchema,
      problem: (value, n) => {
        const videos = (value as Simulate).videos;
        return videos !== undefined && videos > n ? { field: 'videos', message: `must be at most n (${n})` } : null;
      },
    },
    memory_held: [],
  },
});
