// Speech's money: hold before speaking, capture on delivery, release on failure.
//
// A speech request reserves its cost (workspaces.held_micro_eur) before the provider is called, so at
// most as many provider calls run as the available balance covers. Delivery captures the hold as one
// ledger charge; a failure releases it. The request row is keyed by (workspace, Idempotency-Key): a
// replay of a delivered request is answered from the stored audio, never by the provider, never charged
// again. A hold whose process died mid-call is released by the reconciler after SPEECH_HOLD_TTL_MS.
// A streamed speech is marked delivered (`markSpeechDelivered`) before its last bytes go out: from then on
// its hold is only ever captured (by the request, retried, else by the reconciler), never released.
import { inTransaction, prepared, type Db, type Tx } from '../db/pool.js';
import { assertMicroEur } from '../money.js';
import { findSpeechModel, speechCostMicroEur } from '../models/catalog.js';
import { isUniqueViolation, lockWorkspaceBalance, NotFoundError, spendFromKey, SPEECH_HOLD_TTL_MS } from '../billing/ledger.js';

export { SPEECH_HOLD_TTL_MS };

export const speechChargeKey = (speechRequestId: string) => `speech_request:${speechRequestId}:charge`;

export interface SpeechHoldRequest {
  speechRequestId: string;
  workspaceId: string;
  /** The client's Idempotency-Key (or a fresh one): the same key from the same workspace is one request. */
  idempotencyKey: string;
  requestFingerprint: string;
  model: string;
  voice: string;
  voiceRegistryId: string | null;
  characters: number;
  responseFormat: string;
  cost_micro_eur: number;
  /** The API key making the request: its spend limit applies to the hold. */
  apiKeyId?: string | undefined;
  /** The voice provider that speaks it (usage by backend). */
  backend?: string | undefined;
}

export interface DeliveredSpeech {
  speech_request_id: string;
  cost_micro_eur: number;
  audio_storage_key: string | null;
  audio_content_type: string | null;
}

export type SpeechHoldResult =
  | { kind: 'held'; speech_request_id: string }
  /** The same request was delivered before: answer it again from storage, nothing charged. */
  | { kind: 'delivered'; prior: DeliveredSpeech }
  /** The same request is being spoken right now (another connection holds it). */
  | { kind: 'in_progress' }
  | { kind: 'idempotency_key_reused' }
  | { kind: 'insufficient_credits'; available_micro_eur: number }
  /** The workspace owes what a Stripe refund or dispute took beyond its balance (../billing/owed.ts). */
  | { kind: 'payment_required'; owed_micro_eur: number }
  | { kind: 'key_spend_limit_exceeded' };

/** A new held request's columns, as the hold inserts it: heldValues are $1 to $12 (status and held_at written as such). */
const HELD_COLUMNS = `id, workspace_id, idempotency_key, request_fingerprint, model, voice, voice_registry_id, characters, response_format,
  cost_micro_eur, status, held_at, api_key_id, backend`;
const heldValues = (s: SpeechHoldRequest) => [
  s.speechRequestId,
  s.workspaceId,
  s.idempotencyKey,
  s.requestFingerprint,
  s.model,
  s.voice,
  s.voiceRegistryId,
  s.characters,
  s.responseFormat,
  s.cost_micro_eur,
  s.apiKeyId ?? null,
  s.backend ?? null,
];

/**
 * The hold as one statement (one round trip, its own transaction): the workspace's balance row is
 * locked, then the key's, in that order (as every charge takes them); the request's row under its
 * Idempotency-Key is read (and, with a voice to resolve, the workspace's voice of its voice_id: a voice
 * that is not the priced provider's is `voice_unresolved`, before anything else); `kind` says what the
 * request is; and only when it is `held` are the row written (inserted, or a released one held again),
 * the key's spend and the workspace's holds raised, each of the three only if the row was written, so
 * all or none of them land.
 *
 * Under READ COMMITTED the locks return the rows as the last commit left them, but the request's row is
 * read as the statement began: a request that committed its row while this one waited for the lock is
 * not seen. Then the insert meets the unique (workspace, Idempotency-Key) and the statement fails whole,
 * or the re-hold finds the row no longer released and writes nothing (`hold_id` null): either way the
 * hold is tried again, and sees that request.
 */
