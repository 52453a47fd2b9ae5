// The public JSON of a video job: what GET /v2/videos/generations/{id} answers and what a webhook event
// carries as its data. Internal records (micro-euros, storage keys) become euros and signed URLs here, when
// the job is presented, by whichever DownloadUrlSigner the storage has.
import { microEurToEur } from '../money.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import type { VideoJobState } from '../../workflows/messages.js';

const seconds = (ms: number) => Math.floor(ms / 1000);

export async function presentVideoJob(job: VideoJobState, urls: DownloadUrlSigner, baseUrl: string) {
  const status = job.status === 'succeeded' || job.status === 'failed' ? job.status : 'pending';
  const videos =
    status === 'succeeded'
      ? await Promise.all(
          job.videos.map(async (v) => {
            const signed = await urls.downloadUrl(v.storage_key, baseUrl);
            return { url: signed.url, expires_at: signed.expires_at, content_type: v.content_type };
          }),
        )
      : [];
  return {
    id: job.job_id,
    object: 'video.generation_job' as const,
    status,
    model: job.model,
    created: seconds(job.created_at_ms),
    completed: job.completed_at_ms === null ? null : seconds(job.completed_at_ms),
    params: {
      durationSeconds: job.params.durationSeconds,
      resolution: job.params.resolution,
      aspectRatio: job.params.aspectRatio,
      n: job.params.n,
    },
    estimated_cost_in_euro: microEurToEur(job.estimated_cost_micro_eur),
    cost_in_euro: job.cost_micro_eur === null ? null : microEurToEur(job.cost_micro_eur),
    refunded_in_euro: microEurToEur(job.refunded_micro_eur),
    videos,
    error: status === 'failed' ? job.error : null,
    // Which backend ran the job (null until one accepted it), and the provider's progress while it runs.
    backend: job.backend ?? null,
    progress: status === 'succeeded' ? 100 : (job.progress ?? null),
    queue_position: status === 'pending' ? (job.queue_position ?? null) : null,
    // The batch that made the job (POST /v2/batches), null for a job created alone.
    batch_id: job.batch_id ?? null,
  };
}
