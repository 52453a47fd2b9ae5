// Text to speech: validate against the catalog, resolve the voice within the workspace, hold the cost,
// synthesise, keep the audio, capture the hold, and hand the audio out (src/billing/speech-billing.ts).
// The provider is called only with money held for it: at most as many calls run as the balance covers.
// A provider failure releases the hold (nothing charged). One request per (workspace, Idempotency-Key):
// a replay of a delivered request is answered from the kept audio, never by the provider, never charged
// again; while the first is in flight a replay is a 409; with another body it is a 409.
import { createHash, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Db } from '../db/pool.js';
import { uuidForKey } from '../ids.js';
import { captureSpeech, holdSpeech, releaseSpeech } from '../billing/speech-billing.js';
import type { Storage } from '../storage/local.js';
import { defaultSpeechModelFor, findSpeechModel, speechCostMicroEur, type SpeechModel, type SpeechResponseFormat } from '../catalog.js';
import { ApiError, invalidParam, keySpendLimitExceeded, notFound } from '../http/errors.js';
import { microEurToEur } from '../money.js';
import { creditsCharged } from '../metrics.js';
import { keyAllowsModel, type ApiKeyPrincipal } from './workspaces.js';
import type { VoicesService } from './voices.js';

export interface SpeechInput {
  model?: string | undefined;
  input: string;
  voice: string;
  response_format?: SpeechResponseFormat | undefined;
}

export interface SpeechResult {
  audio: Buffer;
  content_type: string;
  speech_request_id: string;
  model: string;
  characters: number;
  cost_micro_eur: number;
  /** An Idempotency-Key retry of a request already charged: delivered again, not charged again. */
  replayed: boolean;
}

/** Characters as billed and limited: Unicode code points. */
export const countCharacters = (text: string) => [...text].length;

/** A speech request id derived from (workspace, Idempotency-Key). */
export function speechRequestIdForKey(workspaceId: string, key: string): string {
  return uuidForKey('speech', workspaceId, key);
}

const insufficientCredits = (cost_micro_eur: number) =>
  new ApiError(
    402,
    'insufficient_credits_error',
    'insufficient_credits',
    `the workspace balance does not cover the cost of this speech (${microEurToEur(cost_micro_eur)} EUR); nothing was charged`,
  );
const audioKey = (speechRequestId: string, format: string) => `speech/${speechRequestId}.${format}`;

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const keyReused = () =>
  new ApiError(409, 'idempotency_error', 'idempotency_key_reused', 'this Idempotency-Key was already used with different parameters');

export class SpeechService {
  constructor(private readonly deps: { db: Db; voices: VoicesService; storage: Storage }) {}

  assertConfigured(): void {
    this.deps.voices.assertConfigured();
  }

  resolveModel(principal: ApiKeyPrincipal, requested: string | undefined): SpeechModel {
    const provider = this.deps.voices.provider;
    const model = requested === undefined ? defaultSpeechModelFor(provider.name) : findSpeechModel(requested);
    if (!model) {
      if (requested === undefined) throw new ApiError(503, 'provider_error', 'provider_not_configured', `no speech model is available for voice provider ${provider.name}`);
      throw notFound('model_not_found', `speech model "${requested}" does not exist`, 'model');
    }
    if (model.provider !== provider.name) {
      throw new ApiError(503, 'provider_error', 'provider_not_configured', `the provider of model ${model.id} is not configured`, 'model');
    }
    if (!keyAllowsModel(principal, model.id)) {
      throw new ApiError(403, 'permission_error', 'model_not_permitted', `this API key is not permitted to use model "${model.id}"`, 'model');
    }
    return model;
  }