const HOLD_SPEECH = prepared(
  'speech-hold',
  `WITH ws AS (
  SELECT balance_micro_eur - held_micro_eur AS available_micro_eur, owed_micro_eur
    FROM workspaces WHERE id = $2 FOR UPDATE
), api_key AS (
  SELECT spent_micro_eur, spend_limit_micro_eur
    FROM api_keys WHERE id = $11 AND EXISTS (SELECT 1 FROM ws) FOR UPDATE
), voice AS (
  -- With a voice to resolve ($13): the workspace's live voice of that voice_id, as VoicesService.resolveForSpeech picks it.
  SELECT id, provider FROM (
    SELECT id, provider, created_at FROM voices
     WHERE $13::text IS NOT NULL AND workspace_id = $2 AND voice_id = $6 AND deleted_at IS NULL ORDER BY created_at LIMIT 2
  ) v ORDER BY provider = $15::text DESC NULLS LAST, created_at LIMIT 1
), prior AS (
  SELECT id, status, request_fingerprint, cost_micro_eur, audio_storage_key, audio_content_type
    FROM speech_requests WHERE workspace_id = $2 AND idempotency_key = $3
), decision AS (
  SELECT CASE
           WHEN $13::text IS NOT NULL AND COALESCE((SELECT provider FROM voice), $14::text) IS DISTINCT FROM $13::text THEN 'voice_unresolved'
           WHEN p.id IS NOT NULL AND p.request_fingerprint <> $4 THEN 'idempotency_key_reused'
           WHEN p.status = 'delivered' THEN 'delivered'
           WHEN p.status = 'held' THEN 'in_progress'
           WHEN w.owed_micro_eur > 0 THEN 'payment_required'
           WHEN w.available_micro_eur < $10 THEN 'insufficient_credits'
           WHEN $11::uuid IS NOT NULL AND NOT EXISTS (
             SELECT 1 FROM api_key k WHERE k.spend_limit_micro_eur IS NULL OR k.spent_micro_eur + $10 <= k.spend_limit_micro_eur
           ) THEN 'key_spend_limit_exceeded'
           ELSE 'held'
         END AS kind,
         w.available_micro_eur, w.owed_micro_eur,
         p.id AS prior_id, p.cost_micro_eur AS prior_cost_micro_eur, p.audio_storage_key, p.audio_content_type
    FROM ws w LEFT JOIN prior p ON true
), inserted AS (
  INSERT INTO speech_requests (${HELD_COLUMNS})
  SELECT $1::uuid, $2::uuid, $3::text, $4::text, $5::text, $6::text,
         CASE WHEN $13::text IS NULL THEN $7::uuid ELSE (SELECT id FROM voice) END, $8::integer, $9::text, $10::bigint, 'held', now(), $11::uuid, $12::text
   WHERE (SELECT kind FROM decision) = 'held' AND NOT EXISTS (SELECT 1 FROM prior)
  RETURNING id
), reheld AS (
  -- Released before (the provider failed): this retry holds it again.
  UPDATE speech_requests SET status = 'held', held_at = now(), cost_micro_eur = $10, api_key_id = $11, backend = $12
   WHERE id = (SELECT id FROM prior) AND status = 'released' AND (SELECT kind FROM decision) = 'held'
  RETURNING id
), hold_row AS (
  SELECT id FROM inserted UNION ALL SELECT id FROM reheld
), key_spent AS (
  UPDATE api_keys SET spent_micro_eur = spent_micro_eur + $10 WHERE id = $11 AND EXISTS (SELECT 1 FROM hold_row)
  RETURNING 1
), ws_held AS (
  UPDATE workspaces SET held_micro_eur = held_micro_eur + $10 WHERE id = $2 AND EXISTS (SELECT 1 FROM hold_row)
  RETURNING 1
)
SELECT d.*, (SELECT id FROM hold_row) AS hold_id,
       (SELECT count(*) FROM key_spent)::int AS key_spent, (SELECT count(*) FROM ws_held)::int AS ws_held
  FROM decision d`,
);

