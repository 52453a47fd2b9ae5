// Activities of the voice workflows. Idempotent: Temporal may run any of them again after a crash.
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { Db } from '../src/db/pool.js';
import { VoiceProviderError, type VoiceProviderSet } from '../src/providers/voice/types.js';
import type { VoiceDeletionInput } from '../workflows/messages.js';

export interface VoiceActivityDeps {
  db: Db;
  /** The worker's voice providers: a voice is deleted at the one that cloned it. */
  voiceProviders: VoiceProviderSet;
  logger?: Logger;
}

export function createVoiceActivities(deps: VoiceActivityDeps) {
  return {
    /**
     * Deletes the voice at its provider, then records that it did. Every failure is retried. A voice
     * the registry still holds live (the DELETE that started this did not commit, or the provider id
     * is another live row's) is never deleted: the activity then finishes without deleting.
     */
    async deleteProviderVoice(input: VoiceDeletionInput): Promise<void> {
      // FOR SHARE waits for a transaction still holding the row (the DELETE that started this
      // workflow marks the row before starting it) and then reads the row as that transaction left it.
      const live = await deps.db.query<{ id: string }>(
        'SELECT id FROM voices WHERE provider = $1 AND voice_id = $2 AND deleted_at IS NULL FOR SHARE',
        [input.provider, input.voice_id],
      );
      if (live.rows.length > 0) {
        deps.logger?.warn(
          { registry_id: input.registry_id, live_registry_id: live.rows[0]!.id, provider: input.provider, voice_id: input.voice_id },
          'voice deletion skipped: the voice is live in the registry',
        );
        return;
      }
      const provider = deps.voiceProviders.get(input.provider);
      if (!provider) {
        // Configuration changed since the voice was cloned: wait for its provider to be configured again.
        throw ApplicationFailure.retryable(
          `voice provider "${input.provider}" is not configured on this worker (VOICE_PROVIDERS is "${deps.voiceProviders.names.join(',')}")`,
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
      await deps.db.query('UPDATE voices SET provider_deleted_at = now() WHERE id = $1 AND provider_deleted_at IS NULL', [
        input.registry_id,
      ]);
    },
  };
}

export type VoiceActivities = ReturnType<typeof createVoiceActivities>;
