// The video and voice provider adapters this configuration enables, built through the providers' registry.
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { VideoProvider } from '../providers/video/types.js';
import type { VoiceProviderSet } from '../providers/voice/types.js';
import type { VideoCatalogView } from '../providers/descriptor.js';
import { buildVideoProviders, buildVoiceProviders, VIDEO_PROVIDERS } from '../providers/registry.js';
import { findVideoModel, videoModelBackendFor, type ConfiguredBackends } from '../models/catalog.js';
import type { VideoBackend } from '../models/values.js';

/** The catalog as the adapters read it: the process's catalog (src/models/catalog.ts). */
const CATALOG_VIEW: VideoCatalogView = {
  acceptsParameters: (model) => findVideoModel(model)?.accepts_parameters === true,
  backendFor: videoModelBackendFor,
};

export function createVideoProviders(db: Db, config: Config): Map<string, VideoProvider> {
  return buildVideoProviders(config.providers, { db, catalog: CATALOG_VIEW });
}

/**
 * The backends a process serves, as the catalog reads them: exactly those createVideoProviders built an
 * adapter for. The API passes this one set to the model lists (/v2 and /v1), the OpenAPI document and the
 * create, so none of them can name a backend the others miss.
 */
export function configuredBackends(providers: ReadonlyMap<string, unknown>): ConfiguredBackends {
  return Object.fromEntries(VIDEO_PROVIDERS.map((d) => [d.name, providers.has(d.name)])) as Record<VideoBackend, boolean>;
}

/** The voice providers of VOICE_PROVIDERS (or VOICE_PROVIDER), side by side, each with its own settings. */
export function createVoiceProviders(db: Db, config: Config): VoiceProviderSet {
  return buildVoiceProviders(config.providers, { db });
}
