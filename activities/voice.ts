// Activities of the voice workflows. Idempotent: Temporal may run any of them again after a crash.
import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../src/db/pool.js';
import { VoiceProviderError, type VoiceProvider } from '../src/providers/voice/types.js';
import type { VoiceDeletionInput } from '../workflows/voice-deletion.js';

export interface VoiceActivityDeps {
  db: Db;
  voiceProvider: VoiceProvider;
}

export function createVoiceActivities(deps: VoiceActivityDeps) {
  return {
    /** Deletes the voice at its provider, then records that it did. Every failure is retried. */
    async deleteProviderVoice(input: VoiceDeletionInput): Promise<void> {
      const provider = deps.voiceProvider;
      if (provider.name !== input.provider) {
        // Configuration changed since the voice was cloned: wait for its provider to be configured again.
        throw ApplicationFailure.retryable(
          `voice provider "${input.provider}" is not configured on this worker (VOICE_PROVIDER is "${provider.name}")`,
          'VoiceProviderNotConfigured',
        );
      }
      try {
        await provider.deleteVoice(input.voice_id);
      } catch (err) {
        if (err instanceof VoiceProviderError) {
          throw ApplicationFailure.retryable(err.message, err.kind === 'rejected' ? 'VoiceProviderRejected' : 'VoiceProviderUnavailable');
        }
        throw err;
      }
      await deps.db.query('UPDATE voices SET provider_deleted_at = now() WHERE id = $1 AND provider_deleted_at IS NULL', [input.registry_id]);
    },
  };
}

export type VoiceActivities = ReturnType<typeof createVoiceActivities>;
