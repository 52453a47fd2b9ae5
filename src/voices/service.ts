// The voice registry: cloned voices, each belonging to one workspace. From any other workspace a
// voice does not exist: every operation on it answers the same 404 as an id that never existed.
//
// Clones are not charged; they are counted: a workspace holds at most VOICE_CLONES_PER_WORKSPACE live
// voices (default 10; deleting one frees its slot), and a workspace without credit clones none (402),
// so no workspace can fill the provider account's voice slots that every workspace shares. Speech
// with a voice is what is billed.
//
// Deletion marks the registry row (one statement), then starts the durable provider-side deletion
// (workflows/voice-deletion.ts) with a deadline, outside any transaction; a deletion that could not be
// started is started by the reconciler (startPendingVoiceDeletions).
import { randomUUID } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { inTransaction, prepared, type Db, type Tx } from '../db/pool.js';
import { paymentRequired } from '../billing/owed.js';
import { ApiError, invalidParam, notFound } from '../errors.js';
import {
  NOT_CONFIGURED_MESSAGE,
  VoiceProviderError,
  type ProviderAccountProblem,
  type VoiceProvider,
  type VoiceProviderSet,
  type VoiceSample,
} from '../providers/voice/types.js';
import type { ApiKeyPrincipal } from '../account/workspaces.js';
import type { VoiceToResolve } from './speech-billing.js';
import type { SpeechProvider } from '../models/values.js';
import { isUuid } from '../ids.js';
import { WORKSPACE_ID_SA } from '../../workflows/messages.js';
import { voiceDeletionWorkflowId, type voiceDeletionWorkflow } from '../../workflows/voice-deletion.js';
import type { VoiceDeletionInput } from '../../workflows/messages.js';

/** Voices a workspace may hold at once unless configured (VOICE_CLONES_PER_WORKSPACE): each takes a slot of the shared provider account. */
export const DEFAULT_VOICE_CLONES_PER_WORKSPACE = 10;
/** Most voices a listing answers (the quota is far below it). */
export const VOICES_LISTED_MAX = 500;
const VOICE_LOCK_CLASS = 724_301_118;
/** How long a voice deletion waits for Temporal to start its workflow before leaving it to the reconciler. */
const START_DELETION_TIMEOUT_MS = 5_000;

export interface VoiceRecord {
  id: string;
  workspace_id: string;
  /** The provider that cloned the voice (recorded since voices were first kept): it speaks and deletes it. */
  provider: SpeechProvider;
  voice_id: string;
  name: string;
  requires_verification: boolean;
  created_at_ms: number;
}

export interface VoicesDeps {
  db: Db;
  /** The voice providers configured side by side; a voice is cloned, spoken and deleted at its own. */
  providers: VoiceProviderSet;
  temporal: Client;
  taskQueue: string;
  logger: Logger;
  /** Live voices a workspace may hold (default DEFAULT_VOICE_CLONES_PER_WORKSPACE). */
  voices_per_workspace_max?: number;
}

/** What the customer is told when the operator's provider account is the problem (details go to the log). */
const ACCOUNT_ANSWERS: Record<ProviderAccountProblem, { code: string; message: string; retry_after_s: number }> = {
  credentials: {
    code: 'provider_unavailable',
    message: 'the voice provider is unavailable to this service right now (an operator has been alerted); try again later',
    retry_after_s: 60,
  },
  quota_exhausted: {
    code: 'provider_quota_exhausted',
    message:
      "this service's voice provider account has no quota left right now (an operator has been alerted); nothing was charged: try again later",
    retry_after_s: 300,
  },
  voice_slots_full: {
    code: 'provider_voice_slots_full',
    message:
      "this service's voice provider account cannot hold more cloned voices right now (an operator has been alerted); nothing was created: try again later",
    retry_after_s: 300,
  },
};

/**
 * A provider failure as the customer's answer: the provider's refusal of the request is a 400 with its
 * message; the operator's account (credentials, quota, voice slots) is a 503 naming the kind of problem
 * but none of the account's details, which are logged as an error for the operator; a provider that
 * could not be reached is a 503, logged as a warning. Anything else is returned as it is.
 */