interface HoldRow {
  kind:
    | 'voice_unresolved'
    | 'held'
    | 'delivered'
    | 'in_progress'
    | 'idempotency_key_reused'
    | 'insufficient_credits'
    | 'payment_required'
    | 'key_spend_limit_exceeded';
  available_micro_eur: number;
  owed_micro_eur: number;
  prior_id: string | null;
  prior_cost_micro_eur: number | null;
  audio_storage_key: string | null;
  audio_content_type: string | null;
  hold_id: string | null;
  key_spent: number;
  ws_held: number;
}

/** Reserves the request's cost, unless it was already delivered or is in flight (one statement: HOLD_SPEECH). */
export async function holdSpeech(db: Db | Tx, s: SpeechHoldRequest): Promise<SpeechHoldResult> {
  const held = await hold(db, s, null);
  if (held.kind === 'voice_unresolved') throw new Error('invariant: a hold without a voice to resolve resolved none');
  return held;
}

/**
 * The voice a request names, as the hold resolves it in its statement: the request was priced for
 * `provider`; the voice resolves to the provider of the workspace's live voice of that voice_id (`prefer`'s
 * first), else to `preset_provider` (the provider whose preset voice it is; null: none).
 */
export interface VoiceToResolve {
  provider: string;
  preset_provider: string | null;
  prefer: string | null;
}

/**
 * `holdSpeech` with the voice resolved in the same statement (the registry id recorded is the one it
 * finds): `voice_unresolved`, nothing held, when the voice does not resolve to `voice.provider`
 * (another provider's voice, or no voice): the request is then resolved and priced before its hold.
 */
export function holdSpeechForVoice(
  db: Db | Tx,
  s: Omit<SpeechHoldRequest, 'voiceRegistryId'>,
  voice: VoiceToResolve,
): Promise<SpeechHoldResult | { kind: 'voice_unresolved' }> {
  if (s.backend !== voice.provider) throw new Error('invariant: a speech is held for the provider it was priced for');
  return hold(db, { ...s, voiceRegistryId: null }, voice);
}

async function hold(
  db: Db | Tx,
  s: SpeechHoldRequest,
  voice: VoiceToResolve | null,
): Promise<SpeechHoldResult | { kind: 'voice_unresolved' }> {
  assertMicroEur(s.cost_micro_eur);
  if (!(s.cost_micro_eur > 0)) throw new Error('invariant: speech costs more than 0');
  if (!(Number.isSafeInteger(s.characters) && s.characters > 0)) throw new Error('invariant: speech of characters');
  let row: HoldRow | undefined;
  try {
    row = (
      await db.query<HoldRow>({
        ...HOLD_SPEECH,
        values: [...heldValues(s), voice?.provider ?? null, voice?.preset_provider ?? null, voice?.prefer ?? null],
      })
    ).rows[0];
  } catch (err) {
    // Two first requests with the same key raced to insert: the loser sees the winner's row.
    if (isUniqueViolation(err)) return hold(db, s, voice);
    throw err;
  }
  if (!row) throw new NotFoundError(`workspace ${s.workspaceId} not found`);
  switch (row.kind) {
    case 'voice_unresolved':
    case 'idempotency_key_reused':
    case 'in_progress':
    case 'key_spend_limit_exceeded':
      return { kind: row.kind };
    case 'delivered':
      return {
        kind: 'delivered',
        prior: {
          speech_request_id: row.prior_id!,
          cost_micro_eur: row.prior_cost_micro_eur!,
          audio_storage_key: row.audio_storage_key,
          audio_content_type: row.audio_content_type,
        },
      };
    case 'payment_required':
      return { kind: 'payment_required', owed_micro_eur: row.owed_micro_eur };
    case 'insufficient_credits':
      return { kind: 'insufficient_credits', available_micro_eur: row.available_micro_eur };
    case 'held':
      // A released row held again meanwhile by another request (seen stale, see above): try again.
      if (row.hold_id === null) return hold(db, s, voice);
      if (row.ws_held !== 1 || row.key_spent !== (s.apiKeyId === undefined ? 0 : 1)) {
        throw new Error(`invariant: speech request ${row.hold_id} held without its workspace's or key's hold`);
      }
      return { kind: 'held', speech_request_id: row.hold_id };
  }
}

