// VOICE_PROVIDER=none: no third-party voice provider is configured. The API answers every voice
// operation with 503 provider_not_configured before reaching here (it checks `configured`); these
// methods only back that up, e.g. for a deletion queued while another provider was configured.
import { voiceProvider } from '../descriptor.js';
import { NOT_CONFIGURED_MESSAGE, VoiceProviderError, type ClonedVoice, type SynthesizedSpeech, type VoiceProvider } from './types.js';

export { NOT_CONFIGURED_MESSAGE };

export class NoVoiceProvider implements VoiceProvider {
  readonly name = 'none';
  readonly configured = false;
  readonly pcm_rate_hz = null;

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

/** VOICE_PROVIDER=none (the default when the simulator is off): voices and speech answer 503. */
export const noVoiceDescriptor = voiceProvider({
  kind: 'voice',
  name: 'none',
  env: {},
  settings: () => ({}),
  build: () => new NoVoiceProvider(),
  capabilities: { preset_voices: [], pcm_rate_hz: null, formats: [], example_voice: null },
});
