// What the aggregator adapters (fal, Replicate) have in common: a job's fields turned into a model's own
// input by the catalog's input map, and a job of n videos run as n provider requests of one video each,
// submitted all or nothing and settled per video.
import type { VideoInputMap, VideoModelBackend } from '../../models/catalog.js';
import {
  ProviderError,
  type CancelAnswer,
  type InputImage,
  type VideoOperationStatus,
  type VideoOutputRef,
  type VideoSubmission,
} from './types.js';

const dataUri = (image: InputImage) => `data:${image.mime_type};base64,${image.bytes.toString('base64')}`;

/** `integer` 5, `string` "5", `seconds_suffix` "5s". */
function durationValue(seconds: number, format: NonNullable<VideoInputMap['duration']>['format']): number | string {
  return format === 'integer' ? seconds : format === 'string' ? String(seconds) : `${seconds}s`;
}

/** URLs where the provider reads the job's images (uploaded to it beforehand), instead of `data:` URIs. */
export interface ImageRefs {
  image?: string | undefined;
  last_frame?: string | undefined;
}

/**
 * The model's input for one request of a job: the fixed fields, then each of the job's fields under the
 * provider's name for it. A field the job has but the map cannot send is refused (final): the catalog
 * says the model takes it, so the file and the backend disagree, and guessing would bill a different video.
 */
export function mappedInput(req: VideoSubmission, map: VideoInputMap, what: string, imageRefs: ImageRefs = {}): Record<string, unknown> {
  const input: Record<string, unknown> = { ...map.fixed };
  const set = (field: string | undefined, value: unknown, name: string) => {
    if (value === undefined) return;
    if (field === undefined) throw new ProviderError(`${what} does not take ${name}`, { code: 'invalid_request', retryable: false });
    input[field] = value;
  };
  input[map.prompt] = req.prompt;
  if (map.duration) input[map.duration.field] = durationValue(req.params.durationSeconds, map.duration.format);
  if (map.resolution) input[map.resolution] = req.params.resolution;
  if (map.aspect_ratio) input[map.aspect_ratio] = req.params.aspectRatio;
  if (req.last_frame && !req.image)
    throw new ProviderError('a last frame needs a first frame', { code: 'invalid_request', retryable: false });
  set(
    req.last_frame ? (map.image_with_last_frame ?? map.image) : map.image,
    req.image ? (imageRefs.image ?? dataUri(req.image)) : undefined,
    'a first frame',
  );
  set(map.last_frame, req.last_frame ? (imageRefs.last_frame ?? dataUri(req.last_frame)) : undefined, 'a last frame');
  set(map.generate_audio, req.generate_audio, 'generateAudio');
  set(map.negative_prompt, req.negative_prompt, 'a negative prompt');
  set(map.seed, req.seed, 'a seed');
  return input;
}

/** The catalog's entry of this backend for the request's model, or a final refusal. */
export function backendEntry(
  entryFor: (model: string) => VideoModelBackend | undefined,
  model: string,
  backend: string,
): VideoModelBackend & { input: VideoInputMap } {
  const entry = entryFor(model);
  if (!entry?.input)
    throw new ProviderError(`model ${model} is not served by ${backend}`, { code: 'model_not_supported', retryable: false });
  return entry as VideoModelBackend & { input: VideoInputMap };
}

/**
 * Submits `n` requests at once, all or nothing: when one is refused, those made are cancelled (best
 * effort: a failure to cancel is not reported, the request would just run unbilled to the customer) and
 * the first refusal (in request order) is thrown.
 */
export async function submitEach<T>(
  n: number,
  submitOne: (index: number) => Promise<T>,
  cancelOne: (made: T) => Promise<unknown>,
): Promise<T[]> {
  const settled = await Promise.allSettled(Array.from({ length: n }, (_, i) => submitOne(i)));
  const refused = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (!refused) return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
  await Promise.allSettled(settled.flatMap((s) => (s.status === 'fulfilled' ? [cancelOne(s.value)] : [])));
  throw refused.reason;
}

/**
 * The job's status from its requests' statuses. Running while any runs: its progress is the mean over
 * the requests when every running one reports one (an ended request counts 100), else null; its queue
 * position the largest among those queued (the job waits for the last), else null. Once all have ended:
 * succeeded with the videos of those that succeeded (a shortfall is refunded per video by the core), or
 * failed with the first failure when none did.
 */
export function combineStatuses(statuses: readonly VideoOperationStatus[]): VideoOperationStatus {
  const running = statuses.filter((s) => s.state === 'running');
  if (running.length > 0) {
    const everyProgress = running.every((s) => typeof s.progress === 'number');
    const progress = everyProgress
      ? Math.floor(statuses.reduce((sum, s) => sum + (s.state === 'running' ? (s.progress as number) : 100), 0) / statuses.length)
      : null;
    const positions = running.flatMap((s) => (typeof s.queue_position === 'number' ? [s.queue_position] : []));
    return { state: 'running', progress, queue_position: positions.length > 0 ? Math.max(...positions) : null };
  }
  const outputs: VideoOutputRef[] = statuses.flatMap((s) => (s.state === 'succeeded' ? s.outputs : []));
  if (outputs.length > 0) return { state: 'succeeded', outputs };
  const failed = statuses.find((s) => s.state === 'failed');
  return failed ?? { state: 'failed', code: 'generation_failed', message: 'the provider returned no video' };
}

/** Where one request of a job stood when it was cancelled. */
export type CancelledRequest = 'queued' | 'running' | 'ended';

/**
 * The cancel answer of a job's n requests: those running when cancelled are billed and stopped (the
 * customer pays for them), those that had ended are billed but neither delivered nor charged, those still
 * queued cost nothing. `states` names each kind as the provider does, for the record.
 */
export function cancelAnswerOf(
  provider: string,
  requests: readonly CancelledRequest[],
  states: { queued: string; running: string; ended: string },
): CancelAnswer {
  const count = (kind: CancelledRequest) => requests.filter((r) => r === kind).length;
  const [queued, running, ended] = [count('queued'), count('running'), count('ended')];
  const answer = (() => {
    if (running === 0 && ended === 0) return `${provider}: cancelled while in the queue (${states.queued}); not billed`;
    const others = `${ended} had ended (${states.ended}), ${queued} had not started (${states.queued})`;
    if (running === 0) return `${provider}: none of ${requests.length} requests was running when cancelled: not billed; ${others}`;
    return `${provider}: ${running} of ${requests.length} requests were running (${states.running}) when cancelled and are billed; ${others}`;
  })();
  return { billed: running > 0, billed_units: running + ended, ended_units: ended, answer };
}