/**
 * Whether the workspace (`workspaceId`, an SQL expression) has a live webhook endpoint: without one, a
 * charge's ledger entry records no budget alert (migration 024_budget_alerts.sql records one only for a
 * subscribed endpoint), and no deliveries are looked for after the commit. An endpoint created between
 * this read and the entry's trigger has its delivery started by the reconciler instead.
 */
const alertsPossible = (workspaceId: string) =>
  `EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.workspace_id = ${workspaceId} AND e.deleted_at IS NULL)`;

/** A charge that landed: what it cost, in which workspace, and whether it may have recorded budget alerts to deliver. */
export interface SpeechCharge {
  captured: boolean;
  cost_micro_eur: number;
  workspace_id: string;
  alerts_possible: boolean;
}

/**
 * The capture of a whole hold, as one statement, one round trip (it runs as a stream ends, on the pool the
 * next requests' holds wait for): the workspace's row locked first, then the request's, as a release takes
 * them, so the request's status is the last committed one. Only a held request is captured: its cost
 * charged as one ledger entry whose balance_after is the balance it left, the hold ended with it, the
 * request delivered with where its audio is kept. Always one row when the request exists: its status
 * before, its cost, the balance before and (captured) after.
 */
const CAPTURE_HELD = prepared(
  'speech-capture',
  `
  WITH req AS (
    SELECT workspace_id FROM speech_requests WHERE id = $1
  ), w AS (
    SELECT id, balance_micro_eur FROM workspaces WHERE id = (SELECT workspace_id FROM req) FOR UPDATE
  ), r AS (
    SELECT id, workspace_id, status, cost_micro_eur FROM speech_requests WHERE id = $1 AND EXISTS (SELECT 1 FROM w) FOR UPDATE
  ), c AS (
    SELECT id, workspace_id, cost_micro_eur FROM r WHERE status = 'held'
  ), moved AS (
    UPDATE workspaces ws SET balance_micro_eur = ws.balance_micro_eur - c.cost_micro_eur, held_micro_eur = ws.held_micro_eur - c.cost_micro_eur
      FROM c WHERE ws.id = c.workspace_id
    RETURNING ws.balance_micro_eur
  ), charged AS (
    INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, speech_request_id, balance_after_micro_eur)
    SELECT c.workspace_id, 'charge', -c.cost_micro_eur, $2, c.id, moved.balance_micro_eur FROM c, moved
    RETURNING balance_after_micro_eur
  ), delivered AS (
    UPDATE speech_requests s SET status = 'delivered', held_at = NULL, audio_bytes = $3, audio_storage_key = $4, audio_content_type = $5
      FROM c WHERE s.id = c.id
    RETURNING s.id
  )
  SELECT r.workspace_id, r.status, r.cost_micro_eur, w.balance_micro_eur AS balance_before_micro_eur,
         (SELECT balance_after_micro_eur FROM charged) AS balance_after_micro_eur, (SELECT count(*) FROM delivered)::int AS delivered,
         ${alertsPossible('r.workspace_id')} AS alerts_possible
    FROM r, w`,
);

