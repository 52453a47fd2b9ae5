// Video jobs the usage tests write straight through the billing functions (no workflow): a job of two
// videos, settled with both delivered or failed with nothing delivered.
import type { Db } from '../../src/db/pool.js';
import { settleVideoJob } from '../../src/video-jobs/billing.js';

export function settleTwoVideos(db: Db, jobId: string, outcome: 'succeeded' | 'failed') {
  return settleVideoJob(db, {
    jobId,
    outcome,
    delivered: outcome === 'succeeded' ? 2 : 0,
    videos: outcome === 'succeeded' ? [0, 1].map((i) => ({ storage_key: `k${i}`, content_type: 'video/mp4', bytes: 1 })) : [],
    error: outcome === 'failed' ? { code: 'x', message: 'y' } : null,
    completed_at_ms: Date.now(),
  });
}