export function providerFailure(err: unknown, logger?: Logger): unknown {
  if (!(err instanceof VoiceProviderError)) return err;
  if (err.kind === 'rejected') return new ApiError(400, 'invalid_request_error', 'provider_rejected', err.message);
  const details = (err as { details?: unknown }).details;
  if (err.account) {
    logger?.error(
      { provider_problem: err.account, provider_message: err.message, provider_details: details },
      "the voice provider refused the service's account: an operator must act",
    );
    const a = ACCOUNT_ANSWERS[err.account];
    return new ApiError(503, 'provider_error', a.code, a.message, null, { 'Retry-After': String(a.retry_after_s) });
  }
  logger?.warn({ provider_message: err.message, provider_details: details }, 'the voice provider could not be reached');
  return new ApiError(503, 'provider_error', 'provider_unavailable', 'the voice provider could not be reached; try again later', null, {
    'Retry-After': '5',
  });
}

const voiceNotFound = (param: string, what: string) => notFound('voice_not_found', `no voice ${what}`, param);

const SELECT_VOICE = `SELECT id, workspace_id, provider, voice_id, name, requires_verification,
                             (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms
                        FROM voices`;

/** A speech's voice among the workspace's live ones (every speech looks it up): named, parsed and planned once per connection. */
const VOICE_FOR_SPEECH = prepared(
  'voice-for-speech',
  'SELECT id, provider FROM voices WHERE workspace_id = $1 AND voice_id = $2 AND deleted_at IS NULL ORDER BY created_at LIMIT 2',
);

export class VoicesService {
  constructor(private readonly deps: VoicesDeps) {}

  get providers(): VoiceProviderSet {
    return this.deps.providers;
  }

  /** A provider failure as the customer's answer, logged for the operator when it is theirs (providerFailure). */
  failure(err: unknown): unknown {
    return providerFailure(err, this.deps.logger);
  }

  /** Every voice operation answers 503 while no voice provider is configured. */
  assertConfigured(): void {
    if (!this.deps.providers.configured) {
      throw new ApiError(503, 'provider_error', 'provider_not_configured', NOT_CONFIGURED_MESSAGE);
    }
  }

  private get quota(): number {
    return this.deps.voices_per_workspace_max ?? DEFAULT_VOICE_CLONES_PER_WORKSPACE;
  }

