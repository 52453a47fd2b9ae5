// The video and voice provider adapters this configuration enables.
import { ConfigError, type Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { SimulatedVideoProvider } from '../providers/video/simulator.js';
import { VertexVeoProvider } from '../providers/video/vertex-veo.js';
import { googleAuthTokenSource, staticTokenSource } from '../providers/video/vertex-veo-cache.js';
import type { VideoProvider } from '../providers/video/types.js';
import { SimulatedVoiceProvider } from '../providers/voice/simulator.js';
import { NoVoiceProvider } from '../providers/voice/none.js';
import { ElevenLabsVoiceProvider } from '../providers/voice/elevenlabs.js';
import type { VoiceProvider } from '../providers/voice/types.js';
import { findVideoModel, providerModelIdFor, videoModelBackendFor, type ConfiguredBackends } from '../models/catalog.js';
import { VIDEO_BACKENDS, type VideoBackend } from '../models/values.js';
import { FalVideoProvider } from '../providers/video/fal.js';
import { ReplicateVideoProvider } from '../providers/video/replicate.js';

export function createVideoProviders(db: Db, config: Config): Map<string, VideoProvider> {
  const providers = new Map<string, VideoProvider>();
  if (config.simulator) {
    providers.set('simulator', new SimulatedVideoProvider(db, (model) => findVideoModel(model)?.accepts_parameters === true));
  }
  if (config.vertex) {
    const v = config.vertex;
    providers.set(
      'vertex',
      new VertexVeoProvider({
        projectId: v.projectId,
        // A retired id resolves to its replacement: Vertex never sees it (it answers 404 for those).
        modelIdFor: (id) => providerModelIdFor(id, 'vertex'),
        location: v.location,
        apiEndpoint: v.apiEndpoint,
        gcsApiEndpoint: v.gcsApiEndpoint,
        ...(v.outputGcsUri !== undefined ? { outputGcsUri: v.outputGcsUri } : {}),
        tokenSource: v.accessToken ? staticTokenSource(v.accessToken) : googleAuthTokenSource(),
      }),
    );
  }
  if (config.fal) {
    const { key, queueUrl, jwksUrl, userId } = config.fal;
    providers.set('fal', new FalVideoProvider({ key, queueUrl, jwksUrl, userId, backendFor: (id) => videoModelBackendFor(id, 'fal') }));
  }
  if (config.replicate) {
    const { token, apiUrl, webhookSecret } = config.replicate;
    providers.set(
      'replicate',
      new ReplicateVideoProvider({
        token,
        apiUrl,
        ...(webhookSecret ? { webhookSecret } : {}),
        backendFor: (id) => videoModelBackendFor(id, 'replicate'),
      }),
    );
  }
  return providers;
}

/**
 * The backends a process serves, as the catalog reads them: exactly those createVideoProviders built an
 * adapter for. The API passes this one set to the model lists (/v2 and /v1), the OpenAPI document and the
 * create, so none of them can name a backend the others miss.
 */
export function configuredBackends(providers: ReadonlyMap<string, unknown>): ConfiguredBackends {
  return Object.fromEntries(VIDEO_BACKENDS.map((b) => [b, providers.has(b)])) as Record<VideoBackend, boolean>;
}

/** The voice provider of VOICE_PROVIDER (ElevenLabs: its key, base URL and model from ELEVENLABS_*). */
export function createVoiceProvider(db: Db, config: Config): VoiceProvider {
  switch (config.voiceProvider) {
    case 'simulator':
      return new SimulatedVoiceProvider(db);
    case 'none':
      return new NoVoiceProvider();
    case 'elevenlabs': {
      const { apiKey, baseUrl, modelId } = config.elevenlabs;
      if (!apiKey) throw new ConfigError('ELEVENLABS_API_KEY must be set when VOICE_PROVIDER=elevenlabs');
      return new ElevenLabsVoiceProvider({ apiKey, baseUrl, modelId });
    }
  }
}
