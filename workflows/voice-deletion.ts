// Durable provider-side deletion of a voice. The API marks the voice deleted in the registry and
// starts this workflow (id `voice-delete-<registry id>`, so starting it twice is starting it once);
// the deletion at the provider is then retried, with backoff capped at a minute, until it succeeds,
// across provider outages and restarts of ours. Orchestration only: the activity does the work and
// is idempotent (a provider that no longer has the voice counts as deleted).
import { proxyActivities } from '@temporalio/workflow';
import type { VoiceActivities } from '../activities/voice.js';
import type { VoiceDeletionInput } from './messages.js';

export interface VoiceDeletionResult {
  registry_id: string;
  voice_id: string;
  provider_deleted: true;
}

export const voiceDeletionWorkflowId = (registry_id: string) => `voice-delete-${registry_id}`;

const voices = proxyActivities<Pick<VoiceActivities, 'deleteProviderVoice'>>({
  startToCloseTimeout: '30 seconds',
  // No maximumAttempts: a deletion the customer asked for is never given up.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export async function voiceDeletionWorkflow(input: VoiceDeletionInput): Promise<VoiceDeletionResult> {
  await voices.deleteProviderVoice(input);
  return { registry_id: input.registry_id, voice_id: input.voice_id, provider_deleted: true };
}
