// Every activity the worker registers, built from the process's dependencies.
import { createVideoJobActivities, type VideoJobActivityDeps } from './video-job.js';
import { createVoiceActivities, type VoiceActivityDeps } from './voice.js';
import { createReconcilerActivities, type ReconcilerActivityDeps } from './reconciler.js';
import { createWebhookActivities, type WebhookActivityDeps } from './webhook.js';
import { createBatchActivities, type BatchActivityDeps } from './batch.js';

export type ActivityDeps = VideoJobActivityDeps & VoiceActivityDeps & ReconcilerActivityDeps & WebhookActivityDeps & BatchActivityDeps;

export function createActivities(deps: ActivityDeps) {
  return {
    ...createVideoJobActivities(deps),
    ...createVoiceActivities(deps),
    ...createReconcilerActivities(deps),
    ...createWebhookActivities(deps),
    ...createBatchActivities(deps),
  };
}
