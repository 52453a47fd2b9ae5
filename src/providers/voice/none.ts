// VOICE_PROVIDER=none: no third-party voice provider is configured. The API answers every voice
// operation with 503 provider_not_configured before reaching here (it checks `configured`); these
// methods only back that up, e.g. for a deletion queued while another provider was configured.
import { VoiceProviderError, type ClonedVoice, type SynthesizedSpeech, type VoiceProvider } from './types.js';

export const NOT_CONFIGURED_MESSAGE = 'the third-party voice provider is not configured';

export class NoVoiceProvider implements VoiceProvider {
  readonly name = 'none';
  readonly configured = false;

  presetVoices(): readonly string[] {
    return [];
  }

  async cloneVoice(): Promise<ClonedVoice> {
    throw new VoiceProviderError('unavailable', NOT_CONFIGURED_MESSAGE);
  }

  async deleteVoice(): Promise<void> {
    throw new VoiceProviderError('unavailable', NOT_CONFIGURED_MESSAGE);
  }

  async synthesize(): Promise<SynthesizedSpeech> {
    throw new VoiceProviderError('unavailable', NOT_CONFIGURED_MESSAGE);
  }
}