  /** `consent_id`: the consent the clone was made with (src/voices/consents.ts); none marks the voice requires_verification. */
  async create(
    principal: ApiKeyPrincipal,
    input: { name: string; samples: VoiceSample[]; consent_id?: string | null; provider?: string | undefined },
  ): Promise<VoiceRecord> {
    this.assertConfigured();
    const clonedBy = this.cloningProvider(input.provider);
    const workspace_id = principal.workspace_id;
    // Checked before the provider is asked: a workspace without credit or with its quota used takes no slot.
    const available = await this.deps.db.query<{ available_micro_eur: number; owed_micro_eur: number }>(
      'SELECT balance_micro_eur - held_micro_eur AS available_micro_eur, owed_micro_eur FROM workspaces WHERE id = $1',
      [workspace_id],
    );
    // While it owes anything (a refund or dispute of spent credits), the workspace starts no paid work.
    if ((available.rows[0]?.owed_micro_eur ?? 0) > 0) throw paymentRequired(available.rows[0]!.owed_micro_eur);
    if (!((available.rows[0]?.available_micro_eur ?? 0) > 0)) throw noCreditToClone();
    if ((await this.countLive(this.deps.db, workspace_id)) >= this.quota) throw voiceLimitReached(this.quota);
    let cloned;
    try {
      cloned = await clonedBy.cloneVoice(input);
    } catch (err) {
      throw providerFailure(err, this.deps.logger);
    }
    const id = randomUUID();
    const provider = clonedBy.name;
    try {
      return await inTransaction(this.deps.db, async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [VOICE_LOCK_CLASS, workspace_id]);
        if ((await this.countLive(tx, workspace_id)) >= this.quota) throw voiceLimitReached(this.quota);
        const r = await tx.query<VoiceRecord>(
          `INSERT INTO voices (id, workspace_id, provider, voice_id, name, requires_verification, consent_id, api_key_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           RETURNING id, workspace_id, provider, voice_id, name, requires_verification, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms`,
          [
            id,
            workspace_id,
            provider,
            cloned.voice_id,
            input.name,
            cloned.requires_verification || !input.consent_id,
            input.consent_id ?? null,
            principal.key_id,
          ],
        );
        return r.rows[0]!;
      });
    } catch (err) {
      // Not registered: the provider must not keep a voice nobody can use or delete. Unless the
      // provider id already is another live registry row's (the unique violation on (provider,
      // voice_id)): that voice is in use and is not deleted. (The deletion activity checks this too;
      // if the check here fails, the deletion is scheduled and the activity decides.)
      const liveElsewhere = await this.deps.db
        .query('SELECT 1 FROM voices WHERE provider = $1 AND voice_id = $2 AND deleted_at IS NULL', [provider, cloned.voice_id])
        .then((r) => (r.rowCount ?? 0) > 0)
        .catch(() => false);
      if (liveElsewhere) {
        this.deps.logger.error(
          { provider, voice_id: cloned.voice_id },
          'a clone answered with the id of a live registered voice: not registered, not deleted',
        );
      } else {
        await this.startDeletion({ registry_id: id, workspace_id, provider, voice_id: cloned.voice_id }).catch((e: unknown) =>
          this.deps.logger.error(
            { err: e, provider, voice_id: cloned.voice_id },
            'could not schedule the deletion of an unregistered voice',
          ),
        );
      }
      throw err;
    }
  }

  /** The provider a clone goes to: the one named (400 naming `provider` when it is not configured here), else the first configured. */
  private cloningProvider(name: string | undefined): VoiceProvider {
    if (name === undefined) return this.deps.providers.default!;
    const provider = this.deps.providers.get(name);
    if (!provider) {
      throw invalidParam('provider', `voice provider "${name}" is not configured here; use one of ${this.deps.providers.names.join(', ')}`);
    }
    return provider;
  }

  async list(principal: ApiKeyPrincipal): Promise<VoiceRecord[]> {
    this.assertConfigured();
    const r = await this.deps.db.query<VoiceRecord>(
      `${SELECT_VOICE} WHERE workspace_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id LIMIT $2`,
      [principal.workspace_id, VOICES_LISTED_MAX],
    );
    return r.rows;
  }

  async get(principal: ApiKeyPrincipal, id: string): Promise<VoiceRecord> {
    this.assertConfigured();
    const r = isUuid(id)
      ? await this.deps.db.query<VoiceRecord>(`${SELECT_VOICE} WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL`, [
          id,
          principal.workspace_id,
        ])
      : null;
    const voice = r?.rows[0];
    if (!voice) throw voiceNotFound('id', id);
    return voice;
  }

  /**
   * Removes the voice from the registry now (one statement: no transaction waits on Temporal) and from
   * the provider durably: the deletion workflow is started with a deadline, and one that could not be
   * started is started by the reconciler. The row is marked first, so the deletion activity, which
   * never deletes a voice the registry holds live, always finds it marked.
   */
  async delete(principal: ApiKeyPrincipal, id: string): Promise<{ id: string }> {
    this.assertConfigured();
    if (!isUuid(id)) throw voiceNotFound('id', id);
    const r = await this.deps.db.query<{ provider: string; voice_id: string }>(
      'UPDATE voices SET deleted_at = now() WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL RETURNING provider, voice_id',
      [id, principal.workspace_id],
    );
    const row = r.rows[0];
    if (!row) throw voiceNotFound('id', id);
    try {
      await this.startDeletion({ registry_id: id, workspace_id: principal.workspace_id, provider: row.provider, voice_id: row.voice_id });
    } catch (err) {
      this.deps.logger.warn(
        { err_message: (err as Error).message, registry_id: id },
        'voice deletion workflow not started now: the reconciler starts it',
      );
    }
    return { id };
  }

  /**
   * The provider voice id that `voice` (a speech request's parameter) stands for in this workspace, and the
   * provider that speaks it: one of its own live cloned voices (at the provider that cloned it), or a preset
   * voice of a configured provider (`prefer`'s first, the provider of the model asked for). Anything else,
   * including a deleted voice and another workspace's voice, is the same 404. A voice whose provider is no
   * longer configured here is a 503.
   */
  async resolveForSpeech(
    principal: ApiKeyPrincipal,
    voice: string,
    prefer?: string,
    q: Db | Tx = this.deps.db,
  ): Promise<{ voice_id: string; registry_id: string | null; provider: VoiceProvider }> {
    // The workspace's live voices (the partial index voices_workspace_live): at most its quota of rows.
    const r = await q.query<{ id: string; provider: string }>({ ...VOICE_FOR_SPEECH, values: [principal.workspace_id, voice] });
    const rows = prefer === undefined ? r.rows : [...r.rows].sort((a, b) => Number(b.provider === prefer) - Number(a.provider === prefer));
    const row = rows[0];
    if (row) {
      const provider = this.deps.providers.get(row.provider);
      if (!provider) {
        throw new ApiError(
          503,
          'provider_error',
          'provider_not_configured',
          `voice "${voice}" was cloned by voice provider ${row.provider}, which is not configured here now`,
          'voice',
        );
      }
      return { voice_id: voice, registry_id: row.id, provider };
    }
    const preset = this.presetProvider(voice, prefer);
    if (preset) return { voice_id: voice, registry_id: null, provider: preset };
    throw voiceNotFound('voice', `"${voice}"; use a voice_id from GET /v2/audio/voices or a preset voice`);
  }

  /** The provider whose preset voice `voice` is (`prefer` first), if any. */
  private presetProvider(voice: string, prefer: string | undefined): VoiceProvider | undefined {
    const presets = this.deps.providers.list.filter((p) => p.presetVoices().includes(voice));
    return presets.find((p) => p.name === prefer) ?? presets[0];
  }

  /**
   * The provider a speech request's voice most likely resolves to, known without a read (`prefer`, else
   * the provider whose preset it is, else the one provider configured), and what the hold needs to
   * resolve the voice in its own statement and check it is that provider's (holdSpeechForVoice); null
   * when there is no such guess.
   */
  guessForSpeech(voice: string, prefer?: string): { provider: VoiceProvider; resolve: VoiceToResolve } | null {
    const preset = this.presetProvider(voice, prefer);
    const only = this.deps.providers.list.length === 1 ? this.deps.providers.list[0] : undefined;
    const provider = prefer !== undefined ? this.deps.providers.get(prefer) : (preset ?? only);
    if (!provider) return null;
    return { provider, resolve: { provider: provider.name, preset_provider: preset?.name ?? null, prefer: prefer ?? null } };
  }

  private startDeletion(input: VoiceDeletionInput): Promise<void> {
    return startVoiceDeletion(this.deps.temporal, this.deps.taskQueue, input);
  }

  private async countLive(q: Db | Tx, workspace_id: string): Promise<number> {
    const r = await q.query<{ n: number }>('SELECT count(*)::bigint AS n FROM voices WHERE workspace_id = $1 AND deleted_at IS NULL', [
      workspace_id,
    ]);
    return r.rows[0]!.n;
  }
}