/** Turns the hold into one ledger charge, with where the audio is kept for replays (one statement: CAPTURE_HELD). Idempotent. */
export async function captureSpeech(
  db: Db,
  c: { speechRequestId: string; audioBytes: number; audioStorageKey: string | null; audioContentType: string },
): Promise<SpeechCharge & { balance_micro_eur: number }> {
  if (!(Number.isSafeInteger(c.audioBytes) && c.audioBytes > 0)) throw new Error('invariant: delivered speech has audio');
  const r = await db.query<{
    workspace_id: string;
    status: string;
    cost_micro_eur: number;
    balance_before_micro_eur: number;
    balance_after_micro_eur: number | null;
    delivered: number;
    alerts_possible: boolean;
  }>({
    ...CAPTURE_HELD,
    values: [c.speechRequestId, speechChargeKey(c.speechRequestId), c.audioBytes, c.audioStorageKey, c.audioContentType],
  });
  const row = r.rows[0];
  if (!row) throw new Error(`invariant: speech request ${c.speechRequestId} was never held`);
  const cost_micro_eur = Number(row.cost_micro_eur);
  const before = Number(row.balance_before_micro_eur);
  const workspace_id = row.workspace_id;
  const alerts_possible = row.alerts_possible;
  if (row.status === 'delivered') return { captured: false, cost_micro_eur, balance_micro_eur: before, workspace_id, alerts_possible };
  if (row.status !== 'held') throw new Error(`invariant: speech request ${c.speechRequestId} is ${row.status}, not held`);
  assertMicroEur(cost_micro_eur);
  const after = Number(row.balance_after_micro_eur);
  if (row.delivered !== 1 || row.balance_after_micro_eur === null)
    throw new Error(`invariant: speech request ${c.speechRequestId} captured whole`);
  if (after !== before - cost_micro_eur || after < 0) throw new Error('invariant: capture moved the balance by the cost');
  return { captured: true, cost_micro_eur, balance_micro_eur: after, workspace_id, alerts_possible };
}

/** Gives a held amount back (the provider failed, or the request died). Idempotent; a delivered request (or one marked delivered) stays delivered. */
export async function releaseSpeech(db: Db, speechRequestId: string): Promise<boolean> {
  return inTransaction(db, async (tx) => {
    const r = await tx.query<{ workspace_id: string }>('SELECT workspace_id FROM speech_requests WHERE id = $1', [speechRequestId]);
    const row = r.rows[0];
    if (!row) return false;
    await lockWorkspaceBalance(tx, row.workspace_id);
    return releaseLocked(tx, row.workspace_id, speechRequestId);
  });
}

/** The release, under the workspace's lock. */
async function releaseLocked(tx: Tx, workspaceId: string, speechRequestId: string): Promise<boolean> {
  const released = await tx.query<{ cost_micro_eur: number; api_key_id: string | null }>(
    `UPDATE speech_requests SET status = 'released', held_at = NULL
      WHERE id = $1 AND status = 'held' AND delivered_at IS NULL RETURNING cost_micro_eur, api_key_id`,
    [speechRequestId],
  );
  const hold = released.rows[0];
  if (hold === undefined) return false;
  await tx.query('UPDATE workspaces SET held_micro_eur = held_micro_eur - $2 WHERE id = $1', [workspaceId, hold.cost_micro_eur]);
  if (hold.api_key_id !== null) await spendFromKey(tx, hold.api_key_id, -hold.cost_micro_eur);
  return true;
}

/** What `characters` of a speech model cost (null for a model the catalog no longer has: released, not guessed). */
function catalogSpeechCost(modelId: string, characters: number): number | null {
  const model = findSpeechModel(modelId);
  return model ? speechCostMicroEur(model, characters) : null;
}

/**
 * Settles holds older than `older_than_ms` (their request's process died); at most `limit`. A speech
 * streamed over a WebSocket that had spoken some of its text is charged what was spoken (its recorded
 * progress), the rest released; the others are released whole. Returns how many were settled.
 */
export async function releaseExpiredSpeechHolds(
  db: Db,
  older_than_ms: number,
  limit: number,
  spokenCost: (model: string, characters: number) => number | null = catalogSpeechCost,
): Promise<number> {
  const r = await db.query<{ id: string; model: string; spoken_characters: number | null; audio_bytes: number | null }>(
    `SELECT id, model, spoken_characters, audio_bytes FROM speech_requests
      WHERE status = 'held' AND delivered_at IS NULL AND held_at < now() - make_interval(secs => $1 / 1000.0)
      ORDER BY held_at LIMIT $2`,
    [older_than_ms, limit],
  );
  let released = 0;
  for (const row of r.rows) {
    const spoken = Number(row.spoken_characters ?? 0);
    const cost = spoken > 0 && row.audio_bytes ? spokenCost(row.model, spoken) : null;
    const settled =
      cost === null
        ? (await releaseSpeech(db, row.id)) && 'released'
        : (
            await settleSpokenSpeech(db, {
              speechRequestId: row.id,
              spokenCharacters: spoken,
              spoken_cost_micro_eur: cost,
              audioBytes: Number(row.audio_bytes),
              audioContentType: 'audio/pcm',
            })
          ).status;
    if (settled === 'released' || settled === 'captured') released++;
  }
  return released;
}

