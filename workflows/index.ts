// The worker's workflow bundle entry: every workflow type this service runs.
export { videoJobWorkflow } from './video-job.js';
export { voiceDeletionWorkflow } from './voice-deletion.js';
export { reconcileWorkflow } from './reconciler.js';
export { webhookDeliveryWorkflow } from './webhook-delivery.js';
export { batchWorkflow } from './batch.js';