/** Starts a voice's provider-side deletion (once per registry id), waiting at most START_DELETION_TIMEOUT_MS. */
export async function startVoiceDeletion(temporal: Client, taskQueue: string, input: VoiceDeletionInput): Promise<void> {
  try {
    await temporal.connection.withDeadline(Date.now() + START_DELETION_TIMEOUT_MS, () =>
      temporal.workflow.start<typeof voiceDeletionWorkflow>('voiceDeletionWorkflow', {
        workflowId: voiceDeletionWorkflowId(input.registry_id),
        taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: [{ key: WORKSPACE_ID_SA, value: input.workspace_id }],
      }),
    );
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/**
 * Starts the provider-side deletions of voices deleted from the registry at least `min_age_ms` ago and
 * not yet deleted at their provider (a start that failed, or was lost with its process); up to `limit`.
 * Starting one already running or done changes nothing (the workflow id is the registry id's).
 */
export async function startPendingVoiceDeletions(
  db: Db,
  temporal: Client,
  taskQueue: string,
  min_age_ms: number,
  limit: number,
): Promise<number> {
  const r = await db.query<{ id: string; workspace_id: string; provider: string; voice_id: string }>(
    `SELECT id, workspace_id, provider, voice_id FROM voices
      WHERE deleted_at IS NOT NULL AND provider_deleted_at IS NULL AND deleted_at < now() - make_interval(secs => $1::float8 / 1000)
      ORDER BY deleted_at LIMIT $2`,
    [min_age_ms, limit],
  );
  for (const v of r.rows) {
    await startVoiceDeletion(temporal, taskQueue, {
      registry_id: v.id,
      workspace_id: v.workspace_id,
      provider: v.provider,
      voice_id: v.voice_id,
    });
  }
  return r.rows.length;
}

function voiceLimitReached(quota: number): ApiError {
  return new ApiError(
    409,
    'invalid_request_error',
    'voice_limit_reached',
    `this workspace already has ${quota} cloned voices, the most it may hold at once; delete one it no longer needs first`,
  );
}

function noCreditToClone(): ApiError {
  return new ApiError(
    402,
    'insufficient_credits_error',
    'insufficient_credits',
    'cloning a voice needs credit in the workspace (speech with the voice is billed); nothing was created',
  );
}