/**
 * Records that a held request's audio is going out (its last bytes follow), with where the audio is kept:
 * from now on the hold is captured, never released. True too when the request is captured already (a
 * capture whose answer was lost may have landed); false when it was released.
 */
export async function markSpeechDelivered(
  db: Db,
  c: { speechRequestId: string; audioBytes: number; audioStorageKey: string; audioContentType: string },
): Promise<boolean> {
  if (!(Number.isSafeInteger(c.audioBytes) && c.audioBytes > 0)) throw new Error('invariant: delivered speech has audio');
  const r = await db.query(
    `UPDATE speech_requests SET delivered_at = COALESCE(delivered_at, now()), audio_bytes = $2, audio_storage_key = $3, audio_content_type = $4
      WHERE id = $1 AND status IN ('held', 'delivered')`,
    [c.speechRequestId, c.audioBytes, c.audioStorageKey, c.audioContentType],
  );
  return r.rowCount === 1;
}

/**
 * Captures the holds of requests marked delivered at least `older_than_ms` ago whose capture never
 * landed (the database failed while their request tried); at most `limit`. Returns how many.
 */
export async function captureDeliveredSpeechHolds(
  db: Db,
  older_than_ms: number,
  limit: number,
  onFailure: (speechRequestId: string, err: Error) => void = () => {},
): Promise<{ captured: number; cost_micro_eur: number }> {
  const r = await db.query<{ id: string; audio_bytes: number; audio_storage_key: string; audio_content_type: string }>(
    `SELECT id, audio_bytes, audio_storage_key, audio_content_type FROM speech_requests
      WHERE status = 'held' AND delivered_at IS NOT NULL AND delivered_at < now() - make_interval(secs => $1 / 1000.0)
      ORDER BY delivered_at LIMIT $2`,
    [older_than_ms, limit],
  );
  let captured = 0;
  let cost_micro_eur = 0;
  for (const row of r.rows) {
    // One request that cannot be captured now does not keep the others from theirs.
    const done = await captureSpeech(db, {
      speechRequestId: row.id,
      audioBytes: row.audio_bytes,
      audioStorageKey: row.audio_storage_key,
      audioContentType: row.audio_content_type,
    }).catch((err: Error) => (onFailure(row.id, err), null));
    if (done?.captured) {
      captured++;
      cost_micro_eur += done.cost_micro_eur;
    }
  }
  return { captured, cost_micro_eur };
}

// ---------------------------------------------------------------------------------------------
// A speech streamed over a WebSocket (./speech-socket.ts): one request per context, its hold grown as
// its text arrives, before the provider is asked to speak it; settled once, for what was spoken.

/** A context's first hold: holdSpeech's answers for a request that is new by construction. */
export type SpeechContextHoldResult = Extract<
  SpeechHoldResult,
  { kind: 'held' | 'insufficient_credits' | 'payment_required' | 'key_spend_limit_exceeded' }
>;

/**
 * A WebSocket context's first hold: holdSpeech for a request never seen before (its id and its key are
 * fresh, so no earlier row can answer it), one statement, one round trip. With `voice`, the voice is
 * resolved in that statement as holdSpeechForVoice does (`voice_unresolved`, nothing held, when it is
 * not `voice.provider`'s).
 */
export async function holdSpeechContext(db: Db | Tx, s: SpeechHoldRequest): Promise<SpeechContextHoldResult>;
export async function holdSpeechContext(
  db: Db | Tx,
  s: Omit<SpeechHoldRequest, 'voiceRegistryId'>,
  voice: VoiceToResolve,
): Promise<SpeechContextHoldResult | { kind: 'voice_unresolved' }>;
export async function holdSpeechContext(
  db: Db | Tx,
  s: SpeechHoldRequest | Omit<SpeechHoldRequest, 'voiceRegistryId'>,
  voice?: VoiceToResolve,
): Promise<SpeechContextHoldResult | { kind: 'voice_unresolved' }> {
  const held = voice ? await holdSpeechForVoice(db, s, voice) : await holdSpeech(db, { voiceRegistryId: null, ...s });
  switch (held.kind) {
    case 'held':
    case 'insufficient_credits':
    case 'payment_required':
    case 'key_spend_limit_exceeded':
    case 'voice_unresolved':
      return held;
    default:
      throw new Error(`invariant: a context's fresh request ${s.speechRequestId} was answered ${held.kind}`);
  }
}

