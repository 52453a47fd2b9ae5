// Activities of the video job workflow: the ledger, the provider and storage. Each is idempotent,
// so Temporal may retry any of them after a crash without double charging or double storing.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../src/db/pool.js';
import { chargeVideoJob, settleVideoJob, type ChargeResult, type Settlement, type SettlementResult, type VideoJobCharge } from '../src/billing/ledger.js';
import { ProviderError, MAX_VIDEO_OUTPUT_BYTES, type VideoGenerationRequest, type VideoOperationStatus, type VideoOutputRef, type VideoProvider } from '../src/providers/video/types.js';
import type { Storage } from '../src/storage/local.js';
import type { StoredVideo } from '../workflows/messages.js';

export interface VideoJobActivityDeps {
  db: Db;
  storage: Storage;
  videoProviders: ReadonlyMap<string, VideoProvider>;
}

function toFailure(err: unknown): unknown {
  if (err instanceof ProviderError) {
    return ApplicationFailure.create({
      type: 'ProviderError',
      message: err.message,
      nonRetryable: !err.opts.retryable,
      details: [{ code: err.opts.code }],
    });
  }
  return err;
}

export function createVideoJobActivities(deps: VideoJobActivityDeps) {
  const providerFor = (backend: string): VideoProvider => {
    const p = deps.videoProviders.get(backend);
    if (!p) {
      throw ApplicationFailure.create({ type: 'ProviderError', message: `video backend "${backend}" is not configured`, nonRetryable: true, details: [{ code: 'provider_not_configured' }] });
    }
    return p;
  };

  return {
    async chargeVideoJob(job: VideoJobCharge): Promise<ChargeResult> {
      return chargeVideoJob(deps.db, job);
    },

    async settleVideoJob(settlement: Settlement): Promise<SettlementResult> {
      return settleVideoJob(deps.db, settlement);
    },

    async submitVideoGeneration(input: { backend: string; request: VideoGenerationRequest }): Promise<{ operation_id: string }> {
      try {
        return await providerFor(input.backend).submit(input.request);
      } catch (err) {
        throw toFailure(err);
      }
    },

    async pollVideoGeneration(input: { backend: string; operation_id: string }): Promise<VideoOperationStatus> {
      try {
        return await providerFor(input.backend).poll(input.operation_id);
      } catch (err) {
        throw toFailure(err);
      }
    },

    /** Copies each output into our storage under a key derived from the job: a retry overwrites, never duplicates. */
    async storeVideoOutputs(input: { backend: string; job_id: string; operation_id: string; outputs: VideoOutputRef[] }): Promise<StoredVideo[]> {
      const provider = providerFor(input.backend);
      const stored: StoredVideo[] = [];
      for (const [i, output] of input.outputs.entries()) {
        Context.current().heartbeat(i);
        let body: Buffer;
        try {
          body = await provider.fetchOutput(input.operation_id, output);
        } catch (err) {
          throw toFailure(err);
        }
        if (body.length === 0 || body.length > MAX_VIDEO_OUTPUT_BYTES) {
          throw ApplicationFailure.create({ type: 'ProviderError', message: `output ${i} has ${body.length} bytes`, nonRetryable: true, details: [{ code: 'invalid_output' }] });
        }
        const storage_key = `videos/${input.job_id}/${i}.mp4`;
        await deps.storage.put(storage_key, body);
        stored.push({ storage_key, content_type: output.content_type, bytes: body.length });
      }
      return stored;
    },
  };
}

export type VideoJobActivities = ReturnType<typeof createVideoJobActivities>;
