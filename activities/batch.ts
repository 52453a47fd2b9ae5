// Activities of the batch workflow: thin adapters of the batch's steps (src/batches/) to the worker's
// dependencies. Each is idempotent, so Temporal may run any of them again after a crash.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import type { Storage } from '../src/storage/local.js';
import type { VoiceProviderSet } from '../src/providers/voice/types.js';
import { stopBatch, type BatchEnding } from '../src/batches/billing.js';
import { claimBatchItems, endVideoItem, StillRunning, type Claim, type ItemError } from '../src/batches/items.js';
import { runBatchSpeech, type BatchSpeechRequest } from '../src/batches/speech.js';
import { finishBatch } from '../src/batches/finish.js';
import type { JobEventContext } from '../src/webhooks/events.js';

export interface BatchActivityDeps {
  db: Db;
  storage: Storage;
  /** The configured voice providers: a speech request is spoken by the one that cloned its voice. */
  voiceProviders: VoiceProviderSet;
  logger: Logger;
  /** BATCH_CONCURRENCY: requests of a workspace's batches in flight at once. */
  batchConcurrency?: number;
  webhookEvents?: { context: JobEventContext; retry_initial_ms: number };
}

const DEFAULT_BATCH_CONCURRENCY = 10;

export function createBatchActivities(deps: BatchActivityDeps) {
  return {
    claimBatchItems: (a: { batch_id: string; seq: number; adopt_running?: boolean }): Promise<Claim> =>
      claimBatchItems(deps.db, a.batch_id, a.seq, deps.batchConcurrency ?? DEFAULT_BATCH_CONCURRENCY, a.adopt_running === true),

    async endBatchVideoItem(a: { batch_id: string; idx: number; refusal: ItemError | null }): Promise<void> {
      try {
        await endVideoItem(deps.db, a.batch_id, a.idx, a.refusal);
      } catch (err) {
        // Its job has not settled: tried again (the reconciler restarts a job whose workflow ended unsettled).
        if (err instanceof StillRunning) throw ApplicationFailure.retryable(err.message, 'StillRunning');
        throw err;
      }
    },

    async runBatchSpeech(a: { batch_id: string; idx: number }): Promise<string> {
      const r = await deps.db.query<{
        workspace_id: string;
        request_id: string;
        estimated_cost_micro_eur: number;
        request: BatchSpeechRequest;
      }>(
        `SELECT b.workspace_id, i.request_id, i.estimated_cost_micro_eur, i.request FROM batch_items i JOIN batches b ON b.id = i.batch_id
          WHERE i.batch_id = $1 AND i.idx = $2 AND i.kind = 'speech'`,
        [a.batch_id, a.idx],
      );
      const item = r.rows[0];
      if (!item) throw ApplicationFailure.nonRetryable(`batch ${a.batch_id} has no speech request ${a.idx}`);
      const outcome = await runBatchSpeech({ db: deps.db, providers: deps.voiceProviders, storage: deps.storage }, { ...item, ...a });
      deps.logger.info({ batch_id: a.batch_id, idx: a.idx, speech_request_id: item.request_id, outcome }, 'batch speech request ended');
      return outcome;
    },

    stopBatch: async (a: { batch_id: string; ending: BatchEnding }): Promise<boolean> => stopBatch(deps.db, a.batch_id, a.ending),

    async finishBatch(a: { batch_id: string }): Promise<void> {
      const dispatch = deps.webhookEvents
        ? {
            client: Context.current().client,
            taskQueue: Context.current().info.taskQueue,
            retry_initial_ms: deps.webhookEvents.retry_initial_ms,
          }
        : undefined;
      const ended = await finishBatch(deps.db, a.batch_id, dispatch);
      deps.logger.info({ batch_id: a.batch_id, ended }, 'batch finished');
    },
  };
}

export type BatchActivities = ReturnType<typeof createBatchActivities>;