export type SpeechGrowResult =
  | { kind: 'held' }
  | { kind: 'insufficient_credits'; available_micro_eur: number }
  | { kind: 'key_spend_limit_exceeded' }
  /** Settled meanwhile (the reconciler, or the socket's end): nothing more may be held for it. */
  | { kind: 'not_held' };

/** Raises a held request to `characters` costing `cost_micro_eur` in all (its next text), if the balance and the key's limit cover the difference. */
export async function growSpeechHold(
  db: Db,
  g: { speechRequestId: string; workspaceId: string; characters: number; cost_micro_eur: number },
): Promise<SpeechGrowResult> {
  assertMicroEur(g.cost_micro_eur);
  return inTransaction(db, async (tx): Promise<SpeechGrowResult> => {
    const locked = await lockWorkspaceBalance(tx, g.workspaceId);
    const row = (
      await tx.query<{ status: string; cost_micro_eur: number; characters: number; api_key_id: string | null }>(
        'SELECT status, cost_micro_eur, characters, api_key_id FROM speech_requests WHERE id = $1 AND workspace_id = $2',
        [g.speechRequestId, g.workspaceId],
      )
    ).rows[0];
    if (row?.status !== 'held') return { kind: 'not_held' };
    if (!(g.characters > row.characters && g.cost_micro_eur >= row.cost_micro_eur)) throw new Error('invariant: a hold only grows');
    const more = g.cost_micro_eur - Number(row.cost_micro_eur);
    if (locked.available_micro_eur < more) return { kind: 'insufficient_credits', available_micro_eur: locked.available_micro_eur };
    if (row.api_key_id !== null && !(await spendFromKey(tx, row.api_key_id, more))) return { kind: 'key_spend_limit_exceeded' };
    await tx.query('UPDATE speech_requests SET characters = $2, cost_micro_eur = $3, held_at = now() WHERE id = $1', [
      g.speechRequestId,
      g.characters,
      g.cost_micro_eur,
    ]);
    await tx.query('UPDATE workspaces SET held_micro_eur = held_micro_eur + $2 WHERE id = $1', [g.workspaceId, more]);
    return { kind: 'held' };
  });
}

/**
 * Records how much of a held request the provider has spoken (characters, and bytes of audio), which is
 * also a sign of life: held_at moves on, so the reconciler leaves a speech that is still going alone.
 */
export async function recordSpokenSpeech(
  db: Db,
  p: { speechRequestId: string; spokenCharacters: number; audioBytes: number },
): Promise<void> {
  await db.query(
    `UPDATE speech_requests SET spoken_characters = GREATEST(COALESCE(spoken_characters, 0), $2), audio_bytes = GREATEST(COALESCE(audio_bytes, 0), $3),
            held_at = now()
      WHERE id = $1 AND status = 'held'`,
    [p.speechRequestId, p.spokenCharacters, p.audioBytes],
  );
}

/**
 * Settles a held request for what was spoken: `spokenCharacters` (at most what was held) charged at
 * `spoken_cost_micro_eur`, the rest of the hold released; nothing spoken releases it all. Idempotent.
 * `workspaceId` when the caller knows it (a speech socket's context: its principal's), else read; a request
 * of another workspace is not held there.
 */
