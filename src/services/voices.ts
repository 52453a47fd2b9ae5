// The voice registry: cloned voices, each belonging to one workspace. From any other workspace a
// voice does not exist: every operation on it answers the same 404 as an id that never existed.
// Deletion marks the registry row in a transaction that also starts the durable provider-side
// deletion (workflows/voice-deletion.ts): the row is never marked without the workflow started.
import { randomUUID } from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { inTransaction, type Db, type Tx } from '../db/pool.js';
import { ApiError, notFound } from '../http/errors.js';
import { VoiceProviderError, type VoiceProvider, type VoiceSample } from '../providers/voice/types.js';
import { NOT_CONFIGURED_MESSAGE } from '../providers/voice/none.js';
import type { ApiKeyPrincipal } from './workspaces.js';
import { isUuid } from './video-jobs.js';
import { WORKSPACE_ID_SA } from '../../workflows/messages.js';
import { voiceDeletionWorkflowId, type VoiceDeletionInput, type voiceDeletionWorkflow } from '../../workflows/voice-deletion.js';

/** Voices a workspace may hold at once: keeps the (unpaginated) listing and provider usage bounded. */
export const MAX_VOICES_PER_WORKSPACE = 500;
const VOICE_LOCK_CLASS = 724_301_118;

export interface VoiceRecord {
  id: string;
  workspace_id: string;
  provider: string;
  voice_id: string;
  name: string;
  requires_verification: boolean;
  created_at_ms: number;
}

export interface VoicesDeps {
  db: Db;
  provider: VoiceProvider;
  temporal: Client;
  taskQueue: string;
  logger: Logger;
}

/** 503 when no provider is configured; a provider's refusal is a 400 with its message; unreachable is a 503. */
export function providerFailure(err: unknown): unknown {
  if (!(err instanceof VoiceProviderError)) return err;
  if (err.kind === 'rejected') return new ApiError(400, 'invalid_request_error', 'provider_rejected', err.message);
  return new ApiError(503, 'provider_error', 'provider_unavailable', 'the voice provider could not be reached; try again later', null, { 'Retry-After': '5' });
}

const voiceNotFound = (param: string, what: string) => notFound('voice_not_found', `no voice ${what}`, param);

const SELECT_VOICE = `SELECT id, workspace_id, provider, voice_id, name, requires_verification,
                             (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms
                        FROM voices`;

export class VoicesService {
  constructor(private readonly deps: VoicesDeps) {}

  get provider(): VoiceProvider {
    return this.deps.provider;
  }

  /** Every voice operation answers 503 while no voice provider is configured. */
  assertConfigured(): void {
    if (!this.deps.provider.configured) {
      throw new ApiError(503, 'provider_error', 'provider_not_configured', NOT_CONFIGURED_MESSAGE);
    }
  }

  /** `consent_id`: the consent the clone was made with (src/services/voice-consents.ts); none marks the voice requires_verification. */
  async create(principal: ApiKeyPrincipal, input: { name: string; samples: VoiceSample[]; consent_id?: string | null }): Promise<VoiceRecord> {
    this.assertConfigured();
    const workspace_id = principal.workspace_id;
    if ((await this.countLive(this.deps.db, workspace_id)) >= MAX_VOICES_PER_WORKSPACE) throw voiceLimitReached();
    let cloned;
    try {
      cloned = await this.deps.provider.cloneVoice(input);
    } catch (err) {
      throw providerFailure(err);
    }
    const id = randomUUID();
    const provider = this.deps.provider.name;
    try {
      return await inTransaction(this.deps.db, async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [VOICE_LOCK_CLASS, workspace_id]);
        if ((await this.countLive(tx, workspace_id)) >= MAX_VOICES_PER_WORKSPACE) throw voiceLimitReached();
        const r = await tx.query<VoiceRecord>(
          `INSERT INTO voices (id, workspace_id, provider, voice_id, name, requires_verification, consent_id) VALUES ($1, $2, $3, $4, $5, $6, $7)
           RETURNING id, workspace_id, provider, voice_id, name, requires_verification, (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms`,
          [id, workspace_id, provider, cloned.voice_id, input.name, cloned.requires_verification || !input.consent_id, input.consent_id ?? null],
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
        this.deps.logger.error({ provider, voice_id: cloned.voice_id }, 'a clone answered with the id of a live registered voice: not registered, not deleted');
      } else {
        await this.startDeletion({ registry_id: id, workspace_id, provider, voice_id: cloned.voice_id }).catch((e: unknown) =>
          this.deps.logger.error({ err: e, provider, voice_id: cloned.voice_id }, 'could not schedule the deletion of an unregistered voice'),
        );
      }
      throw err;
    }
  }

