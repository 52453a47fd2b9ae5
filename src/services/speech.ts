// Text to speech: validate against the catalog, resolve the voice within the workspace, synthesise,
// then charge through the ledger, and only then hand the audio out. Audio that is not delivered is
// never charged: a provider failure charges nothing, and when the charge cannot be made (402) no
// audio is sent. The charge is idempotent per (workspace, Idempotency-Key); a retry with the same key
// and body is answered again without a second charge; with another body it is a 409.
import { createHash, randomUUID } from 'node:crypto';
import type { Db } from '../db/pool.js';
import { uuidForKey } from '../ids.js';
import { chargeSpeech } from '../billing/ledger.js';
import { defaultSpeechModelFor, findSpeechModel, speechCostMicroEur, type SpeechModel, type SpeechResponseFormat } from '../catalog.js';
import { ApiError, invalidParam, notFound } from '../http/errors.js';
import { microEurToEur } from '../money.js';
import { creditsCharged } from '../metrics.js';
import { getWorkspace, keyAllowsModel, type ApiKeyPrincipal } from './workspaces.js';
import { providerFailure, type VoicesService } from './voices.js';

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
const keyReused = () =>
  new ApiError(409, 'idempotency_error', 'idempotency_key_reused', 'this Idempotency-Key was already used with different parameters');

export class SpeechService {
  constructor(private readonly deps: { db: Db; voices: VoicesService }) {}

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
    const key = idempotencyKey ?? randomUUID();
    const speechRequestId = idempotencyKey ? speechRequestIdForKey(workspaceId, idempotencyKey) : randomUUID();
    const fingerprint = createHash('sha256').update(JSON.stringify([model.id, voice.voice_id, body.input, format])).digest('hex');

    // Cheap early answers before paying the provider: a key reused with another body, a balance too low.
    const prior = idempotencyKey ? await this.priorRequest(workspaceId, idempotencyKey) : null;
    if (prior && prior.request_fingerprint !== fingerprint) throw keyReused();
    if (!prior && (await getWorkspace(this.deps.db, workspaceId)).balance_micro_eur < cost_micro_eur) throw insufficientCredits(cost_micro_eur);

    let speech;
    try {
      speech = await this.deps.voices.provider.synthesize({ model: model.id, voice_id: voice.voice_id, text: body.input, format });
    } catch (err) {
      throw providerFailure(err);
    }
    if (speech.audio.length === 0) {
      throw new ApiError(502, 'provider_error', 'provider_invalid_response', 'the voice provider returned no audio; nothing was charged');
    }

    const charge = await chargeSpeech(this.deps.db, {
      speechRequestId,
      workspaceId,
      idempotencyKey: key,
      requestFingerprint: fingerprint,
      model: model.id,
      voice: voice.voice_id,
      voiceRegistryId: voice.registry_id,
      characters,
      responseFormat: format,
      audioBytes: speech.audio.length,
      cost_micro_eur,
    });
    if (!charge.ok) {
      if (charge.reason === 'insufficient_credits') throw insufficientCredits(cost_micro_eur);
      throw keyReused();
    }
    if (!charge.already_charged) creditsCharged.inc({ kind: 'speech' }, charge.cost_micro_eur);
    return {
      audio: speech.audio,
      content_type: speech.content_type,
      speech_request_id: charge.speech_request_id,
      model: model.id,
      characters,
      cost_micro_eur: charge.cost_micro_eur,
      replayed: charge.already_charged,
    };
  }

  private async priorRequest(workspaceId: string, idempotencyKey: string): Promise<{ request_fingerprint: string } | null> {
    const r = await this.deps.db.query<{ request_fingerprint: string }>(
      'SELECT request_fingerprint FROM speech_requests WHERE workspace_id = $1 AND idempotency_key = $2',
      [workspaceId, idempotencyKey],
    );
    return r.rows[0] ?? null;
  }
}