export async function settleSpokenSpeech(
  db: Db,
  s: {
    speechRequestId: string;
    workspaceId?: string;
    spokenCharacters: number;
    spoken_cost_micro_eur: number;
    audioBytes: number;
    audioContentType: string;
  },
): Promise<{ status: 'captured' | 'released' | 'not_held'; characters: number; cost_micro_eur: number; alerts_possible: boolean }> {
  const notHeld = { status: 'not_held' as const, characters: 0, cost_micro_eur: 0, alerts_possible: false };
  if (s.spokenCharacters <= 0 || s.audioBytes <= 0) {
    return (await releaseSpeech(db, s.speechRequestId)) ? { ...notHeld, status: 'released' as const } : notHeld;
  }
  const workspaceId =
    s.workspaceId ??
    (await db.query<{ workspace_id: string }>('SELECT workspace_id FROM speech_requests WHERE id = $1', [s.speechRequestId])).rows[0]
      ?.workspace_id;
  if (workspaceId === undefined) return notHeld;
  assertMicroEur(s.spoken_cost_micro_eur);
  if (!(s.spoken_cost_micro_eur > 0)) throw new Error('invariant: spoken speech costs more than 0');
  const r = await db.query<{ characters: number; cost_micro_eur: number; alerts_possible: boolean }>({
    ...CAPTURE_SPOKEN,
    values: [
      s.speechRequestId,
      workspaceId,
      s.spokenCharacters,
      s.spoken_cost_micro_eur,
      speechChargeKey(s.speechRequestId),
      s.audioBytes,
      s.audioContentType,
    ],
  });
  const row = r.rows[0];
  return row
    ? {
        status: 'captured' as const,
        characters: row.characters,
        cost_micro_eur: Number(row.cost_micro_eur),
        alerts_possible: row.alerts_possible,
      }
    : notHeld;
}

/**
 * The capture of what was spoken, as one statement, one round trip (a speech socket settles every context
 * so, on the pool its next contexts' holds wait for): the workspace's row locked first, then the request's
 * (still held: a settlement or release that committed meanwhile is seen, and nothing happens); what was
 * spoken (at most what was held) charged as one ledger entry whose balance_after is the balance it left,
 * the whole hold ended with it, the unspoken rest given back to the key's spend, the request delivered
 * with its audio's bytes. The table's constraints (a balance never negative nor below what is held, one
 * charge per request) hold it; any failure leaves nothing written. No row: it was not held.
 */
const CAPTURE_SPOKEN = prepared(
  'speech-capture-spoken',
  `
  WITH w AS (
    SELECT id FROM workspaces WHERE id = $2 FOR UPDATE
  ), r AS (
    SELECT id, cost_micro_eur, characters, api_key_id FROM speech_requests
     WHERE id = $1 AND workspace_id = $2 AND status = 'held' AND EXISTS (SELECT 1 FROM w)
       FOR UPDATE
  ), c AS (
    SELECT id, api_key_id, cost_micro_eur AS held_micro_eur, LEAST($3::integer, characters) AS characters,
           LEAST($4::bigint, cost_micro_eur) AS cost_micro_eur
      FROM r
  ), key_given_back AS (
    UPDATE api_keys k SET spent_micro_eur = k.spent_micro_eur - (c.held_micro_eur - c.cost_micro_eur)
      FROM c WHERE k.id = c.api_key_id AND c.held_micro_eur > c.cost_micro_eur
    RETURNING k.id
  ), moved AS (
    UPDATE workspaces ws SET balance_micro_eur = ws.balance_micro_eur - c.cost_micro_eur, held_micro_eur = ws.held_micro_eur - c.held_micro_eur
      FROM c WHERE ws.id = $2
    RETURNING ws.balance_micro_eur
  ), charged AS (
    INSERT INTO ledger_entries (workspace_id, kind, amount_micro_eur, idempotency_key, speech_request_id, balance_after_micro_eur)
    SELECT $2, 'charge', -c.cost_micro_eur, $5, c.id, moved.balance_micro_eur FROM c, moved
    RETURNING id
  ), delivered AS (
    UPDATE speech_requests s SET characters = c.characters, cost_micro_eur = c.cost_micro_eur, spoken_characters = c.characters,
           status = 'delivered', held_at = NULL, audio_bytes = $6, audio_storage_key = NULL, audio_content_type = $7
      FROM c WHERE s.id = c.id
    RETURNING s.id
  )
  SELECT c.characters, c.cost_micro_eur, ${alertsPossible('$2')} AS alerts_possible
    FROM c WHERE EXISTS (SELECT 1 FROM charged) AND EXISTS (SELECT 1 FROM delivered)`,
);
