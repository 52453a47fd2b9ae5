// API representations of the catalog: models, their prices and limits, as /v2/models answers them. (A
// job's representation is src/video-jobs/present.ts: webhook events carry it too.)
import { microEurToEur } from '../money.js';
import type { PricePerSecond, SpeechModel, VideoModel, VideoModelAlias } from './catalog.js';
import type { VideoBackend } from './values.js';
import { IMAGE_BYTES_MAX } from './values.js';

const eurTable = (table: PricePerSecond) => Object.fromEntries(Object.entries(table).map(([res, micro]) => [res, microEurToEur(micro)]));

/** `usable`: the model's backends configured here, in order (videoBackendsFor); `backend` is the first, or the simulator standing in. */
export function presentVideoModel(
  model: VideoModel,
  backend: VideoBackend | null,
  usable: readonly VideoBackend[] = backend ? [backend] : [],
) {
  const prices = model.price_micro_eur_per_second;
  return {
    id: model.id,
    object: 'model' as const,
    kind: model.kind,
    owned_by: model.owned_by,
    family: model.family,
    variant: model.variant,
    region: model.backends.find((b) => b.backend === backend)?.region ?? model.region,
    backend,
    backends: model.backends.map((b) => ({ backend: b.backend, region: b.region, available: usable.includes(b.backend) })),
    simulated: backend === 'simulator',
    available: backend !== null,
    deprecated: false,
    replaced_by: null as string | null,
    durations_seconds: model.durations_seconds,
    resolutions: model.resolutions,
    aspect_ratios: model.aspect_ratios,
    max_n: model.max_n,
    supports_seed: model.supports_seed,
    supports_image: model.inputs.image,
    supports_last_frame: model.inputs.last_frame,
    image_mime_types: model.inputs.image ? model.inputs.image_mime_types : [],
    max_image_bytes: IMAGE_BYTES_MAX,
    supports_negative_prompt: model.inputs.negative_prompt,
    supports_audio: model.audio.supported,
    generate_audio_default: model.audio.supported && model.audio.default,
    pricing: {
      currency: 'EUR',
      unit: 'second_of_video',
      per_second_in_euro: eurTable((model.audio.supported && model.audio.default ? prices.with_audio : null) ?? prices.without_audio),
      per_second_with_audio_in_euro: prices.with_audio ? eurTable(prices.with_audio) : null,
      per_second_without_audio_in_euro: eurTable(prices.without_audio),
    },
  };
}

/** A retired id: everything as its replacement (what a job naming it gets), marked deprecated. */
export function presentVideoModelAlias(
  alias: VideoModelAlias,
  replacement: VideoModel,
  backend: VideoBackend | null,
  usable?: readonly VideoBackend[],
) {
  return { ...presentVideoModel(replacement, backend, usable), id: alias.id, deprecated: true, replaced_by: replacement.id };
}

/** A configured voice provider as the model lists show it: its name and its preset voices (its descriptor's). */
export interface ConfiguredVoiceProvider {
  name: string;
  preset_voices: readonly string[];
}

/** `voiceProviders`: the configured voice providers; a speech model is available when its provider is one of them. */
export function presentSpeechModel(model: SpeechModel, voiceProviders: readonly ConfiguredVoiceProvider[]) {
  const provider = voiceProviders.find((p) => p.name === model.provider);
  const available = provider !== undefined;
  return {
    id: model.id,
    object: 'model' as const,
    kind: model.kind,
    owned_by: model.owned_by,
    region: model.region,
    backend: available ? model.provider : null,
    simulated: model.provider === 'simulator',
    available,
    max_input_chars: model.max_input_chars,
    response_formats: model.response_formats,
    // The provider's preset voices (its descriptor's): usable by every workspace as `voice` without cloning.
    preset_voices: provider ? [...provider.preset_voices] : [],
    pricing: { currency: 'EUR', unit: '1000_characters', per_1000_characters_in_euro: microEurToEur(model.price_micro_eur_per_1000_chars) },
  };
}