  async list(principal: ApiKeyPrincipal): Promise<VoiceRecord[]> {
    this.assertConfigured();
    const r = await this.deps.db.query<VoiceRecord>(
      `${SELECT_VOICE} WHERE workspace_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id LIMIT $2`,
      [principal.workspace_id, MAX_VOICES_PER_WORKSPACE],
    );
    return r.rows;
  }

  async get(principal: ApiKeyPrincipal, id: string): Promise<VoiceRecord> {
    this.assertConfigured();
    const r = isUuid(id)
      ? await this.deps.db.query<VoiceRecord>(`${SELECT_VOICE} WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL`, [id, principal.workspace_id])
      : null;
    const voice = r?.rows[0];
    if (!voice) throw voiceNotFound('id', id);
    return voice;
  }

  /** Removes the voice from the registry now and from the provider durably (retried until done). */
  async delete(principal: ApiKeyPrincipal, id: string): Promise<{ id: string }> {
    this.assertConfigured();
    if (!isUuid(id)) throw voiceNotFound('id', id);
    return inTransaction(this.deps.db, async (tx) => {
      const r = await tx.query<{ provider: string; voice_id: string }>(
        'UPDATE voices SET deleted_at = now() WHERE id = $1 AND workspace_id = $2 AND deleted_at IS NULL RETURNING provider, voice_id',
        [id, principal.workspace_id],
      );
      const row = r.rows[0];
      if (!row) throw voiceNotFound('id', id);
      // Started before the commit: if it cannot start, the row stays as it was and the client retries.
      try {
        await this.startDeletion({ registry_id: id, workspace_id: principal.workspace_id, provider: row.provider, voice_id: row.voice_id });
      } catch (err) {
        this.deps.logger.error({ err, registry_id: id }, 'could not start the voice deletion workflow');
        throw new ApiError(503, 'api_error', 'temporarily_unavailable', 'the voice could not be deleted right now; nothing changed, try again', null, {
          'Retry-After': '5',
        });
      }
      return { id };
    });
  }

  /**
   * The provider voice id that `voice` (a speech request's parameter) stands for in this workspace:
   * one of its own live cloned voices, or a preset voice of the provider. Anything else, including a
   * deleted voice and another workspace's voice, is the same 404.
   */
  async resolveForSpeech(principal: ApiKeyPrincipal, voice: string): Promise<{ voice_id: string; registry_id: string | null }> {
    const r = await this.deps.db.query<{ id: string; workspace_id: string; deleted: boolean }>(
      'SELECT id, workspace_id, deleted_at IS NOT NULL AS deleted FROM voices WHERE provider = $1 AND voice_id = $2',
      [this.deps.provider.name, voice],
    );
    const row = r.rows[0];
    if (row) {
      if (row.workspace_id === principal.workspace_id && !row.deleted) return { voice_id: voice, registry_id: row.id };
    } else if (this.deps.provider.presetVoices().includes(voice)) {
      return { voice_id: voice, registry_id: null };
    }
    throw voiceNotFound('voice', `"${voice}"; use a voice_id from GET /v2/audio/voices or a preset voice`);
  }

  private async startDeletion(input: VoiceDeletionInput): Promise<void> {
    try {
      await this.deps.temporal.workflow.start<typeof voiceDeletionWorkflow>('voiceDeletionWorkflow', {
        workflowId: voiceDeletionWorkflowId(input.registry_id),
        taskQueue: this.deps.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: [{ key: WORKSPACE_ID_SA, value: input.workspace_id }],
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  private async countLive(q: Db | Tx, workspace_id: string): Promise<number> {
    const r = await q.query<{ n: number }>('SELECT count(*)::bigint AS n FROM voices WHERE workspace_id = $1 AND deleted_at IS NULL', [workspace_id]);
    return r.rows[0]!.n;
  }
}

function voiceLimitReached(): ApiError {
  return new ApiError(
    409,
    'invalid_request_error',
    'voice_limit_reached',
    `this workspace already has ${MAX_VOICES_PER_WORKSPACE} voices, the most it may hold; delete one first`,
  );
}
