// API representations: internal records (micro-euros, storage keys) to the public JSON of contract.md 4.
// Video URLs are signed here, when the API answers, by whichever DownloadUrlSigner the storage has.
import { microEurToEur } from '../money.js';
import type { DownloadUrlSigner } from '../storage/signed-urls.js';
import type { VideoJobState } from '../../workflows/messages.js';
import type { PricePerSecond, SpeechModel, VideoBackend, VideoModel, VideoModelAlias } from '../catalog.js';
import { IMAGE_MAX_BYTES } from './schemas.js';
import { SIM_PRESET_VOICES } from '../providers/voice/simulator.js';
import { ELEVENLABS_PRESET_VOICES } from '../providers/voice/elevenlabs.js';

const seconds = (ms: number) => Math.floor(ms / 1000);

export async function presentVideoJob(job: VideoJobState, urls: DownloadUrlSigner, baseUrl: string) {
  const status = job.status === 'succeeded' || job.status === 'failed' ? job.status : 'pending';
  const videos =
    status === 'succeeded'
      ? await Promise.all(
          job.videos.map(async (v) => {
            const signed = await urls.downloadUrl(v.storage_key, baseUrl);
            return { url: signed.url, expires_at: signed.expires_at, content_type: v.content_type };
          }),
        )
      : [];
  return {
    id: job.job_id,
    object: 'video.generation_job' as const,
    status,
    model: job.model,
    created: seconds(job.created_at_ms),
    completed: job.completed_at_ms === null ? null : seconds(job.completed_at_ms),
    params: {
      durationSeconds: job.params.durationSeconds,
      resolution: job.params.resolution,
      aspectRatio: job.params.aspectRatio,
      n: job.params.n,
    },
    estimated_cost_in_euro: microEurToEur(job.estimated_cost_micro_eur),
    cost_in_euro: job.cost_micro_eur === null ? null : microEurToEur(job.cost_micro_eur),
    refunded_in_euro: microEurToEur(job.refunded_micro_eur),
    videos,
    error: status === 'failed' ? job.error : null,
    // Which backend ran the job (null until one accepted it), and the provider's progress while it runs.
    backend: job.backend ?? null,
    progress: status === 'succeeded' ? 100 : (job.progress ?? null),
    queue_position: status === 'pending' ? (job.queue_position ?? null) : null,
  };
}

const eurTable = (table: PricePerSecond) => Object.fromEntries(Object.entries(table).map(([res, micro]) => [res, microEurToEur(micro)]));

/** `usable`: the model's backends configured here, in order (videoBackendsFor); `backend` is the first, or the simulator standing in. */
export function presentVideoModel(model: VideoModel, backend: VideoBackend | null, usable: readonly VideoBackend[] = backend ? [backend] : []) {
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
    durations_seconds: model.durations_s,
    resolutions: model.resolutions,
    aspect_ratios: model.aspect_ratios,
    max_n: model.max_n,
    supports_seed: model.supports_seed,
    supports_image: model.inputs.image,
    supports_last_frame: model.inputs.last_frame,
    image_mime_types: model.inputs.image ? model.inputs.image_mime_types : [],
    max_image_bytes: IMAGE_MAX_BYTES,
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
export function presentVideoModelAlias(alias: VideoModelAlias, replacement: VideoModel, backend: VideoBackend | null, usable?: readonly VideoBackend[]) {
  return { ...presentVideoModel(replacement, backend, usable), id: alias.id, deprecated: true, replaced_by: replacement.id };
}

/** Each voice provider's preset voices: usable by every workspace as `voice` without cloning. */
const PRESET_VOICES: Readonly<Record<string, readonly string[]>> = { simulator: SIM_PRESET_VOICES, elevenlabs: ELEVENLABS_PRESET_VOICES };

export function presentSpeechModel(model: SpeechModel, configuredVoiceProvider: string) {
  const available = model.provider === configuredVoiceProvider;
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
    preset_voices: available ? [...(PRESET_VOICES[model.provider] ?? [])] : [],
    pricing: { currency: 'EUR', unit: '1000_characters', per_1000_characters_in_euro: microEurToEur(model.price_micro_eur_per_1000_chars) },
  };
}
