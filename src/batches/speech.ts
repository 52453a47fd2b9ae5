// A batch's speech request, run by the batch workflow's activity: spoken by the voice provider, encoded,
// kept in storage, then settled in one transaction, as a speech request alone is settled but charged
// from the batch's reservation: its row recorded delivered (its cost drawn from the reservation) or
// released (nothing charged), and the request ended on the batch. A retry after a crash finds the row
// and settles nothing twice; a retry before it speaks again (the same deterministic audio, one charge).
import type { Db, Tx } from '../db/pool.js';
import { inTransaction } from '../db/pool.js';
import { drawFromReservation } from '../billing/reservations.js';
import type { Storage } from '../storage/local.js';
import type { VoiceProvider, VoiceProviderSet } from '../providers/voice/types.js';
import { VoiceProviderError } from '../providers/voice/types.js';
import { audioEncoder, pcmRateOf } from '../media/audio-encode.js';
import type { SpeechFormat } from '../models/values.js';
import { audioKey } from '../voices/speech.js';
import { lockBatchToRecord } from './billing.js';
import { endItem, type ItemError } from './items.js';

/** A speech request of a batch as validated at creation (batch_items.request). */
export interface BatchSpeechRequest {
  model: string;
  voice_id: string;
  voice_registry_id: string | null;
  input: string;
  format: SpeechFormat;
  speed?: number;
  characters: number;
  request_fingerprint: string;
  api_key_id: string | null;
  backend: string;
}

interface Spoken {
  audio: Buffer;
  content_type: string;
}

async function speak(provider: VoiceProvider, storage: Storage, id: string, r: BatchSpeechRequest): Promise<Spoken | ItemError> {
  try {
    const pcm = await provider.synthesize({ model: r.model, voice_id: r.voice_id, text: r.input, format: 'pcm', speed: r.speed });
    if (pcm.audio.length === 0)
      return { code: 'provider_invalid_response', message: 'the voice provider returned no audio; nothing was charged' };
    const encoder = audioEncoder(r.format, pcmRateOf(pcm.content_type), null, false);
    const audio = Buffer.concat([encoder.push(pcm.audio), await encoder.end()]);
    await storage.put(audioKey(id, r.format), audio, encoder.content_type);
    return { audio, content_type: encoder.content_type };
  } catch (err) {
    if (err instanceof VoiceProviderError)
      return {
        code: err.kind === 'rejected' ? 'provider_rejected' : 'provider_unavailable',
        message: `${err.message}; nothing was charged`,
      };
    throw err; // storage or anything else: the activity is retried
  }
}

export async function runBatchSpeech(
  deps: { db: Db; providers: VoiceProviderSet; storage: Storage },
  item: {
    batch_id: string;
    idx: number;
    workspace_id: string;
    request_id: string;
    estimated_cost_micro_eur: number;
    request: BatchSpeechRequest;
  },
): Promise<'completed' | 'failed' | 'already_ended'> {
  const ended = await deps.db.query('SELECT 1 FROM speech_requests WHERE id = $1', [item.request_id]);
  if (ended.rowCount === 1) return settle(deps.db, item, null);
  // Spoken by the provider that cloned the voice (recorded as the request's backend when it was validated).
  const provider = deps.providers.get(item.request.backend);
  const spoken: Spoken | ItemError | null = provider
    ? await speak(provider, deps.storage, item.request_id, item.request)
    : {
        code: 'provider_not_configured',
        message: `voice provider ${item.request.backend} is no longer configured; nothing was charged`,
      };
  return settle(deps.db, item, spoken);
}

/** Records the speech (delivered or released) and ends the request; `spoken` null: recorded before, only ends it. */
async function settle(
  db: Db,
  item: Parameters<typeof runBatchSpeech>[1],
  spoken: Spoken | ItemError | null,
): Promise<'completed' | 'failed' | 'already_ended'> {
  return inTransaction(db, async (tx) => {
    await lockBatchToRecord(tx, item.workspace_id, item.batch_id);
    // The row and the request's end commit together: a request whose row exists has ended.
    const prior = await tx.query<{ status: string }>('SELECT status FROM speech_requests WHERE id = $1', [item.request_id]);
    if (prior.rows[0]) return 'already_ended';
    if (spoken === null) throw new Error(`invariant: speech ${item.request_id} was recorded`);
    await record(tx, item, spoken);
    const failed = 'code' in spoken;
    await endItem(tx, item.batch_id, item.idx, {
      status: failed ? 'failed' : 'completed',
      cost_micro_eur: failed ? 0 : item.estimated_cost_micro_eur,
      error: failed ? spoken : null,
    });
    return failed ? 'failed' : 'completed';
  });
}

async function record(tx: Tx, item: Parameters<typeof runBatchSpeech>[1], spoken: Spoken | ItemError): Promise<void> {
  const r = item.request;
  const delivered = !('code' in spoken);
  await tx.query(
    `INSERT INTO speech_requests (id, workspace_id, idempotency_key, request_fingerprint, model, voice, voice_registry_id, characters,
                                  response_format, cost_micro_eur, status, api_key_id, backend, batch_id, audio_bytes, audio_storage_key,
                                  audio_content_type, delivered_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, CASE WHEN $11 = 'delivered' THEN now() END)`,
    [
      item.request_id,
      item.workspace_id,
      `batch:${item.batch_id}:${item.idx}`,
      r.request_fingerprint,
      r.model,
      r.voice_id,
      r.voice_registry_id,
      r.characters,
      r.format,
      item.estimated_cost_micro_eur,
      delivered ? 'delivered' : 'released',
      r.api_key_id,
      r.backend,
      item.batch_id,
      delivered ? spoken.audio.length : null,
      delivered ? audioKey(item.request_id, r.format) : null,
      delivered ? spoken.content_type : null,
    ],
  );
  if (delivered) {
    await drawFromReservation(tx, item.batch_id, item.estimated_cost_micro_eur, `its speech ${item.request_id}`);
  }
}