  async speak(principal: ApiKeyPrincipal, body: SpeechInput, idempotencyKey: string | undefined): Promise<SpeechResult> {
    this.deps.voices.assertConfigured();
    const model = this.resolveModel(principal, body.model);
    const format = body.response_format ?? 'wav';
    if (!model.response_formats.includes(format)) {
      throw invalidParam('response_format', `response_format must be one of ${model.response_formats.join(', ')} for model ${model.id}`);
    }
    if (body.input.trim().length === 0) throw invalidParam('input', 'input must not be empty');
    const characters = countCharacters(body.input);
    if (characters > model.max_input_chars) {
      throw invalidParam('input', `input must be at most ${model.max_input_chars} characters for model ${model.id} (it has ${characters})`);
    }
    const voice = await this.deps.voices.resolveForSpeech(principal, body.voice);
    const cost_micro_eur = speechCostMicroEur(model, characters);
    const workspaceId = principal.workspace_id;
    const fingerprint = createHash('sha256').update(JSON.stringify([model.id, voice.voice_id, body.input, format])).digest('hex');
    const held = await holdSpeech(this.deps.db, {
      speechRequestId: idempotencyKey ? speechRequestIdForKey(workspaceId, idempotencyKey) : randomUUID(),
      workspaceId,
      idempotencyKey: idempotencyKey ?? randomUUID(),
      requestFingerprint: fingerprint,
      model: model.id,
      voice: voice.voice_id,
      voiceRegistryId: voice.registry_id,
      characters,
      responseFormat: format,
      cost_micro_eur,
      apiKeyId: principal.key_id,
    });
    const result = { model: model.id, characters };
    switch (held.kind) {
      case 'idempotency_key_reused':
        throw keyReused();
      case 'insufficient_credits':
        throw insufficientCredits(cost_micro_eur);
      case 'key_spend_limit_exceeded':
        throw keySpendLimitExceeded();
      case 'in_progress':
        throw new ApiError(409, 'idempotency_error', 'idempotency_request_in_progress', 'a request with this Idempotency-Key is being answered; retry in a moment', null, {
          'Retry-After': '1',
        });
      case 'delivered': {
        const audio = held.prior.audio_storage_key ? await this.deps.storage.open(held.prior.audio_storage_key) : null;
        if (!audio) throw new ApiError(410, 'invalid_request_error', 'speech_no_longer_available', 'this request was delivered and charged once; its audio is no longer kept');
        return {
          ...result,
          audio: await readAll(audio.stream),
          content_type: held.prior.audio_content_type ?? 'application/octet-stream',
          speech_request_id: held.prior.speech_request_id,
          cost_micro_eur: held.prior.cost_micro_eur,
          replayed: true,
        };
      }
      case 'held':
        break;
    }
    const speechRequestId = held.speech_request_id;
    const key = audioKey(speechRequestId, format);
    let speech;
    try {
      try {
        speech = await this.deps.voices.provider.synthesize({ model: model.id, voice_id: voice.voice_id, text: body.input, format });
      } catch (err) {
        throw this.deps.voices.failure(err);
      }
      if (speech.audio.length === 0) {
        throw new ApiError(502, 'provider_error', 'provider_invalid_response', 'the voice provider returned no audio; nothing was charged');
      }
      // Kept for replays of this Idempotency-Key, so they never reach the provider.
      await this.deps.storage.put(key, speech.audio, speech.content_type).catch((err: Error) => {
        throw new ApiError(503, 'api_error', 'storage_unavailable', `the audio could not be kept (${err.message}); nothing was charged`, null, { 'Retry-After': '5' });
      });
    } catch (err) {
      // Nothing delivered: give the hold back (if this fails too, the reconciler releases it later).
      await releaseSpeech(this.deps.db, speechRequestId).catch(() => {});
      throw err;
    }
    const captured = await captureSpeech(this.deps.db, {
      speechRequestId,
      audioBytes: speech.audio.length,
      audioStorageKey: key,
      audioContentType: speech.content_type,
    });
    if (captured.captured) creditsCharged.inc({ kind: 'speech' }, captured.cost_micro_eur);
    return { ...result, audio: speech.audio, content_type: speech.content_type, speech_request_id: speechRequestId, cost_micro_eur: captured.cost_micro_eur, replayed: false };
  }
}
