// What ElevenLabs' HTTP adapter (./elevenlabs.ts) and its WebSocket of partial text input
// (./elevenlabs-stream-input.ts) share: the PCM format asked for, and the error carrying what ElevenLabs said.
import { VoiceProviderCallError } from './types.js';

export const ELEVENLABS_SAMPLE_RATE_HZ = 22_050;
export const ELEVENLABS_OUTPUT_FORMAT = `pcm_${ELEVENLABS_SAMPLE_RATE_HZ}`;

/** A VoiceProviderError with what ElevenLabs said: its HTTP status, its error code, its Retry-After. */
export class ElevenLabsError extends VoiceProviderCallError {}
